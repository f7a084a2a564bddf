/*
 * Requests: their memory (one block per request, sized by its plan, reused through the plan's
 * spares), starting (slots and sequence numbers), and the public test / wait / free calls.
 *
 * Slots. Operations of one context are numbered in the order they start (the same order on every
 * rank), and operation s runs in slot s mod nslots, whose number is in every tag of its messages.
 * A slot is reused only once the operation that had it has finished on this rank; the operation
 * that reuses it starts after that one on every rank, so every receive of the earlier one matched
 * before any receive of the later one is posted, and MPI's ordering of messages between two ranks
 * keeps each message with its own operation. When the slot of a new operation is still busy, the
 * start advances the context until it frees.
 */
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/context.h"
#include "core/shm.h"

/* Idle passes between two scans of unexpected messages (failure notices, wrong lengths). */
#define MPIAR__SCAN_PASSES 64

/* ---- interrupt checks ---- */

_Thread_local mpiar_interrupt_fn mpiar__interrupt_fn;
static _Thread_local void *interrupt_arg;
static _Thread_local double interrupt_last; /* when the check last ran (MPI_Wtime) */

/* The shortest time between two calls of a thread's interrupt check. */
#define MPIAR__INTERRUPT_INTERVAL_S 0.02

int mpiar_set_interrupt(mpiar_interrupt_fn fn, void *arg) {
  mpiar__error_clear();
  mpiar__interrupt_fn = fn;
  interrupt_arg = arg;
  interrupt_last = 0;
  return MPIAR_SUCCESS;
}

int mpiar__interrupt_due(void) {
  double now = MPI_Wtime();
  if (now - interrupt_last < MPIAR__INTERRUPT_INTERVAL_S) {
    return 0;
  }
  interrupt_last = now;
  return mpiar__interrupt_fn(interrupt_arg) != 0;
}

/* The error of an interrupted wait. */
static int interrupted(const char *what, int rank) {
  char who[32] = "";
  if (rank >= 0) {
    snprintf(who, sizeof who, "rank %d: ", rank);
  }
  return mpiar__error(MPIAR_ERR_INTERRUPTED,
                      "%s%s was interrupted by the calling thread's interrupt check "
                      "(mpiar_set_interrupt): the communicator is broken on every rank",
                      who, what);
}

static int abandon_array(int n, mpiar_request_t reqs[], const char *call);

int mpiar__request_new(mpiar__context_t *ctx, mpiar__plan_t *plan, mpiar__request_t **out) {
  mpiar__request_t *r = plan->spare;
  if (r != NULL) {
    plan->spare = r->next;
    plan->nspare--;
  } else {
    r = mpiar__request_alloc(plan);
    if (r == NULL) {
      return mpiar__error(MPIAR_ERR_NOMEM, "cannot allocate a request for a %zu-step %s plan",
                          plan->sched.nsteps, plan->name);
    }
  }
  r->magic = MPIAR__REQUEST_MAGIC;
  r->eng = &ctx->eng;
  r->plan = plan;
  r->persistent = 0;
  r->tainted = 0;
  r->state = MPIAR__REQ_INACTIVE;
  r->rc = MPIAR_SUCCESS;
  r->detail[0] = '\0';
  r->check = 0;
  r->check_rounds = r->check_round = 0;
  r->check_req.handle = 0;
  r->next = r->anext = r->aprev = NULL;
  plan->refs++;
  ctx->refs++;
  *out = r;
  return MPIAR_SUCCESS;
}

void mpiar__request_release(mpiar__request_t *r) {
  mpiar__context_t *ctx = mpiar__ctx_of(r);
  mpiar__plan_t *plan = r->plan;
  r->magic = 0;
  plan->refs--;
  if (r->tainted) {
    r->anext = ctx->eng.tainted;
    ctx->eng.tainted = r;
  } else if (plan->nspare < MPIAR__PLAN_SPARES && !ctx->eng.broken) {
    r->next = plan->spare;
    plan->spare = r;
    plan->nspare++;
  } else {
    mpiar__request_free_mem(r);
  }
  /* A plan of a released context stays in its cache until the context itself is freed. */
  mpiar__context_unref(ctx);
}

