/*
 * Node-shared buffers and the zero-copy allreduce (docs/shm.md).
 *
 * mpiar_alloc() gives each rank a segment of an MPI_Win_allocate_shared window over the ranks of
 * its node; a process-wide table of those segments recognises a buffer in O(log n). The first
 * allocation on a communicator makes its shared-memory domain: the node's communicator and a
 * window of control blocks (one per rank) in which the ranks publish, per allreduce, which path
 * they run and where their buffers are. An allreduce on a communicator whose ranks all share one
 * node, with every buffer of the calling rank in mpiar_alloc memory of that communicator, runs on
 * the flags of those control blocks: each rank reduces its share straight from every rank's
 * buffer and writes the result into every rank's receive buffer.
 */
#ifndef MPIAR_SHM_H
#define MPIAR_SHM_H

#include <stddef.h>
#include <stdint.h>

#include "mpiar.h"

struct mpiar__context;
struct mpiar__shm_domain;

/* A zero-copy collective as the front end hands it over. */
typedef struct mpiar__shm_call {
  int coll;       /* mpiar__coll_t: allreduce, bcast, reduce_scatter_block, allgather */
  int root;       /* a broadcast's root (else -1) */
  const void *in; /* NULL: in place (a broadcast is always) */
  void *out;
  size_t count; /* as the call names it (a reduce-scatter's and an allgather's per rank) */
  mpiar_dtype_t dtype;
  mpiar_op_t op; /* MPIAR_SUM where the collective does not reduce */
  long timeout_ms; /* 0: none */
  int across; /* the caller allows the path across nodes: a blocking allreduce outside
                 reproducible mode (docs/shm.md) */
  /* Set by mpiar__shm_eligible(): where the buffers lie (allocation number, offset). */
  int in_id, out_id;
  size_t in_off, out_off;
} mpiar__shm_call_t;

/* Live allocations in this process (a relaxed read: 0 means no call need look further). */
extern int mpiar__shm_live;

/*
 * Does the collective of @p call on @p ctx (inside it; ctx->shm set) take the zero-copy path on
 * this rank? 1 when the receive buffer (and the send buffer, unless in place) lies in mpiar_alloc
 * memory of this communicator, each over the bytes the collective reads or writes there, and
 * either every rank of the communicator is on this node, or @p call allows the path across nodes
 * (call->across) and every node holds the same number of its ranks (the hierarchical form).
 */
int mpiar__shm_eligible(struct mpiar__context *ctx, mpiar__shm_call_t *call);

/* The argument check's algorithm field of the hierarchical form's inter-node step (no registry
 * number is this large): a rank on the MPI path that checks its call differs in it. */
#define MPIAR__SHM_HIER_ALG ((uint64_t)1 << 40)

/* Run the zero-copy collective, blocking (inside the context). */
int mpiar__shm_run(struct mpiar__context *ctx, const mpiar__shm_call_t *call);

/* Start it as a request (a generalized request polled by test and wait); *req its handle. */
int mpiar__shm_start(struct mpiar__context *ctx, const mpiar__shm_call_t *call,
                     mpiar_request_t *req);

/*
 * Make it a persistent request (inactive; mpiar_start runs it on the zero-copy path, each start
 * checking again that the buffers lie in mpiar_alloc memory of the communicator); *req its handle.
 */
int mpiar__shm_init(struct mpiar__context *ctx, const mpiar__shm_call_t *call,
                    mpiar_request_t *req);

/*
 * An operation of the engine starts on @p ctx (ctx->shm set): this rank runs it on the MPI path.
 * Publishes that in its control block, so that a rank that runs the same operation on the
 * zero-copy path fails (MPIAR_ERR_MISMATCH) instead of waiting for this one. Finishes this
 * rank's old nonblocking zero-copy operations first (docs/shm.md); @return
 * MPIAR_ERR_COMM_BROKEN when one of them broke the context.
 */
int mpiar__shm_note_engine(struct mpiar__context *ctx);

#endif /* MPIAR_SHM_H */
