/*
 * Per-communicator contexts: creation (bounded by the deadline), lookup, the entry guard that
 * detects two threads on one communicator, and release (the engine drains; the context frees).
 *
 * The context lives in an attribute of the user's communicator, so MPI tells us when to release
 * it: the delete callback runs when the user frees the communicator. Contexts of communicators
 * that are never freed (MPI_COMM_WORLD, for one) are released by a delete callback on
 * MPI_COMM_SELF, which MPI_Finalize runs first of all, while MPI still works.
 *
 * Release drains the context: messages of failed operations may still be in flight (a send
 * whose receiver gave up, a receive whose sender was late, a failure notice that a rank whose
 * own calls all succeeded has not seen yet), and MPI_Finalize waits for such sends forever. So
 * every rank receives and discards whatever arrives, completes its own leftover requests, then
 * tells every other rank it will send nothing more (FIN), and frees the private communicator
 * once all other ranks have said the same: a FIN is a rank's last message, so by MPI's ordering
 * everything it sent has arrived before it. Every rank drains, broken or not (a rank whose calls
 * succeeded cannot know that another rank failed after them, and waiting out the others' FINs is
 * what tells it), so the drain ends as soon as the last rank releases; it gives up after
 * MPIAR__DRAIN_SECONDS (a rank that never releases the communicator) and then keeps the private
 * communicator allocated, so that MPI cannot reuse its context id for a new communicator that
 * would receive the stray messages.
 */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/context.h"
#include "reduce_kernels/kernels.h"

size_t mpiar__max_message_bytes = (size_t)1 << 30;

/* How long the release of a broken context waits for the other ranks to drain. */
#define MPIAR__DRAIN_SECONDS 5.0

static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static mpiar__context_t *live_head;
static int live_count;
static int comm_keyval = MPI_KEYVAL_INVALID;
static int self_keyval = MPI_KEYVAL_INVALID;
static int keyval_error;    /* MPI error class if creating the keyvals failed */
static int finalizing;      /* set while MPI_Finalize releases the contexts */
int mpiar__finalized;       /* set once they are released: no more contexts */
static unsigned generation; /* bumped whenever a context is released (invalidates caches) */

/* Private communicators whose drain did not finish, kept until MPI_Finalize. */
#define MPIAR__GRAVEYARD_MAX 256
static MPI_Comm graveyard[MPIAR__GRAVEYARD_MAX];
static int graveyard_count;

/* The last contexts this thread used, so that a loop of calls skips MPI's attribute lookup. */
#define MPIAR__CACHE_WAYS 4
static _Thread_local struct {
  MPI_Comm comm;
  mpiar__context_t *ctx;
  unsigned gen;
} cache[MPIAR__CACHE_WAYS];
static _Thread_local unsigned cache_next;

int mpiar__check_mpi_state(void) {
  int initialized = 0, done = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&done);
  if (!initialized || done || __atomic_load_n(&mpiar__finalized, __ATOMIC_ACQUIRE)) {
    return mpiar__error(MPIAR_ERR_MPI_STATE, "MPI is %s",
                        initialized ? "already finalized" : "not initialized");
  }
  return MPIAR_SUCCESS;
}

int mpiar__live_contexts(void) {
  pthread_mutex_lock(&live_lock);
  int n = live_count;
  pthread_mutex_unlock(&live_lock);
  return n;
}

static int mpi_failed(int err, const char *what) {
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(err, msg, &len) != MPI_SUCCESS) {
    snprintf(msg, sizeof msg, "MPI error %d", err);
  }
  return mpiar__error(MPIAR_ERR_MPI, "%s failed: %s", what, msg);
}

/* ---- entry guard ---- */

