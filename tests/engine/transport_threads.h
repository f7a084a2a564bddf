/*
 * The threads transport (tests only): the p ranks of a communicator are threads of one process,
 * and a seeded scheduler (or a byte stream, mpiar__tw_create_bytes) decides everything MPI
 * leaves open.
 *
 * The ranks take turns: one rank runs at a time, and at every poll or probe it hands the turn
 * to a rank the scheduler picks, so a run is a function of its seed alone (a failing seed
 * replays exactly). Messages are delivered adversarially, within MPI's guarantees only: the
 * messages of one ordered pair of ranks with one tag arrive in the order they were sent;
 * anything else may arrive in any order, and arrival, matching, and the completion of sends and
 * receives are each delayed for as many polls as the scheduler likes. A send's data is read
 * from the sender's buffer when the send or its receive completes, whichever comes first, so a
 * sender that reuses its buffer too early or a receiver that reads its buffer too early is
 * caught. The clock is virtual (it advances at every poll), so deadlines are deterministic too.
 *
 * Faults (mpiar__tw_fault_t) are injected through the same transport: a send that fails, and
 * (by the test) a rank that never runs the collective or runs it with another count. With
 * TW_DEBUG set in the environment, mpiar__tw_destroy() lists the messages never received.
 */
#ifndef MPIAR_TRANSPORT_THREADS_H
#define MPIAR_TRANSPORT_THREADS_H

#include <stddef.h>
#include <stdint.h>

#include "engine/transport.h"

extern const mpiar__transport_t mpiar__transport_threads;

typedef struct mpiar__tw_fault {
  int send_fail_rank; /* -1: none; else this rank's send number send_fail_at fails */
  int send_fail_at;
} mpiar__tw_fault_t;

typedef struct mpiar__tw mpiar__tw_t;

/* A world of @p p ranks driven by @p seed; @p tag_ub bounds the tags (the engine's layout). */
mpiar__tw_t *mpiar__tw_create(int p, uint64_t seed, long tag_ub, const mpiar__tw_fault_t *fault);

/*
 * A world whose scheduler takes every choice from @p bytes instead of a seed (a fuzzer's input):
 * each choice is one byte, read as the seeded generator's draw would be. Once the bytes run out,
 * every choice is a fixed one that lets everything progress (messages arrive and complete at
 * once; a rank keeps the turn for three passes, then hands it to the next live rank), so a run
 * still ends and is a function of the bytes alone. The bytes must outlive the world.
 */
mpiar__tw_t *mpiar__tw_create_bytes(int p, const uint8_t *bytes, size_t nbytes, long tag_ub,
                                    const mpiar__tw_fault_t *fault);

/* Bytes of the stream the scheduler has taken so far. */
size_t mpiar__tw_bytes_used(const mpiar__tw_t *w);

/* Did the fault's send failure happen (the rank made that many sends)? */
int mpiar__tw_fault_fired(const mpiar__tw_t *w);

/* Receives posted and never matched by a message (after the run: none should be left). */
size_t mpiar__tw_unmatched(const mpiar__tw_t *w);

/* The transport state of rank @p rank (the engine closes it; the world outlives it). */
void *mpiar__tw_state(mpiar__tw_t *w, int rank);

/*
 * Run @p body(rank, arg) on p threads taking turns (see the file header). @return 0, or -1 when
 * the threads could not be made.
 */
int mpiar__tw_run(mpiar__tw_t *w, void (*body)(int rank, void *arg), void *arg);

/* Give the turn away (a rank waiting outside the transport calls this between passes). */
void mpiar__tw_yield(void);

/* Messages never received and sends never completed at the end (for leak checks), then free. */
void mpiar__tw_destroy(mpiar__tw_t *w, size_t *leftover);

#endif /* MPIAR_TRANSPORT_THREADS_H */
