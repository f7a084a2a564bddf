/*
 * The core's state: per-communicator contexts and their caches.
 *
 * A context (one per user communicator, cached as an MPI attribute on it) holds a private
 * duplicate of the communicator on which all library traffic runs, the engine that runs the
 * requests in progress over an MPI transport on that duplicate (engine/engine.h: requests,
 * plans, tags, failure), the plan cache, and the memos of the front end.
 */
#ifndef MPIAR_CONTEXT_H
#define MPIAR_CONTEXT_H

#include <sched.h>
#include <stddef.h>
#include <stdint.h>

#include <mpi.h>

#include "mpiar.h"

#include "algorithms/algorithms.h"
#include "base/common.h"
#include "base/settings.h"
#include "core/comm_check.h"
#include "core/grequest.h"
#include "core/interrupt.h"
#include "schedule/schedule.h"
#include "schedule/topology.h"
#include "engine/engine.h"
#include "tuning/tuning.h"

struct mpiar_request;
struct mpiar__context;

/* Where a choice of algorithm came from (MPIAR_DEBUG=1 prints it with the choice). */
typedef enum mpiar__source {
  MPIAR__SRC_OPTION = 0, /* the call's options named the algorithm */
  MPIAR__SRC_ENV,        /* MPIAR_ALGORITHM */
  MPIAR__SRC_TABLE,      /* the tuning file's table */
  MPIAR__SRC_FITTED,     /* the cost model with the tuning file's fitted parameters */
  MPIAR__SRC_BUILTIN     /* the cost model with the built-in parameters */
} mpiar__source_t;

/*
 * What the automatic choices of one communicator use, set when its context is created: the
 * process's tuning file, if the ranks agree on it, and whether its table applies here.
 */
typedef struct mpiar__selector {
  const mpiar__tuning_t *tuning; /* NULL: no file (or the ranks disagree: built-in model) */
  int table;                     /* 1: the table was measured on a communicator like this one */
  char why[320];                 /* why the file's table (or the file) is not used */
} mpiar__selector_t;

/* One choice: the algorithm, its segment, and where it came from. */
typedef struct mpiar__choice {
  const mpiar__algorithm_t *alg;
  size_t segment_bytes;
  int source;                         /* mpiar__source_t */
  const mpiar__tuning_range_t *range; /* MPIAR__SRC_TABLE: the range that decided */
} mpiar__choice_t;

/* Plans kept per communicator (a training step's tensor sizes must all stay cached). */
#define MPIAR__PLAN_CACHE_MAX 1024
extern int mpiar__plan_cache_max; /* tests lower it to exercise eviction */
#define MPIAR__PLAN_BUCKETS 256   /* a power of two */

/*
 * The call cache: what a call's choice and plan depend on, besides its communicator, as one key
 * with named fields (hashed and compared in collectives.c, its one user). An entry holds the
 * choice, the plan and the argument check's algorithm number of that key; the context keeps one
 * request beside it (the last blocking call's, see `kept`).
 */
typedef struct mpiar__call_key { /* no padding: keys compare as bytes */
  size_t count;
  size_t segment_bytes; /* the options' (0: none) */
  int32_t coll;         /* mpiar__coll_t */
  int32_t root;         /* broadcast; -1 for an allreduce */
  int32_t dtype;        /* mpiar_dtype_t */
  int32_t op;           /* an allreduce's mpiar_op_t; MPIAR_SUM for a broadcast */
  int32_t in_place;
  int32_t reproducible; /* as resolved (options, then MPIAR_REPRODUCIBLE) */
  uint32_t settings;    /* the settings' generation */
  uint32_t zero;        /* 0 */
} mpiar__call_key_t;

typedef struct mpiar__call_entry {
  mpiar__call_key_t key;
  mpiar__plan_t *plan; /* NULL: empty (or its plan was evicted) */
  uint64_t alg_index;  /* the algorithm's number in the argument check's signature */
  mpiar__choice_t choice;
} mpiar__call_entry_t;

/* Entries of a context's call cache (a power of two; direct-mapped). */
#define MPIAR__CALL_CACHE 512