int mpiar__context_enter_ctx(mpiar__context_t *ctx) {
  for (;;) {
    int expected = 0;
    if (__atomic_compare_exchange_n(&ctx->entered, &expected, 1, 0, __ATOMIC_ACQUIRE,
                                    __ATOMIC_RELAXED)) {
      return MPIAR_SUCCESS;
    }
    if (expected == 3) {
      /* Released (its communicator was freed, or MPI_Finalize ran): it never opens again. */
      return mpiar__mpi_finalized()
                 ? mpiar__error(MPIAR_ERR_MPI_STATE, "MPI is already finalized")
                 : mpiar__error(MPIAR_ERR_COMM_BROKEN,
                                "the communicator's context was released (the communicator "
                                "was freed)");
    }
    if (expected == 1) {
      return mpiar__error(MPIAR_ERR_CONCURRENT,
                          "another thread is inside an mpiar call on this communicator (rank %d "
                          "of %d): calls on one communicator must come from one thread at a "
                          "time",
                          ctx->eng.rank, ctx->eng.size);
    }
    /* The progress thread is inside: it leaves after one pass. */
    sched_yield();
  }
}

void mpiar__context_leave(mpiar__context_t *ctx) {
  __atomic_store_n(&ctx->entered, 0, __ATOMIC_RELEASE);
}

/* ---- release ---- */

static void unlink_live(mpiar__context_t *ctx) {
  pthread_mutex_lock(&live_lock);
  if (ctx->live_prev != NULL) {
    ctx->live_prev->live_next = ctx->live_next;
  } else if (live_head == ctx) {
    live_head = ctx->live_next;
  }
  if (ctx->live_next != NULL) {
    ctx->live_next->live_prev = ctx->live_prev;
  }
  ctx->live_prev = ctx->live_next = NULL;
  live_count--;
  __atomic_add_fetch(&generation, 1, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&live_lock);
}

/*
 * The duplicate of a context whose creation timed out may finish later, when the late ranks
 * arrive: they then hold a working duplicate and wait for this rank inside their first call. This
 * rank takes the duplicate and sends them a failure notice, so that they fail instead of waiting.
 */
