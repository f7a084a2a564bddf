/*
 * Per-communicator contexts. The context lives in an attribute of the user's communicator, so
 * MPI tells us when to release it: the delete callback runs when the user frees the
 * communicator. Contexts of communicators that are never freed (MPI_COMM_WORLD, for one) are
 * released by a delete callback on MPI_COMM_SELF, which MPI_Finalize runs first of all.
 */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/context.h"
#include "reduce_kernels/kernels.h"

size_t mpiar__max_message_bytes = (size_t)1 << 30;

static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static mpiar__context_t *live_head;
static int live_count;
static int comm_keyval = MPI_KEYVAL_INVALID;
static int self_keyval = MPI_KEYVAL_INVALID;
static int keyval_error; /* MPI error class if creating the keyvals failed */
static int finalizing;   /* set while MPI_Finalize releases the contexts */

/* Private communicators of broken contexts, kept until MPI_Finalize (see context_destroy). */
#define MPIAR__GRAVEYARD_MAX 256
static MPI_Comm graveyard[MPIAR__GRAVEYARD_MAX];
static int graveyard_count;

int mpiar__check_mpi_state(void) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized) {
    return mpiar__error(MPIAR_ERR_MPI_STATE, "MPI is %s",
                        finalized ? "already finalized" : "not initialized");
  }
  return MPIAR_SUCCESS;
}

int mpiar__live_contexts(void) {
  pthread_mutex_lock(&live_lock);
  int n = live_count;
  pthread_mutex_unlock(&live_lock);
  return n;
}

static void context_destroy(mpiar__context_t *ctx) {
  pthread_mutex_lock(&live_lock);
  if (ctx->live_prev != NULL) {
    ctx->live_prev->live_next = ctx->live_next;
  } else if (live_head == ctx) {
    live_head = ctx->live_next;
  }
  if (ctx->live_next != NULL) {
    ctx->live_next->live_prev = ctx->live_prev;
  }
  live_count--;
  pthread_mutex_unlock(&live_lock);

  mpiar__plans_free_all(ctx);
  free(ctx->scratch);
  if (ctx->comm != MPI_COMM_NULL) {
    if (ctx->broken && !finalizing) {
      /* Messages of the failed call may still be in flight on the private communicator. If it
       * were freed, MPI could give its context id to a new communicator and deliver them there;
       * so it stays allocated until MPI_Finalize. */
      pthread_mutex_lock(&live_lock);
      if (graveyard_count < MPIAR__GRAVEYARD_MAX) {
        graveyard[graveyard_count++] = ctx->comm;
        ctx->comm = MPI_COMM_NULL;
      }
      pthread_mutex_unlock(&live_lock);
    }
    if (ctx->comm != MPI_COMM_NULL) {
      MPI_Comm_free(&ctx->comm);
    }
  }
  free(ctx);
}

static int comm_delete_cb(MPI_Comm comm, int keyval, void *attr, void *extra) {
  (void)comm;
  (void)keyval;
  (void)extra;
  context_destroy((mpiar__context_t *)attr);
  return MPI_SUCCESS;
}

/* MPI_Finalize deletes MPI_COMM_SELF's attributes before anything else is torn down. */
static int self_delete_cb(MPI_Comm comm, int keyval, void *attr, void *extra) {
  (void)comm;
  (void)keyval;
  (void)attr;
  (void)extra;
  finalizing = 1;
  for (;;) {
    pthread_mutex_lock(&live_lock);
    mpiar__context_t *ctx = live_head;
    pthread_mutex_unlock(&live_lock);
    if (ctx == NULL) {
      break;
    }
    /* Deleting the attribute runs comm_delete_cb, which unlinks the context. */
    if (MPI_Comm_delete_attr(ctx->user_comm, comm_keyval) != MPI_SUCCESS) {
      context_destroy(ctx);
    }
  }
  for (int i = 0; i < graveyard_count; i++) {
    MPI_Comm_free(&graveyard[i]);
  }
  graveyard_count = 0;
  MPI_Comm_free_keyval(&comm_keyval);
  comm_keyval = MPI_KEYVAL_INVALID;
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

/* CPUs this process may run on (its affinity mask, which mpiexec or srun may have narrowed). */
static int usable_cpus(void) {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    int n = CPU_COUNT(&set);
    if (n > 0) {
      return n;
    }
  }
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? (int)n : 1;
}