void mpiar__context_drop_kept(mpiar__context_t *ctx) {
  mpiar__request_t *r = ctx->kept.req;
  if (r == NULL) {
    return;
  }
  __atomic_store_n(&ctx->kept.hash, 0, __ATOMIC_RELAXED);
  ctx->kept.req = NULL;
  ctx->kept.entry = NULL;
  mpiar__plan_t *plan = r->plan;
  r->magic = 0;
  plan->refs--;
  if (plan->nspare < MPIAR__PLAN_SPARES && !ctx->eng.broken) {
    r->next = plan->spare;
    plan->spare = r;
    plan->nspare++;
  } else {
    mpiar__request_free_mem(r);
  }
}

/* Wait (advancing the context) until @p slot is free; the new request's deadline bounds it. */
static int slot_wait(mpiar__context_t *ctx, int slot, double deadline) {
  unsigned idle = 0;
  while (ctx->eng.slot_req[slot] != NULL && !ctx->eng.broken) {
    int progressed = 0;
    mpiar__progress(&ctx->eng, &progressed);
    if (progressed) {
      idle = 0;
      continue;
    }
    if (++idle % MPIAR__SCAN_PASSES == 0) {
      mpiar__scan(&ctx->eng);
      if (mpiar__interrupted()) {
        return interrupted("the wait for a free operation slot", ctx->eng.rank);
      }
      if (deadline > 0 && MPI_Wtime() > deadline) {
        return mpiar__error(MPIAR_ERR_TIMEOUT,
                            "rank %d: timed out waiting for operation %u to finish before "
                            "starting another in its slot",
                            ctx->eng.rank, ctx->eng.slot_req[slot] ? ctx->eng.slot_req[slot]->seq : 0);
      }
    }
    mpiar__idle(ctx, idle);
  }
  if (ctx->eng.broken) {
    return mpiar__error(MPIAR_ERR_COMM_BROKEN, "the communicator's context broke: %s",
                        ctx->eng.broken_reason);
  }
  return MPIAR_SUCCESS;
}

int mpiar__request_start(mpiar__request_t *r) {
  mpiar__context_t *ctx = mpiar__ctx_of(r);
  if (MPIAR__UNLIKELY(ctx->shm != NULL)) {
    int rc = mpiar__shm_note_engine(ctx); /* the zero-copy path's ranks learn this one's path */
    if (rc != MPIAR_SUCCESS) {
      return rc;
    }
  }
  double deadline = r->timeout_ms > 0 ? MPI_Wtime() + (double)r->timeout_ms * 1e-3 : 0;
  int slot = ctx->eng.next_slot; /* seq mod nslots */
  if (ctx->eng.slot_req[slot] != NULL) {
    int rc = slot_wait(ctx, slot, deadline);
    if (rc != MPIAR_SUCCESS) {
      if (!ctx->eng.broken) {
        char reason[512];
        snprintf(reason, sizeof reason, "%s", mpiar_last_error());
        mpiar__engine_break(&ctx->eng, rc, reason, 1);
        mpiar__error(rc, "%s", reason);
      }
      return rc;
    }
  }
  return mpiar__engine_start(&ctx->eng, r, deadline);
}

/* ---- the argument check's fields (the engine's check_describe) ---- */

static const char *const check_fields[8] = {"collective", "count",     "element size", "datatype",
                                            "operation",  "algorithm", "segment",      "root"};