static void late_notify(mpiar__context_t *ctx) {
  int flag = 0;
  if (ctx->idup_req == MPI_REQUEST_NULL ||
      MPI_Test(&ctx->idup_req, &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS || !flag) {
    return;
  }
  ctx->idup_req = MPI_REQUEST_NULL;
  ctx->comm = ctx->late_comm;
  if (mpiar__context_engine_open(ctx) != MPIAR_SUCCESS) {
    mpiar__engine_close(&ctx->eng);
    MPI_Comm_free(&ctx->comm);
    return;
  }
  mpiar__engine_break(&ctx->eng, MPIAR_ERR_TIMEOUT, ctx->eng.broken_reason, 1);
}

/* Drain the broken contexts of @p ctxs together (see the file header), then free them all. */
static void release_all(mpiar__context_t **ctxs, int n) {
  mpiar__drain_t *d = calloc((size_t)n, sizeof *d);
  int pending = 0;
  for (int i = 0; i < n && d != NULL; i++) {
    mpiar__context_t *ctx = ctxs[i];
    d[i].done = 1;
    /* Keep the progress thread out for good (it leaves after its pass). */
    for (;;) {
      int expected = 0;
      if (__atomic_compare_exchange_n(&ctx->entered, &expected, 3, 0, __ATOMIC_ACQUIRE,
                                      __ATOMIC_RELAXED) ||
          expected != 2) {
        __atomic_store_n(&ctx->entered, 3, __ATOMIC_RELEASE);
        break;
      }
      sched_yield();
    }
#if defined(OPEN_MPI)
    /*
     * Open MPI 4.1's nonblocking collectives do not hold the communicator they run on: a
     * duplicate still pending when the communicator is freed is later progressed on freed
     * memory (a crash in any later MPI call). Wait for it as long as a drain waits: the late
     * ranks that would complete it (late_notify then tells them) usually come within that.
     */
    for (double until = MPI_Wtime() + MPIAR__DRAIN_SECONDS;
         ctx->idup_req != MPI_REQUEST_NULL && MPI_Wtime() < until;) {
      int flag = 0;
      /* Not MPI_Test: late_notify takes the finished duplicate. */
      if (MPI_Request_get_status(ctx->idup_req, &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS ||
          flag) {
        break;
      }
      sched_yield();
    }
#endif
    late_notify(ctx);
    if (ctx->comm == MPI_COMM_NULL) {
      continue;
    }
    while (ctx->eng.active != NULL) {
      mpiar__engine_break(&ctx->eng, MPIAR_ERR_COMM_BROKEN,
                          "the communicator was released with operations in progress", 1);
    }
    if (mpiar__drain_begin(&ctx->eng, &d[i]) == MPIAR_SUCCESS && !d[i].done) {
      pending++;
    }
  }
  double deadline = MPI_Wtime() + MPIAR__DRAIN_SECONDS;
  unsigned idle = 0;
  while (pending > 0 && MPI_Wtime() < deadline) {
    pending = 0;
    for (int i = 0; i < n; i++) {
      if (!d[i].done) {
        mpiar__drain_pass(&ctxs[i]->eng, &d[i]);
        pending += !d[i].done;
      }
    }
    if (++idle > MPIAR__SPIN_POLLS) {
      sched_yield();
    }
  }
  for (int i = 0; i < n; i++) {
    mpiar__context_t *ctx = ctxs[i];
    int drained = d == NULL || d[i].done;
    if (ctx->comm != MPI_COMM_NULL) {
      /* The transport frees the requests still in flight (MPI completes them on its own). */
      mpiar__engine_detach(&ctx->eng);
      if (drained || finalizing) {
        MPI_Comm_free(&ctx->comm);
      } else {
        pthread_mutex_lock(&live_lock);
        if (graveyard_count < MPIAR__GRAVEYARD_MAX) {
          graveyard[graveyard_count++] = ctx->comm;
        }
        pthread_mutex_unlock(&live_lock);
      }
      ctx->comm = MPI_COMM_NULL;
    }
    /* A duplicate that never finished is left to MPI: MPI forbids freeing the request of a
     * nonblocking collective, and the rank that did not arrive keeps it from completing. */
    mpiar__context_drop_kept(ctx);
    mpiar__plans_free_all(ctx);
    free(d != NULL ? d[i].fin_from : NULL);
    unlink_live(ctx);
    mpiar__context_unref(ctx);
  }
  free(d);
}

void mpiar__context_unref(mpiar__context_t *ctx) {
  if (--ctx->refs > 0) {
    return;
  }
  if (ctx->comm != MPI_COMM_NULL) {
    /* The last request of a detached context went away: release the context now. */
    ctx->refs = 1;
    mpiar__context_t *one[1] = {ctx};
    release_all(one, 1);
    return;
  }
  mpiar__engine_close(&ctx->eng);
  mpiar__context_drop_kept(ctx);
  mpiar__plans_free_all(ctx);
  mpiar__topology_destroy(&ctx->topo);
  free(ctx->node_of);
  free(ctx);
}

static int comm_delete_cb(MPI_Comm comm, int keyval, void *attr, void *extra) {
  (void)comm;
  (void)keyval;
  (void)extra;
  mpiar__context_t *ctx = attr;
  ctx->attached = 0;
  __atomic_add_fetch(&generation, 1, __ATOMIC_RELEASE);
  if (finalizing) {
    return MPI_SUCCESS; /* released together with the others by self_delete_cb */
  }
  if (ctx->refs > 1) {
    /* Requests still point here (persistent ones): the context lives until they are freed. */
    ctx->refs--;
    return MPI_SUCCESS;
  }
  mpiar__context_t *one[1] = {ctx};
  release_all(one, 1);
  return MPI_SUCCESS;
}

/* MPI_Finalize deletes MPI_COMM_SELF's attributes before anything else is torn down. */
static int self_delete_cb(MPI_Comm comm, int keyval, void *attr, void *extra) {
  (void)comm;
  (void)keyval;
  (void)attr;
  (void)extra;
  mpiar__progress_thread_stop();
  finalizing = 1;
  pthread_mutex_lock(&live_lock);
  int n = live_count;
  mpiar__context_t **all = n > 0 ? calloc((size_t)n, sizeof *all) : NULL;
  int k = 0;
  for (mpiar__context_t *c = live_head; c != NULL && all != NULL; c = c->live_next) {
    all[k++] = c;
  }
  pthread_mutex_unlock(&live_lock);
  for (int i = 0; i < k; i++) {
    if (all[i]->attached) {
      MPI_Comm_delete_attr(all[i]->user_comm, comm_keyval);
    }
  }
  if (k > 0) {
    release_all(all, k);
  }
  free(all);
  for (int i = 0; i < graveyard_count; i++) {
    MPI_Comm_free(&graveyard[i]);
  }
  graveyard_count = 0;
  MPI_Comm_free_keyval(&comm_keyval);
  comm_keyval = MPI_KEYVAL_INVALID;
  __atomic_store_n(&mpiar__finalized, 1, __ATOMIC_RELEASE);
  __atomic_add_fetch(&generation, 1, __ATOMIC_RELEASE);
  return MPI_SUCCESS;
}

static pthread_once_t keyval_once = PTHREAD_ONCE_INIT;

static void create_keyvals(void) {
  int err = MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, comm_delete_cb, &comm_keyval, NULL);
  if (err == MPI_SUCCESS) {
    err = MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, self_delete_cb, &self_keyval, NULL);
  }
  if (err == MPI_SUCCESS) {
    err = MPI_Comm_set_attr(MPI_COMM_SELF, self_keyval, NULL);
  }
  if (err != MPI_SUCCESS) {
    MPI_Error_class(err, &keyval_error);
    if (keyval_error == MPI_SUCCESS) {
      keyval_error = MPI_ERR_OTHER;
    }
  }
}

