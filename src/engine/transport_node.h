/*
 * The node transport: short messages between ranks of one node through rings in shared memory,
 * everything else through an inner transport (MPI in the library, the threads transport in the
 * engine's tests).
 *
 * Each ordered pair (sender, receiver) of ranks on one node that has a ring gets one: the sender
 * copies a message into the ring's next slot and publishes it with a release store of the slot's
 * sequence word; the receiver, at its polls, takes the slots in order (an acquire load of that
 * word), copies each message into the receive posted for it or into its own queue of unexpected
 * messages, and frees the slot with a release store of the ring's taken count, which the sender
 * loads with acquire before it writes that slot again. A send completes once it is in the ring;
 * when the ring is full it waits, in the order it was posted, and the receiver's next poll frees
 * room (the receiver never waits for the sender to free anything, so no cycle of waits exists).
 *
 * The rule that picks the path is one both sides compute from the message alone: a message takes
 * the ring when its peer has one and its length is at most the threshold, which is below the
 * engine's exact-length bound, so the length is in the tag and every message of one (peer, tag)
 * takes the same path, in the order it was sent. Control messages (send_ctl: notices, FINs, the
 * argument check) and every longer message use the inner transport.
 */
#ifndef MPIAR_TRANSPORT_NODE_H
#define MPIAR_TRANSPORT_NODE_H

#include <stddef.h>
#include <stdint.h>

#include "engine/transport.h"

/* Slots of one ring, and the payload of one slot: the largest message a ring carries. */
#define MPIAR__NODE_SLOTS 8
#define MPIAR__NODE_SLOT_BYTES ((size_t)4096)

/* Messages of at most this many bytes take the rings where the library sets them up (auto): the
 * sizes at which the rings were measured faster than MPI's own path, with MPICH and with Open MPI
 * (docs/performance.md, "The node transport"). */
#define MPIAR__NODE_THRESHOLD ((size_t)4096)

/* Bytes of one ring (whole cache lines); a segment holds rings end to end. */
size_t mpiar__node_ring_bytes(void);

/* Make @p n rings at @p mem (mpiar__node_ring_bytes() * n bytes, 64-byte aligned) empty. */
void mpiar__node_rings_init(void *mem, size_t n);

/*
 * A node transport over @p inner (state @p inner_state, which it owns from now on: its close
 * closes the inner one), for rank @p rank of @p size. @p out[r] is the ring this rank sends to
 * rank r on and @p in[r] the ring it receives from r on (NULL: messages to or from r take the
 * inner transport); both arrays are copied. Messages of at most @p threshold bytes (capped at a
 * slot) take the rings. @p unmap(@p arg) runs at close (the rings' memory is no longer used);
 * NULL: nothing. *tx is the transport's table (it lives in the state). @return MPIAR_SUCCESS
 * or MPIAR_ERR_NOMEM (the inner transport is then still the caller's).
 */
int mpiar__transport_node_open(const mpiar__transport_t *inner, void *inner_state, int rank,
                               int size, void *const *out, void *const *in, size_t threshold,
                               void (*unmap)(void *), void *arg, const mpiar__transport_t **tx,
                               void **state);

/*
 * Shared memory segments for the rings (POSIX shared memory, named from the process id and a
 * counter, so that ranks of one node attach to each other's by a number).
 */
typedef struct mpiar__node_segment {
  uint64_t id; /* (pid << 32) | counter; 0: none */
  void *base;
  size_t bytes;
} mpiar__node_segment_t;

/* Create this process's segment of @p bytes (zeroed). @return 0, or an errno value. */
int mpiar__node_segment_create(size_t bytes, mpiar__node_segment_t *seg);
/* Map the segment @p id made by a process of this node; it must have @p bytes. @return 0, or an
 * errno value (EINVAL: another size). */
int mpiar__node_segment_attach(uint64_t id, size_t bytes, mpiar__node_segment_t *seg);
/* Remove the segment's name (its mappings stay). */
void mpiar__node_segment_unlink(const mpiar__node_segment_t *seg);
/* Unmap it. */
void mpiar__node_segment_unmap(mpiar__node_segment_t *seg);

#endif /* MPIAR_TRANSPORT_NODE_H */