const char *mpiar__check_describe(const uint64_t *acc, int f, int which, char *buf, size_t len) {
  uint64_t v = acc[(which ? 16 : 0) + 2 * f];
  if (f == 3 && mpiar_dtype_name((mpiar_dtype_t)v) != NULL) {
    snprintf(buf, len, "%s", mpiar_dtype_name((mpiar_dtype_t)v));
  } else if (f == 4 && mpiar_op_name((mpiar_op_t)v) != NULL) {
    snprintf(buf, len, "%s", mpiar_op_name((mpiar_op_t)v));
  } else if (f == 5 && acc[0] == MPIAR__COLL_BCAST) {
    snprintf(buf, len, "%s",
             v < (uint64_t)mpiar__bcast_algorithm_count ? mpiar__bcast_algorithms[v].name : "?");
  } else if (f == 5 && acc[0] == MPIAR__COLL_REDUCE_SCATTER) {
    snprintf(buf, len, "%s",
             v < (uint64_t)mpiar__reduce_scatter_algorithm_count
                 ? mpiar__reduce_scatter_algorithms[v].name
                 : "?");
  } else if (f == 5 && acc[0] == MPIAR__COLL_ALLGATHER) {
    snprintf(buf, len, "%s",
             v < (uint64_t)mpiar__allgather_algorithm_count ? mpiar__allgather_algorithms[v].name
                                                            : "?");
  } else if (f == 5 && v == MPIAR__SHM_HIER_ALG) {
    snprintf(buf, len, "zero-copy across nodes");
  } else if (f == 5 && v <= UINT32_MAX && mpiar__algorithm_at((unsigned)v) != NULL) {
    snprintf(buf, len, "%s", mpiar__algorithm_at((unsigned)v)->name);
  } else if (f == 0) {
    static const char *const colls[] = {"allreduce", "bcast", "reduce_scatter_block",
                                        "allgather"};
    snprintf(buf, len, "%s", v < sizeof colls / sizeof colls[0] ? colls[v] : "?");
  } else if (f == 7 && v == UINT64_MAX) {
    snprintf(buf, len, "none");
  } else {
    snprintf(buf, len, "%llu", (unsigned long long)v);
  }
  return check_fields[f];
}

/* ---- handles ---- */

/*
 * A handle names a request by an entry of a process-wide table and that entry's generation:
 * (generation << 32) | (entry + 1). Releasing a handle advances its entry's generation, so a copy
 * of a completed or freed handle never names the request that takes the entry next, and telling
 * whether a handle is live reads only the table, whose entries are never freed, never the request
 * behind it (which may have been freed or reused). The table grows by chunks, found without a
 * lock; entries are taken and given back under one lock.
 */
#define HANDLE_CHUNK 1024
#define HANDLE_CHUNKS 4096 /* 4 Mi handles live at once */

typedef struct handle_entry {
  mpiar__request_t *r; /* NULL: free */
  uint32_t gen;
  uint32_t next_free; /* free list (index + 1; 0 ends it) */
} handle_entry_t;

static handle_entry_t *handle_chunks[HANDLE_CHUNKS];
static uint32_t handle_used; /* entries handed out so far (free ones included) */
static uint32_t handle_free; /* free list head (index + 1; 0: empty) */
static pthread_mutex_t handle_lock = PTHREAD_MUTEX_INITIALIZER;

_Static_assert(sizeof(uintptr_t) >= 8, "a handle holds a 32-bit generation and a 32-bit entry");

static handle_entry_t *handle_entry(uint32_t index) {
  handle_entry_t *chunk =
      __atomic_load_n(&handle_chunks[index / HANDLE_CHUNK], __ATOMIC_ACQUIRE);
  return chunk != NULL ? &chunk[index % HANDLE_CHUNK] : NULL;
}

int mpiar__handle_new(mpiar__request_t *r, mpiar_request_t *out) {
  pthread_mutex_lock(&handle_lock);
  uint32_t index;
  if (handle_free != 0) {
    index = handle_free - 1;
    handle_free = handle_entry(index)->next_free;
  } else {
    if (handle_used == (uint32_t)HANDLE_CHUNK * HANDLE_CHUNKS) {
      pthread_mutex_unlock(&handle_lock);
      return mpiar__error(MPIAR_ERR_NOMEM, "%u requests are live: no handle left", handle_used);
    }
    index = handle_used;
    if (handle_chunks[index / HANDLE_CHUNK] == NULL) {
      handle_entry_t *chunk = calloc(HANDLE_CHUNK, sizeof *chunk);
      if (chunk == NULL) {
        pthread_mutex_unlock(&handle_lock);
        return mpiar__error(MPIAR_ERR_NOMEM, "cannot allocate request handles");
      }
      __atomic_store_n(&handle_chunks[index / HANDLE_CHUNK], chunk, __ATOMIC_RELEASE);
    }
    handle_used++;
  }
  handle_entry_t *e = handle_entry(index);
  __atomic_store_n(&e->r, r, __ATOMIC_RELEASE);
  uint32_t gen = __atomic_load_n(&e->gen, __ATOMIC_RELAXED);
  pthread_mutex_unlock(&handle_lock);
  *out = (mpiar_request_t)(uintptr_t)(((uint64_t)gen << 32) | ((uint64_t)index + 1));
  return MPIAR_SUCCESS;
}