/* ---- creation ---- */

int mpiar__comm_idup_wait(MPI_Comm comm, MPI_Comm *out, MPI_Request *req, double deadline,
                          int yield) {
  *out = MPI_COMM_NULL;
  *req = MPI_REQUEST_NULL;
  if (MPI_Comm_idup(comm, out, req) != MPI_SUCCESS) {
    *out = MPI_COMM_NULL;
    *req = MPI_REQUEST_NULL;
    return MPIAR__DUP_MPI_ERROR;
  }
  unsigned idle = 0;
  for (;;) {
    int flag = 0;
    if (MPI_Test(req, &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS) {
      return MPIAR__DUP_MPI_ERROR;
    }
    if (flag) {
      *req = MPI_REQUEST_NULL;
      return MPIAR__DUP_DONE;
    }
    if (deadline > 0 && MPI_Wtime() > deadline) {
      return MPIAR__DUP_TIMEOUT;
    }
    if (mpiar__interrupted()) {
      return MPIAR__DUP_INTERRUPTED;
    }
    if (yield || ++idle > MPIAR__SPIN_POLLS) {
      sched_yield();
    }
  }
}

static void link_live(mpiar__context_t *ctx) {
  pthread_mutex_lock(&live_lock);
  ctx->live_next = live_head;
  if (live_head != NULL) {
    live_head->live_prev = ctx;
  }
  live_head = ctx;
  live_count++;
  pthread_mutex_unlock(&live_lock);
}

static int context_create(MPI_Comm comm, long timeout_ms, mpiar__context_t **out) {
  /* A rank whose settings cannot be used still makes the context with the others, so that the
   * agreement fails on every rank instead of leaving them waiting for it. */
  int fault = mpiar__settings_fault();
  const mpiar__settings_t *set = NULL;
  mpiar__settings(&set);
  int rc = MPIAR_SUCCESS;
  if (fault == 0 && (rc = mpiar__progress_thread_start()) != MPIAR_SUCCESS) {
    return rc;
  }
  mpiar__context_t *ctx = calloc(1, sizeof *ctx);
  if (ctx == NULL) {
    return mpiar__error(MPIAR_ERR_NOMEM, "cannot allocate a communicator context");
  }
  ctx->user_comm = comm;
  ctx->comm = MPI_COMM_NULL;
  ctx->idup_req = MPI_REQUEST_NULL;
  ctx->refs = 1;
  int cores = mpiar__usable_cpus(), local = 0;
  MPI_Comm_size(comm, &local);
  /* Waiting for the duplicate is the one wait of context creation that depends on the other
   * ranks arriving; the deadline bounds it. */
  double deadline = timeout_ms > 0 ? MPI_Wtime() + (double)timeout_ms * 1e-3 : 0;
  int yield = set->wait == MPIAR__WAIT_YIELD || (set->wait == MPIAR__WAIT_AUTO && local > cores);
  int got = mpiar__comm_idup_wait(comm, &ctx->late_comm, &ctx->idup_req, deadline, yield);
  if (got == MPIAR__DUP_MPI_ERROR && ctx->idup_req == MPI_REQUEST_NULL) {
    free(ctx);
    return mpiar__error(MPIAR_ERR_MPI, "MPI_Comm_idup failed");
  }
  if (got != MPIAR__DUP_DONE) {
    /* The communicator stays marked: later calls fail at once instead of pairing their own
     * duplicate with another rank's first one (see late_notify). */
    ctx->eng.broken = 1;
    if (got == MPIAR__DUP_TIMEOUT) {
      rc = mpiar__error(MPIAR_ERR_TIMEOUT,
                        "creating the communicator context timed out after %ld ms: not every "
                        "rank of the communicator called mpiar on it",
                        timeout_ms);
    } else if (got == MPIAR__DUP_INTERRUPTED) {
      rc = mpiar__error(MPIAR_ERR_INTERRUPTED,
                        "creating the communicator context was interrupted by the calling "
                        "thread's interrupt check (mpiar_set_interrupt) while not every rank had "
                        "called mpiar on it: the communicator is unusable with mpiar");
    } else {
      rc = mpiar__error(MPIAR_ERR_MPI, "MPI_Comm_idup failed");
    }
    snprintf(ctx->eng.broken_reason, sizeof ctx->eng.broken_reason, "%s", mpiar_last_error());
  } else {
    ctx->comm = ctx->late_comm;
    long left = 0;
    if (deadline > 0) {
      left = (long)((deadline - MPI_Wtime()) * 1e3);
      left = left > 1 ? left : 1;
    }
    rc = mpiar__context_setup(ctx, set, fault, left);
    if (rc != MPIAR_SUCCESS) {
      ctx->eng.broken = 1;
      snprintf(ctx->eng.broken_reason, sizeof ctx->eng.broken_reason, "%s", mpiar_last_error());
    }
  }
  link_live(ctx);
  ctx->attached = 1;
  int err = MPI_Comm_set_attr(comm, comm_keyval, ctx);
  if (err != MPI_SUCCESS) {
    ctx->attached = 0;
    int code = mpi_failed(err, "MPI_Comm_set_attr");
    mpiar__context_t *one[1] = {ctx};
    release_all(one, 1);
    return code;
  }
  *out = ctx;
  return rc;
}

/*
 * MPI_Comm_test_inter on a handle that is not a communicator (a freed one, say): MPICH raises
 * that error on MPI_COMM_WORLD's handler, which aborts by default. So the world handler returns
 * errors for the duration of the check (a rare path: only communicators not yet in the cache).
 */
int mpiar__check_comm(MPI_Comm comm) {
  MPI_Errhandler old = MPI_ERRHANDLER_NULL;
  int swapped = MPI_Comm_get_errhandler(MPI_COMM_WORLD, &old) == MPI_SUCCESS &&
                MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN) == MPI_SUCCESS;
  int inter = 0;
  int err = MPI_Comm_test_inter(comm, &inter);
  if (swapped) {
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, old);
  }
  if (old != MPI_ERRHANDLER_NULL) {
    MPI_Errhandler_free(&old);
  }
  if (err != MPI_SUCCESS) {
    return mpiar__error(MPIAR_ERR_COMM, "not a valid communicator (freed, or never created)");
  }
  if (inter) {
    return mpiar__error(MPIAR_ERR_COMM, "intercommunicators are not supported");
  }
  return MPIAR_SUCCESS;
}