typedef struct mpiar__context {
  /* The engine first: what every call and every pass touches. */
  mpiar__engine_t eng;
  MPI_Comm user_comm;     /* the communicator the attribute sits on */
  MPI_Comm comm;          /* private duplicate: all library traffic */
  int local_ranks;        /* ranks of this communicator on this node */
  int nnodes;             /* nodes of this communicator */
  int *node_of;           /* node of every rank (NULL on one rank) */
  mpiar__topology_t topo; /* built from node_of unless MPIAR_TOPOLOGY=flat */
  int has_topo;
  int cores;     /* CPUs this process may use */
  int node_cpus; /* CPUs the ranks of this node may use together (union of their masks) */
  int yield;     /* 1: waiting ranks give their core away after a short spin */
  int attached;  /* 1 while the attribute holds the context */
  int refs;      /* the attribute + every request that points here */
  /* The node-shared memory of mpiar_alloc on this communicator (core/shm.c), or NULL; it holds
   * a reference. */
  struct mpiar__shm_domain *shm;

  int entered;          /* 0 free, 1 a user thread is inside a call, 2 the progress thread is */
  uint32_t check_seq;   /* argument checks run so far (control tags) */
  MPI_Request idup_req; /* an MPI_Comm_idup that did not finish before its deadline */
  MPI_Comm late_comm;   /* what that MPI_Comm_idup makes */

  /* Plan cache. */
  mpiar__plan_t *buckets[MPIAR__PLAN_BUCKETS];
  mpiar__plan_t *lru_head, *lru_tail;
  int nplans;
  /* The request of the last successful blocking call that used the call cache, kept (done,
   * holding its plan's reference but not the context's) for the next call of its entry, with
   * that call's buffers: the same allreduce again without options (same key and buffers)
   * passed every argument check already and runs the request as it is. `hash` is read before
   * entering (atomic; 0: none), the rest inside. */
  struct {
    struct mpiar_request *req; /* NULL: none */
    mpiar__call_entry_t *entry;
    const void *in;
    void *out;
    uint64_t hash;
  } kept;
  mpiar__call_entry_t *last; /* the entry of the last call that used the cache, or NULL */
  /* Choices already reported under MPIAR_DEBUG=1 (a small ring of recent ones). */
  struct {
    const void *builder;
    size_t segment_elems;
    size_t bytes_bucket;
  } reported[16];
  int nreported;
  struct mpiar__context *live_next, *live_prev;

  /* Large and rarely used, after everything a call touches. */
  /* What automatic choices use (tuning file, whether its table applies). */
  mpiar__selector_t selector;
  /* The call cache (a training step's few hundred sizes, again and again, select nothing and
   * look up no plan after the first step). */
  mpiar__call_entry_t calls[MPIAR__CALL_CACHE];
} mpiar__context_t;

/*
 * Largest MPI message in bytes; longer steps are split into several messages. A variable, not a
 * constant, so that tests can lower it and exercise the split with small data. A plan keeps the
 * value it was built with.
 */
extern size_t mpiar__max_message_bytes;

/* Plans built in this process so far (tests check that a cache hit builds nothing). */
extern size_t mpiar__plans_built;

/* The context of a request of the engine (a generalized request has none: NULL). */
static inline mpiar__context_t *mpiar__ctx_of(const mpiar__request_t *r) {
  return r->eng == NULL
             ? NULL
             : (mpiar__context_t *)(void *)((char *)r->eng - offsetof(mpiar__context_t, eng));
}

/* The engine's check_describe for the core's argument check (request.c): the name of field
 * @p f of the signature, with its smallest (@p which 0) or largest value written as text. */
const char *mpiar__check_describe(const uint64_t *acc, int f, int which, char *buf, size_t len);

/* ---- context.c ---- */

/* Set once MPI_Finalize has released every context: requests and contexts are then dead. */
extern int mpiar__finalized;
static inline int mpiar__mpi_finalized(void) {
  return __atomic_load_n(&mpiar__finalized, __ATOMIC_RELAXED);
}

/* Check that MPI is initialised and not finalised. */
int mpiar__check_mpi_state(void);

/*
 * The context of @p comm, created on first use (collective over @p comm), with @p timeout_ms
 * (0: none) bounding the wait for the other ranks. Fails with MPIAR_ERR_COMM for MPI_COMM_NULL,
 * an intercommunicator or an invalid handle, MPIAR_ERR_COMM_BROKEN for a broken context.
 * On success the calling thread has entered the context (mpiar__context_leave() releases it).
 */
int mpiar__context_enter(MPI_Comm comm, long timeout_ms, mpiar__context_t **ctx);

/*
 * A call on @p comm found this process's settings unusable (@p rc, with the detail set): if the
 * communicator has no context yet, make it now, so that the settings agreement of context
 * creation fails on every rank instead of leaving the others waiting for this one. @return
 * @p rc, with the same detail.
 */
int mpiar__context_join_failed(MPI_Comm comm, long timeout_ms, int rc);