mpiar__request_t *mpiar__handle_request(mpiar_request_t h) {
  uint64_t v = (uint64_t)(uintptr_t)h;
  uint64_t index = (v & 0xffffffffu) - 1;
  if (h == MPIAR_REQUEST_NULL || index >= (uint64_t)HANDLE_CHUNK * HANDLE_CHUNKS) {
    return NULL;
  }
  handle_entry_t *e = handle_entry((uint32_t)index);
  if (e == NULL || __atomic_load_n(&e->gen, __ATOMIC_ACQUIRE) != (uint32_t)(v >> 32)) {
    return NULL;
  }
  return __atomic_load_n(&e->r, __ATOMIC_ACQUIRE);
}

void mpiar__handle_release(mpiar_request_t *req) {
  uint64_t v = (uint64_t)(uintptr_t)*req;
  uint32_t index = (uint32_t)((v & 0xffffffffu) - 1);
  pthread_mutex_lock(&handle_lock);
  handle_entry_t *e = handle_entry(index);
  __atomic_store_n(&e->gen, e->gen + 1, __ATOMIC_RELEASE);
  __atomic_store_n(&e->r, NULL, __ATOMIC_RELEASE);
  e->next_free = handle_free;
  handle_free = index + 1;
  pthread_mutex_unlock(&handle_lock);
  *req = MPIAR_REQUEST_NULL;
}

/* ---- generalized requests ---- */

/*
 * The hook of a generalized request (core/grequest.h). The request keeps one pointer to it, so
 * that the handle table, the test and wait calls and the result (rc, detail) are those of every
 * request, and the engine's request carries no field of a front end's; both live in one block
 * (the hook after the request), freed as any request's memory.
 */
struct mpiar__grequest {
  mpiar__gpoll_fn poll;
  mpiar__gstart_fn start; /* a persistent one's, else NULL */
  mpiar__gfree_fn free_fn;
  void *state;
};

typedef struct grequest_block {
  mpiar__request_t r; /* first: the block is freed through it */
  struct mpiar__grequest hook;
} grequest_block_t;

/* A generalized request's block with its handle, in state @p state (the hook set). */
static int grequest_new(mpiar__gpoll_fn poll, mpiar__gstart_fn start, mpiar__gfree_fn free_fn,
                        void *state, int rstate, mpiar_request_t *out) {
  grequest_block_t *b = NULL;
  if (posix_memalign((void **)&b, 64, sizeof *b) != 0) {
    return mpiar__error(MPIAR_ERR_NOMEM, "cannot allocate a request");
  }
  memset(b, 0, sizeof *b);
  mpiar__request_t *r = &b->r;
  if (mpiar__handle_new(r, out) != MPIAR_SUCCESS) {
    free(b);
    return MPIAR_ERR_NOMEM;
  }
  __atomic_fetch_add(&mpiar__requests_allocated, 1, __ATOMIC_RELAXED);
  __atomic_fetch_add(&mpiar__requests_live, 1, __ATOMIC_RELAXED);
  b->hook.poll = poll;
  b->hook.start = start;
  b->hook.free_fn = free_fn;
  b->hook.state = state;
  r->magic = MPIAR__REQUEST_MAGIC;
  r->greq = &b->hook;
  r->persistent = start != NULL;
  r->state = rstate;
  return MPIAR_SUCCESS;
}

int mpiar__grequest_start(mpiar__gpoll_fn poll, mpiar__gfree_fn free_fn, void *state,
                          mpiar_request_t *out) {
  return grequest_new(poll, NULL, free_fn, state, MPIAR__REQ_ACTIVE, out);
}