static int context_lookup(MPI_Comm comm, long timeout_ms, mpiar__context_t **ctx) {
  unsigned gen = __atomic_load_n(&generation, __ATOMIC_ACQUIRE);
  for (int i = 0; i < MPIAR__CACHE_WAYS; i++) {
    if (cache[i].ctx != NULL && cache[i].comm == comm && cache[i].gen == gen) {
      *ctx = cache[i].ctx;
      return MPIAR_SUCCESS;
    }
  }
  int rc = mpiar__check_mpi_state();
  if (rc != MPIAR_SUCCESS) {
    return rc;
  }
  if (comm == MPI_COMM_NULL) {
    return mpiar__error(MPIAR_ERR_COMM, "the communicator is MPI_COMM_NULL");
  }
  if ((rc = mpiar__check_comm(comm)) != MPIAR_SUCCESS) {
    return rc;
  }
  pthread_once(&keyval_once, create_keyvals);
  if (keyval_error != MPI_SUCCESS || comm_keyval == MPI_KEYVAL_INVALID) {
    return mpiar__error(MPIAR_ERR_MPI, "cannot create the MPI attribute keys (error class %d)",
                        keyval_error);
  }
  void *attr = NULL;
  int found = 0;
  int err = MPI_Comm_get_attr(comm, comm_keyval, &attr, &found);
  if (err != MPI_SUCCESS) {
    return mpi_failed(err, "MPI_Comm_get_attr");
  }
  if (found) {
    *ctx = attr;
  } else {
    rc = context_create(comm, timeout_ms, ctx);
    if (rc != MPIAR_SUCCESS) {
      return rc;
    }
  }
  int slot = (int)(cache_next++ % MPIAR__CACHE_WAYS);
  cache[slot].comm = comm;
  cache[slot].ctx = *ctx;
  cache[slot].gen = gen;
  return MPIAR_SUCCESS;
}

