/*
 * Per-communicator state: a private duplicate of the user's communicator (so library messages
 * never match user messages), the plan cache, the scratch buffer and the wait policy.
 * A context is cached as an MPI attribute on the user's communicator and released by the
 * attribute's delete callback when that communicator is freed, or at MPI_Finalize.
 */
#ifndef MPIAR_CONTEXT_H
#define MPIAR_CONTEXT_H

#include <stddef.h>
#include <stdint.h>

#include <mpi.h>

#include "mpiar.h"

#include "algorithms/algorithms.h"
#include "base/common.h"
#include "schedule/schedule.h"

typedef enum mpiar__wait_policy {
  MPIAR__WAIT_AUTO = 0, /* yield when the node has more ranks than cores */
  MPIAR__WAIT_SPIN,
  MPIAR__WAIT_YIELD
} mpiar__wait_policy_t;

typedef enum mpiar__coll { MPIAR__COLL_ALLREDUCE = 0, MPIAR__COLL_BCAST } mpiar__coll_t;

/* What a schedule depends on: everything but the buffers, the datatype and the operation. */
typedef struct mpiar__plan_key {
  int coll;            /* mpiar__coll_t */
  size_t count;        /* elements */
  size_t elem_size;    /* bytes per element */
  const void *builder; /* registry entry */
  size_t segment_elems;
  int in_place;
  int root; /* bcast root, -1 for allreduce */
} mpiar__plan_key_t;

/*
 * A built schedule with the executor's working arrays, all allocated when the plan is built so
 * that running a cached plan allocates nothing.
 */
typedef struct mpiar__plan {
  mpiar__plan_key_t key;
  const char *name; /* algorithm name, for messages */
  mpiar__schedule_t sched;
  uint32_t *pending;         /* per step: dependencies not yet complete (working copy) */
  uint32_t *ready;           /* ready steps: communication queue, then computation queue */
  uint32_t *piece_first;     /* per step: first message piece (nsteps + 1 entries) */
  uint32_t *piece_left;      /* per step: pieces still in flight */
  MPI_Request *active;       /* outstanding requests, compact */
  uint32_t *active_step;     /* step of each outstanding request */
  int *done_idx;             /* MPI_Testsome output */
  MPI_Status *statuses;      /* MPI_Testsome output */
  size_t npieces;            /* total message pieces */
  uint32_t hash;             /* of the key */
  struct mpiar__plan *hnext; /* next plan in the same hash bucket */
  struct mpiar__plan *lru_prev, *lru_next; /* recency list, most recent first */
} mpiar__plan_t;

/*
 * Plans kept per communicator; the least recently used is freed beyond this. A training step
 * reduces tensors of a few hundred distinct sizes (ResNet-50: 161 tensors), and each size is a
 * plan: they must all stay cached for the step to allocate nothing.
 */
#define MPIAR__PLAN_CACHE_MAX 1024
extern int mpiar__plan_cache_max; /* MPIAR__PLAN_CACHE_MAX; tests lower it to exercise eviction */
#define MPIAR__PLAN_BUCKETS 256   /* a power of two */

typedef struct mpiar__context {
  MPI_Comm user_comm; /* the communicator the attribute sits on */
  MPI_Comm comm;      /* private duplicate: all library traffic */
  int rank, size;
  int local_ranks; /* ranks of this communicator on this node */
  int cores;       /* CPUs this process may use */
  mpiar__wait_policy_t wait;
  int broken; /* 1 after a failure mid-communication */
  char broken_reason[256];
  mpiar__plan_t *buckets[MPIAR__PLAN_BUCKETS]; /* plans by key hash */
  mpiar__plan_t *lru_head, *lru_tail;          /* all plans, most recently used first */
  int nplans;
  void *scratch;
  size_t scratch_bytes;
  /* Choices already reported under MPIAR_DEBUG=1 (small ring of recent ones). */
  struct {
    const void *builder;
    size_t segment_elems;
    size_t bytes_bucket;
  } reported[16];
  int nreported;
  /* The last automatic choice, so that a loop of same-size calls skips the cost model. */
  struct {
    int valid;
    size_t bytes, elem_size;
    const mpiar__algorithm_t *alg;
    size_t segment_bytes;
  } last_choice;
  struct mpiar__context *live_next, *live_prev; /* list of live contexts */
} mpiar__context_t;

/*
 * Largest MPI message in bytes; longer steps are split into several messages with the same tag.
 * A variable, not a constant, so that tests can lower it and exercise the split with small data.
 */
extern size_t mpiar__max_message_bytes;

/* Check that MPI is initialised and not finalised. */
int mpiar__check_mpi_state(void);

/*
 * The context of @p comm, created on first use (collective over @p comm: it duplicates it).
 * Fails with MPIAR_ERR_COMM for MPI_COMM_NULL or an intercommunicator.
 */
int mpiar__context_get(MPI_Comm comm, mpiar__context_t **ctx);

/* Number of live contexts in this process (for tests of the release path). */
int mpiar__live_contexts(void);

/* Mark the context broken with a reason; later calls fail with MPIAR_ERR_COMM_BROKEN. */
void mpiar__context_break(mpiar__context_t *ctx, const char *reason);

/*
 * Find or build the plan for @p key. On a miss, builds the schedule with @p build, finalizes it,
 * allocates the executor's arrays and grows the context's scratch.
 */
int mpiar__plan_get(mpiar__context_t *ctx, const mpiar__plan_key_t *key, const char *name,
                    mpiar__builder_fn build, mpiar__plan_t **plan);

/* Plans built in this process so far (tests check that a cache hit builds nothing). */
extern size_t mpiar__plans_built;

/* Free one plan. */
void mpiar__plan_free(mpiar__plan_t *plan);

/* Free every plan of a context. */
void mpiar__plans_free_all(mpiar__context_t *ctx);

/*
 * Run a plan. @p in and @p out are the INPUT and OUTPUT buffers (the same pointer in place).
 * @p timeout_ms bounds the call (0 = no deadline). On a deadline or MPI failure the
 * context is marked broken and the error detail names the rank, algorithm, step and peer.
 */
int mpiar__execute(mpiar__context_t *ctx, mpiar__plan_t *plan, const void *in, void *out,
                   mpiar_dtype_t dtype, mpiar_op_t op, long timeout_ms);

/* The selector: per-call name, then MPIAR_ALGORITHM / MPIAR_SEGMENT_BYTES, then built-in. */
int mpiar__select(const char *requested, size_t requested_segment_bytes, size_t bytes,
                  size_t elem_size, int nranks, const mpiar__algorithm_t **alg,
                  size_t *segment_bytes);

/* Broadcast selection: per-call name, else the cheapest under the cost model. */
int mpiar__select_bcast(const char *requested, size_t bytes, size_t elem_size, int nranks,
                        const mpiar__algorithm_t **alg);

/* Deadline in ms from the per-call value (0 = environment, < 0 = none). 0 in *ms means none. */
int mpiar__timeout_ms(int per_call, long *ms);

#endif /* MPIAR_CONTEXT_H */