int mpiar__grequest_init(mpiar__gpoll_fn poll, mpiar__gstart_fn start, mpiar__gfree_fn free_fn,
                         void *state, mpiar_request_t *out) {
  return grequest_new(poll, start, free_fn, state, MPIAR__REQ_INACTIVE, out);
}

int mpiar__grequest_restart(mpiar__request_t *r) {
  int rc = r->greq->start(r->greq->state);
  if (rc == MPIAR_SUCCESS) {
    r->rc = MPIAR_SUCCESS;
    r->detail[0] = '\0';
    r->state = MPIAR__REQ_ACTIVE;
  }
  return rc;
}

/* ---- completion ---- */

/* Give the core away between rounds of a wait when the node is oversubscribed. */
static void idle_of(mpiar__request_t *r, unsigned idle) {
  if (r->eng != NULL) {
    mpiar__idle(mpiar__ctx_of(r), idle);
  } else if (idle > 64) {
    sched_yield();
  }
}

/* One round of progress on a core request's context; *idle counts passes that moved nothing. */
static void advance(mpiar__context_t *ctx, unsigned *idle) {
  int progressed = 0;
  mpiar__progress(&ctx->eng, &progressed);
  if (progressed) {
    *idle = 0;
    return;
  }
  ++*idle;
  if (*idle % MPIAR__SCAN_PASSES == 0) {
    mpiar__scan(&ctx->eng);
  }
}

int mpiar__wait_result(mpiar__request_t *r) {
  mpiar__context_t *ctx = mpiar__ctx_of(r);
  unsigned idle = 0, passes = 0;
  while (r->state == MPIAR__REQ_ACTIVE) {
    advance(ctx, &idle);
    if (r->state != MPIAR__REQ_ACTIVE) {
      break;
    }
    if (MPIAR__UNLIKELY(mpiar__interrupt_fn != NULL) && (++passes & 63) == 0 &&
        mpiar__interrupt_due()) {
      mpiar__request_abandon(r, interrupted("the wait for an operation", ctx->eng.rank));
      break;
    }
    mpiar__idle(ctx, idle);
  }
  int rc = r->rc;
  if (rc != MPIAR_SUCCESS) {
    mpiar__error(rc, "%s", r->detail);
  }
  return rc;
}

int mpiar__wait_one(mpiar__request_t *r) {
  int rc = mpiar__wait_result(r);
  if (r->persistent) {
    r->state = MPIAR__REQ_INACTIVE;
  } else {
    mpiar__request_release(r);
  }
  return rc;
}

/*
 * Advance a request once (its context's operations, or a generalized request's poll).
 * @return MPIAR_SUCCESS, or an error that prevented it (another thread inside its context).
 */
static int step(mpiar__request_t *r) {
  if (r->state != MPIAR__REQ_ACTIVE) {
    return MPIAR_SUCCESS;
  }
  if (r->greq != NULL) {
    int done = 0;
    int rc = r->greq->poll(r->greq->state, &done);
    if (done) {
      r->rc = rc;
      if (rc != MPIAR_SUCCESS) {
        snprintf(r->detail, sizeof r->detail, "%s", mpiar_last_error());
      }
      r->state = MPIAR__REQ_DONE;
    }
    return MPIAR_SUCCESS;
  }
  mpiar__context_t *ctx = mpiar__ctx_of(r);
  int rc = mpiar__context_enter_ctx(ctx);
  if (rc != MPIAR_SUCCESS) {
    return rc;
  }
  unsigned idle = 0;
  advance(ctx, &idle);
  /* A loop of tests also looks at unexpected messages now and then, so that it notices a
   * failed rank. */
  if (r->state == MPIAR__REQ_ACTIVE && (++r->tests & 63) == 0) {
    mpiar__scan(&ctx->eng);
  }
  mpiar__context_leave(ctx);
  return MPIAR_SUCCESS;
}

/* Release a core request's memory and its references (the caller is not inside its context). */
static void release_outside(mpiar__request_t *r) {
  mpiar__context_t *ctx = mpiar__ctx_of(r);
  ctx->refs++;
  mpiar__request_release(r);
  mpiar__context_unref(ctx);
}