static int wait_policy_from_env(mpiar__wait_policy_t *policy) {
  const char *v = getenv("MPIAR_WAIT");
  if (v == NULL || *v == '\0' || strcmp(v, "auto") == 0) {
    *policy = MPIAR__WAIT_AUTO;
  } else if (strcmp(v, "spin") == 0) {
    *policy = MPIAR__WAIT_SPIN;
  } else if (strcmp(v, "yield") == 0) {
    *policy = MPIAR__WAIT_YIELD;
  } else {
    return mpiar__error(MPIAR_ERR_ENV, "MPIAR_WAIT='%s' is not one of spin, yield, auto", v);
  }
  return MPIAR_SUCCESS;
}

static int mpi_failed(int err, const char *what) {
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(err, msg, &len) != MPI_SUCCESS) {
    snprintf(msg, sizeof msg, "MPI error %d", err);
  }
  return mpiar__error(MPIAR_ERR_MPI, "%s failed: %s", what, msg);
}

static int context_create(MPI_Comm comm, mpiar__context_t **out) {
  int rc = MPIAR_SUCCESS;
  mpiar__wait_policy_t policy = MPIAR__WAIT_AUTO;
  MPIAR__CHECK(wait_policy_from_env(&policy));

  mpiar__context_t *ctx = calloc(1, sizeof *ctx);
  if (ctx == NULL) {
    return mpiar__error(MPIAR_ERR_NOMEM, "cannot allocate a communicator context");
  }
  ctx->user_comm = comm;
  ctx->comm = MPI_COMM_NULL;
  ctx->wait = policy;
  int err = MPI_Comm_dup(comm, &ctx->comm);
  if (err != MPI_SUCCESS) {
    free(ctx);
    return mpi_failed(err, "MPI_Comm_dup");
  }
  /* Library errors are returned as codes, never turned into an abort by MPI. */
  MPI_Comm_set_errhandler(ctx->comm, MPI_ERRORS_RETURN);
  MPI_Comm_rank(ctx->comm, &ctx->rank);
  MPI_Comm_size(ctx->comm, &ctx->size);

  MPI_Comm node = MPI_COMM_NULL;
  err = MPI_Comm_split_type(ctx->comm, MPI_COMM_TYPE_SHARED, ctx->rank, MPI_INFO_NULL, &node);
  if (err != MPI_SUCCESS) {
    MPI_Comm_free(&ctx->comm);
    free(ctx);
    return mpi_failed(err, "MPI_Comm_split_type");
  }
  MPI_Comm_size(node, &ctx->local_ranks);
  MPI_Comm_free(&node);
  ctx->cores = usable_cpus();
  /* Cores of the node shared among the ranks on it; a rank's own affinity mask counts the CPUs
   * it may use, so a pinned rank gets those and an unpinned one gets its share of the node. */
  int share = ctx->cores / (ctx->local_ranks > 0 ? ctx->local_ranks : 1);
  mpiar__kernel_set_default_threads(share > 0 ? share : 1);

  pthread_mutex_lock(&live_lock);
  ctx->live_next = live_head;
  if (live_head != NULL) {
    live_head->live_prev = ctx;
  }
  live_head = ctx;
  live_count++;
  pthread_mutex_unlock(&live_lock);

  err = MPI_Comm_set_attr(comm, comm_keyval, ctx);
  if (err != MPI_SUCCESS) {
    context_destroy(ctx);
    return mpi_failed(err, "MPI_Comm_set_attr");
  }
  *out = ctx;
cleanup:
  return rc;
}

int mpiar__context_get(MPI_Comm comm, mpiar__context_t **ctx) {
  if (comm == MPI_COMM_NULL) {
    return mpiar__error(MPIAR_ERR_COMM, "the communicator is MPI_COMM_NULL");
  }
  int inter = 0;
  int err = MPI_Comm_test_inter(comm, &inter);
  if (err != MPI_SUCCESS) {
    return mpiar__error(MPIAR_ERR_COMM, "not a valid communicator");
  }
  if (inter) {
    return mpiar__error(MPIAR_ERR_COMM, "intercommunicators are not supported");
  }
  pthread_once(&keyval_once, create_keyvals);
  if (keyval_error != MPI_SUCCESS || comm_keyval == MPI_KEYVAL_INVALID) {
    return mpiar__error(MPIAR_ERR_MPI, "cannot create the MPI attribute keys (error class %d)",
                        keyval_error);
  }
  void *attr = NULL;
  int found = 0;
  err = MPI_Comm_get_attr(comm, comm_keyval, &attr, &found);
  if (err != MPI_SUCCESS) {
    return mpi_failed(err, "MPI_Comm_get_attr");
  }
  if (found) {
    *ctx = attr;
    return MPIAR_SUCCESS;
  }
  return context_create(comm, ctx);
}

void mpiar__context_break(mpiar__context_t *ctx, const char *reason) {
  ctx->broken = 1;
  snprintf(ctx->broken_reason, sizeof ctx->broken_reason, "%s", reason);
}