int mpiar__context_join_failed(MPI_Comm comm, long timeout_ms, int rc) {
  char detail[512];
  snprintf(detail, sizeof detail, "%s", mpiar_last_error());
  mpiar__context_t *ctx = NULL;
  if (mpiar__context_cached(comm) == NULL) {
    /* Whatever this returns, the detail of the settings is what this rank reports. */
    (void)context_lookup(comm, timeout_ms, &ctx);
  }
  return mpiar__error(rc, "%s", detail);
}

mpiar__context_t *mpiar__context_cached(MPI_Comm comm) {
  unsigned gen = __atomic_load_n(&generation, __ATOMIC_ACQUIRE);
  for (int i = 0; i < MPIAR__CACHE_WAYS; i++) {
    if (cache[i].ctx != NULL && cache[i].comm == comm && cache[i].gen == gen) {
      return cache[i].ctx;
    }
  }
  return NULL;
}

int mpiar__context_enter(MPI_Comm comm, long timeout_ms, mpiar__context_t **out) {
  mpiar__context_t *ctx = NULL;
  int rc = context_lookup(comm, timeout_ms, &ctx);
  if (rc != MPIAR_SUCCESS) {
    return rc;
  }
  if ((rc = mpiar__context_enter_ctx(ctx)) != MPIAR_SUCCESS) {
    return rc;
  }
  if (MPIAR__UNLIKELY(ctx->eng.broken)) {
    late_notify(ctx);
    mpiar__context_leave(ctx);
    return mpiar__error(MPIAR_ERR_COMM_BROKEN,
                        "an earlier failure broke this communicator's context (%s); free it and "
                        "use a new one",
                        ctx->eng.broken_reason);
  }
  *out = ctx;
  return MPIAR_SUCCESS;
}

/* ---- the progress thread's walk ---- */

void mpiar__contexts_progress_all(void) {
  pthread_mutex_lock(&live_lock);
  for (mpiar__context_t *c = live_head; c != NULL; c = c->live_next) {
    int expected = 0;
    if (c->eng.nactive == 0 || c->eng.broken ||
        !__atomic_compare_exchange_n(&c->entered, &expected, 2, 0, __ATOMIC_ACQUIRE,
                                     __ATOMIC_RELAXED)) {
      continue;
    }
    int progressed = 0;
    mpiar__progress(&c->eng, &progressed);
    if (progressed) {
      mpiar__progress_note();
    }
    __atomic_store_n(&c->entered, 0, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&live_lock);
}