/* Hand a finished request's result to the caller and release or deactivate it. */
static int collect(mpiar_request_t *req, mpiar__request_t *r) {
  int rc = r->rc;
  char detail[512];
  snprintf(detail, sizeof detail, "%s", r->detail);
  if (r->greq != NULL && r->persistent) {
    r->state = MPIAR__REQ_INACTIVE;
  } else if (r->greq != NULL) {
    r->magic = 0;
    if (r->greq->free_fn != NULL) {
      r->greq->free_fn(r->greq->state);
    }
    mpiar__request_free_mem(r);
    mpiar__handle_release(req);
  } else if (r->persistent) {
    r->state = MPIAR__REQ_INACTIVE;
  } else {
    mpiar__context_t *ctx = mpiar__ctx_of(r);
    /* Releasing may drop the context's last reference: enter it while the request goes. */
    int erc = mpiar__context_enter_ctx(ctx);
    if (erc != MPIAR_SUCCESS) {
      return erc;
    }
    ctx->refs++;
    mpiar__request_release(r);
    mpiar__handle_release(req);
    mpiar__context_leave(ctx);
    mpiar__context_unref(ctx);
  }
  if (rc != MPIAR_SUCCESS) {
    mpiar__error(rc, "%s", detail);
  }
  return rc;
}

/*
 * A request used after MPI_Finalize: MPI_Finalize released its communicator (an operation in
 * progress failed then), so the handle is given back and its memory freed, and the call fails.
 */
static int after_finalize(mpiar_request_t *req, mpiar__request_t *r, const char *call) {
  if (r != NULL) {
    mpiar__handle_release(req);
    if (r->greq == NULL) {
      release_outside(r);
    }
    /* A generalized request's state belongs to its owner (the kvstore), whose MPI objects are
     * gone too: it is left as it is. */
  }
  return mpiar__error(MPIAR_ERR_MPI_STATE,
                      "%s: MPI is already finalized (MPI_Finalize released the request's "
                      "communicator; the request is freed)",
                      call);
}

static int check_handle(mpiar_request_t *req, const char *call, mpiar__request_t **out) {
  *out = NULL;
  if (req == NULL) {
    return mpiar__error(MPIAR_ERR_INVALID_ARG, "%s: the request pointer is NULL", call);
  }
  if (*req != MPIAR_REQUEST_NULL && (*out = mpiar__handle_request(*req)) == NULL) {
    return mpiar__error(MPIAR_ERR_INVALID_ARG,
                        "%s: not a live request (completed, freed, or never made)", call);
  }
  if (MPIAR__UNLIKELY(mpiar__mpi_finalized())) {
    return after_finalize(req, *out, call);
  }
  return MPIAR_SUCCESS;
}

int mpiar__request_of(mpiar_request_t *req, const char *call, mpiar__request_t **out) {
  return check_handle(req, call, out);
}

int mpiar_test(mpiar_request_t *req, int *done) {
  mpiar__error_clear();
  mpiar__request_t *r = NULL;
  int rc = check_handle(req, "mpiar_test", &r);
  if (rc != MPIAR_SUCCESS) {
    return rc;
  }
  if (done == NULL) {
    return mpiar__error(MPIAR_ERR_INVALID_ARG, "mpiar_test: the done pointer is NULL");
  }
  *done = 1;
  if (r == NULL || r->state == MPIAR__REQ_INACTIVE) {
    return MPIAR_SUCCESS;
  }
  if ((rc = step(r)) != MPIAR_SUCCESS) {
    *done = 0;
    return rc;
  }
  *done = r->state != MPIAR__REQ_ACTIVE;
  return *done ? collect(req, r) : MPIAR_SUCCESS;
}