/* The context of @p comm if this thread used it recently (no MPI call, no creation), or NULL. */
mpiar__context_t *mpiar__context_cached(MPI_Comm comm);

/* Enter a context known from a request (MPIAR_ERR_CONCURRENT if another thread is inside). */
int mpiar__context_enter_ctx(mpiar__context_t *ctx);
void mpiar__context_leave(mpiar__context_t *ctx);

/* Drop a reference; the context is freed when the last one goes. */
void mpiar__context_unref(mpiar__context_t *ctx);

/* Number of live contexts in this process (for tests of the release path). */
int mpiar__live_contexts(void);

/* Idle polls before a waiting rank starts yielding its core (when the policy yields). */
#define MPIAR__SPIN_POLLS 64

/* The wait policy: called after every pass that made no progress (@p idle such passes in a
 * row); inline, since a spinning wait calls it between every two polls. */
static inline void mpiar__idle(const mpiar__context_t *ctx, unsigned idle) {
  if (ctx->yield && idle > MPIAR__SPIN_POLLS) {
    sched_yield();
  }
}

/* ---- setup.c, nodes.c: what a new context learns with its ranks ---- */

/* Everything after the private duplicate exists: the engine, the settings agreement, the node
 * map, the selector, the threads and the wait policy. @p fault: mpiar__settings_fault(). */
int mpiar__context_setup(mpiar__context_t *ctx, const mpiar__settings_t *set, int fault,
                         long timeout_ms);

/* The engine over an MPI transport on ctx->comm (errors returned, never fatal). */
int mpiar__context_engine_open(mpiar__context_t *ctx);

/* The context's own allreduce (its creation), on a plan of the built-in model, with a deadline. */
int mpiar__context_allreduce(mpiar__context_t *ctx, void *buf, size_t count, mpiar_dtype_t dtype,
                             mpiar_op_t op, long timeout_ms);

/* FNV-1a of a text. */
uint64_t mpiar__text_hash(const char *text);

/* This process's node key (never 0): host name and network namespace. */
uint64_t mpiar__node_key(void);

/* ctx->node_of, nnodes and local_ranks from every rank's node key (rows[r * stride]). */
void mpiar__node_map(mpiar__context_t *ctx, const uint64_t *rows, size_t stride);

/* The CPUs the ranks of this rank's node may use together (collective); 0 when unknown. */
int mpiar__node_cpus(mpiar__context_t *ctx, long timeout_ms, int *out);

/* ---- plan.c ---- */

/* Find or build the plan for @p key; *built (if not NULL) says whether this call built it. */
int mpiar__plan_get(mpiar__context_t *ctx, const mpiar__plan_key_t *key, const char *name,
                    mpiar__builder_fn build, mpiar__plan_t **plan, int *built);
void mpiar__plan_free(mpiar__plan_t *plan);
void mpiar__plans_free_all(mpiar__context_t *ctx);

/* ---- request.c ---- */

/* A request for @p plan (a spare one, or a new one): inactive, holding a plan and context ref. */
int mpiar__request_new(mpiar__context_t *ctx, mpiar__plan_t *plan, mpiar__request_t **out);

/* Give a request back (to its plan's spares or to free()), dropping its references. */
void mpiar__request_release(mpiar__request_t *req);

/* Start an inactive request: assign a slot, reset the run state, post the first steps. */
int mpiar__request_start(mpiar__request_t *req);

/* Wait for a started request (inside its context) and collect its result (a nonpersistent one
 * is released; its handle, if it has one, is the caller's to give back). */
int mpiar__wait_one(mpiar__request_t *req);

/* Hand out a handle for @p r (see request.c: a table entry and its generation). */
int mpiar__handle_new(mpiar__request_t *r, mpiar_request_t *out);

/* The request a live handle names, or NULL (a null, stale or made-up handle); reads only the
 * handle table. */
mpiar__request_t *mpiar__handle_request(mpiar_request_t h);

/* Give a live handle back (a stale copy never matches again) and set it to MPIAR_REQUEST_NULL. */
void mpiar__handle_release(mpiar_request_t *h);

/* The request behind a public handle, for a public call named @p call: *out is NULL for
 * MPIAR_REQUEST_NULL; MPIAR_ERR_INVALID_ARG for a null pointer or a handle that is not live;
 * MPIAR_ERR_MPI_STATE after MPI_Finalize (the request is then freed). */
int mpiar__request_of(mpiar_request_t *req, const char *call, mpiar__request_t **out);

/* Wait for a started request (inside its context) to finish; it stays as it is (done), for the
 * caller to release or keep. @return its result (the error detail set). */