int mpiar_wait(mpiar_request_t *req) {
  mpiar__error_clear();
  mpiar__request_t *r = NULL;
  int rc = check_handle(req, "mpiar_wait", &r);
  if (rc != MPIAR_SUCCESS) {
    return rc;
  }
  if (r == NULL || r->state == MPIAR__REQ_INACTIVE) {
    return MPIAR_SUCCESS;
  }
  if (r->greq == NULL && r->state == MPIAR__REQ_ACTIVE) {
    /* The common case: stay inside the context for the whole wait. */
    mpiar__context_t *ctx = mpiar__ctx_of(r);
    if ((rc = mpiar__context_enter_ctx(ctx)) != MPIAR_SUCCESS) {
      return rc;
    }
    int persistent = r->persistent;
    ctx->refs++;
    rc = mpiar__wait_one(r);
    if (!persistent) {
      mpiar__handle_release(req);
    }
    mpiar__context_leave(ctx);
    mpiar__context_unref(ctx);
    return rc;
  }
  unsigned idle = 0;
  while (r->state == MPIAR__REQ_ACTIVE) {
    if ((rc = step(r)) != MPIAR_SUCCESS) {
      return rc;
    }
    if (r->state == MPIAR__REQ_ACTIVE && mpiar__interrupted()) {
      return abandon_array(1, req, "mpiar_wait");
    }
    idle_of(r, ++idle);
  }
  return collect(req, r);
}

/*
 * An interrupted wait on @p reqs: every active request of a context is abandoned (it fails, its
 * context breaks, the other ranks are told) and released; a generalized request stays active.
 */
static int abandon_array(int n, mpiar_request_t reqs[], const char *call) {
  for (int i = 0; i < n; i++) {
    mpiar__request_t *r = mpiar__handle_request(reqs[i]);
    if (r == NULL || r->greq != NULL || r->state == MPIAR__REQ_INACTIVE) {
      continue;
    }
    if (mpiar__context_enter_ctx(mpiar__ctx_of(r)) != MPIAR_SUCCESS) {
      continue;
    }
    if (r->state == MPIAR__REQ_ACTIVE) {
      mpiar__request_abandon(r, interrupted(call, mpiar__ctx_of(r)->eng.rank));
    }
    mpiar__context_leave(mpiar__ctx_of(r));
    /* Failed now, or by the break that an earlier one's failure caused. */
    collect(&reqs[i], r);
  }
  return interrupted(call, -1);
}

static int check_array(int n, mpiar_request_t reqs[], const char *call) {
  if (n < 0 || (n > 0 && reqs == NULL)) {
    return mpiar__error(MPIAR_ERR_INVALID_ARG, "%s: %d requests at %p", call, n, (void *)reqs);
  }
  for (int i = 0; i < n; i++) {
    if (reqs[i] != MPIAR_REQUEST_NULL && mpiar__handle_request(reqs[i]) == NULL) {
      return mpiar__error(MPIAR_ERR_INVALID_ARG,
                          "%s: request %d is not a live request (completed, freed, or never made)",
                          call, i);
    }
  }
  if (MPIAR__UNLIKELY(mpiar__mpi_finalized())) {
    for (int i = 0; i < n; i++) {
      after_finalize(&reqs[i], mpiar__handle_request(reqs[i]), call);
    }
    return after_finalize(NULL, NULL, call);
  }
  return MPIAR_SUCCESS;
}

/*
 * Advance every active request of @p reqs once. @return the index of the first finished one
 * (active before, or done), -1 if every entry is null or inactive, -2 if none has finished;
 * an error in *rc when one could not be advanced.
 */
static int scan_array(int n, mpiar_request_t reqs[], int *rc) {
  int any = 0;
  *rc = MPIAR_SUCCESS;
  for (int i = 0; i < n; i++) {
    mpiar__request_t *r = mpiar__handle_request(reqs[i]);
    if (r == NULL || r->state == MPIAR__REQ_INACTIVE) {
      continue;
    }
    any = 1;
    if ((*rc = step(r)) != MPIAR_SUCCESS) {
      return i;
    }
    if (r->state != MPIAR__REQ_ACTIVE) {
      return i;
    }
  }
  return any ? -2 : -1;
}