int mpiar__wait_result(mpiar__request_t *req);

/* Give the request a blocking call kept for the next like call back to its plan's spares. */
void mpiar__context_drop_kept(mpiar__context_t *ctx);

/* Forget the call cache's entries of @p plan (it is being freed). */
void mpiar__calls_forget_plan(mpiar__context_t *ctx, const mpiar__plan_t *plan);

/* ---- select.c ---- */

/*
 * The selector: the per-call name, then MPIAR_ALGORITHM / MPIAR_SEGMENT_BYTES, then the tuning
 * table of @p sel (NULL: none) where it applies and covers (bytes, dtype), then the cost model
 * (the tuning file's fitted parameters, else built-in) on topology @p topo (NULL: flat;
 * hierarchical entries compete only on a hierarchical one). The choice is a registry entry; with
 * @p reproducible the model costs each entry as its reproducible replacement, and the caller
 * runs that replacement (mpiar__algorithm_reproducible()), as for a named or tabled algorithm.
 */
int mpiar__select(const mpiar__settings_t *set, const mpiar__selector_t *sel, const char *requested,
                  size_t requested_segment_bytes, size_t bytes, mpiar_dtype_t dtype, int nranks,
                  const mpiar__topology_t *topo, int reproducible, mpiar__choice_t *out);

/* "tuning table", "MPIAR_ALGORITHM", ... for an mpiar__source_t. */
const char *mpiar__source_name(int source);

/* One line for MPIAR_DEBUG=1: where @p ch came from, with the file, range or reason. */
void mpiar__choice_describe(const mpiar__context_t *ctx, const mpiar__choice_t *ch, char *buf,
                            size_t len);

/*
 * Settings, MPIAR_ALGORITHM against the registry, and the tuning file (loaded at the first call
 * that needs it; *tuning is NULL without one; may be NULL). Every entry point that reads settings
 * calls this, so a bad value or file fails every call alike.
 */
int mpiar__settings_checked(const mpiar__settings_t **set, const mpiar__tuning_t **tuning);

/*
 * Which setting keeps this process's settings from being used: 0 when they are good (as
 * mpiar__settings_checked() finds them), else 1 + the index in mpiar__settings_names of the
 * malformed variable, of MPIAR_ALGORITHM for an unknown algorithm, of MPIAR_TUNING_FILE for a
 * file that cannot be read, or of MPIAR_KERNEL for a kernel level this CPU lacks. Sets the error
 * detail.
 */
int mpiar__settings_fault(void);

/* This process's machine: MPI library, CPU model, kernel level (computed once). */
void mpiar__fingerprint_here(mpiar__fingerprint_t *fp);

/*
 * A value every rank of a communicator must share for its table decision to be the same on all
 * of them: the tuning file's hash and this machine's fingerprint (a constant without a file).
 */
uint64_t mpiar__selector_key(const mpiar__tuning_t *t);

/*
 * Set ctx->selector from the process's tuning file @p t (NULL: none) once the node map is known;
 * @p agreed: every rank had the same mpiar__selector_key() (else the built-in model is used).
 */
void mpiar__selector_init(mpiar__context_t *ctx, const mpiar__tuning_t *t, int agreed);

/* Broadcast selection: per-call name, else the cheapest under the cost model. */
int mpiar__select_bcast(const char *requested, size_t bytes, size_t elem_size, int nranks,
                        const mpiar__algorithm_t **alg);

/*
 * Reduce-scatter (@p coll MPIAR__COLL_REDUCE_SCATTER) or allgather selection: per-call name, else
 * the cheapest automatic entry under the built-in cost model for @p bytes of the whole vector
 * (p blocks). MPIAR_ALGORITHM and tuning files are allreduce's and do not apply.
 */
int mpiar__select_rsag(int coll, const char *requested, size_t bytes, size_t elem_size,
                       int nranks, const mpiar__algorithm_t **alg);

/* Check MPIAR_ALGORITHM against the registry (every call does, whatever its options). */
int mpiar__check_env_algorithm(const mpiar__settings_t *set);

/* ---- progress.c ---- */

/* Start the progress thread if MPIAR_PROGRESS=thread (once per process). */
int mpiar__progress_thread_start(void);
/* Stop it (MPI_Finalize). */
void mpiar__progress_thread_stop(void);
int mpiar__progress_thread_running(void);
/* Tell the progress thread that something moved (it then stays awake). */
void mpiar__progress_note(void);

/* Walk the live contexts under their list lock (the progress thread). */
void mpiar__contexts_progress_all(void);

#endif /* MPIAR_CONTEXT_H */