int mpiar_testany(int n, mpiar_request_t reqs[], int *index, int *done) {
  mpiar__error_clear();
  int rc = check_array(n, reqs, "mpiar_testany");
  if (rc != MPIAR_SUCCESS) {
    return rc;
  }
  if (index == NULL || done == NULL) {
    return mpiar__error(MPIAR_ERR_INVALID_ARG, "mpiar_testany: null index or done pointer");
  }
  int at = scan_array(n, reqs, &rc);
  if (rc != MPIAR_SUCCESS) {
    *index = at;
    *done = 0;
    return rc;
  }
  if (at == -1) {
    *index = -1;
    *done = 1;
    return MPIAR_SUCCESS;
  }
  if (at == -2) {
    *index = -1;
    *done = 0;
    return MPIAR_SUCCESS;
  }
  *index = at;
  *done = 1;
  return collect(&reqs[at], mpiar__handle_request(reqs[at]));
}

int mpiar_waitany(int n, mpiar_request_t reqs[], int *index) {
  mpiar__error_clear();
  int rc = check_array(n, reqs, "mpiar_waitany");
  if (rc != MPIAR_SUCCESS) {
    return rc;
  }
  if (index == NULL) {
    return mpiar__error(MPIAR_ERR_INVALID_ARG, "mpiar_waitany: null index pointer");
  }
  unsigned idle = 0;
  for (;;) {
    int done = 0;
    rc = mpiar_testany(n, reqs, index, &done);
    if (done || rc != MPIAR_SUCCESS) {
      return rc;
    }
    if (mpiar__interrupted()) {
      return abandon_array(n, reqs, "mpiar_waitany");
    }
    for (int i = 0; i < n; i++) {
      mpiar__request_t *r = mpiar__handle_request(reqs[i]);
      if (r != NULL) {
        idle_of(r, ++idle);
        break;
      }
    }
  }
}

int mpiar_waitall(int n, mpiar_request_t reqs[]) {
  mpiar__error_clear();
  int rc = check_array(n, reqs, "mpiar_waitall");
  if (rc != MPIAR_SUCCESS) {
    return rc;
  }
  /* Advance every request in turn (one rank's progress on one communicator may be what another
   * rank needs before it can progress on another), collecting each as it finishes. */
  int first_error = MPIAR_SUCCESS;
  char detail[512] = "";
  unsigned idle = 0;
  for (;;) {
    int left = 0;
    mpiar__request_t *some = NULL;
    for (int i = 0; i < n; i++) {
      mpiar__request_t *r = mpiar__handle_request(reqs[i]);
      if (r == NULL || r->state == MPIAR__REQ_INACTIVE) {
        continue;
      }
      if ((rc = step(r)) != MPIAR_SUCCESS) {
        return rc;
      }
      if (r->state == MPIAR__REQ_ACTIVE) {
        left++;
        some = r;
        continue;
      }
      int one = collect(&reqs[i], r);
      if (one != MPIAR_SUCCESS && first_error == MPIAR_SUCCESS) {
        first_error = one;
        snprintf(detail, sizeof detail, "request %d: %s", i, mpiar_last_error());
      }
    }
    if (left == 0) {
      break;
    }
    if (mpiar__interrupted()) {
      return abandon_array(n, reqs, "mpiar_waitall");
    }
    idle_of(some, ++idle);
  }
  if (first_error != MPIAR_SUCCESS) {
    return mpiar__error(first_error, "%s", detail);
  }
  return MPIAR_SUCCESS;
}

int mpiar_request_free(mpiar_request_t *req) {
  mpiar__error_clear();
  mpiar__request_t *r = NULL;
  int rc = check_handle(req, "mpiar_request_free", &r);
  if (rc != MPIAR_SUCCESS || r == NULL) {
    return rc;
  }
  if (r->state == MPIAR__REQ_ACTIVE) {
    /* An operation is collective: it is completed, not abandoned. */
    rc = mpiar_wait(req);
    if (*req == MPIAR_REQUEST_NULL) {
      return rc;
    }
  }
  /* Inactive persistent, or finished and not collected: released, its result dropped. */
  r->persistent = 0;
  r->state = MPIAR__REQ_DONE;
  r->rc = MPIAR_SUCCESS;
  int rc2 = collect(req, r);
  return rc != MPIAR_SUCCESS ? rc : rc2;
}
