/*
 * Accessors for tests and tools (inspect.h): the only file that reads the core's structures on
 * their behalf.
 */
#include <stdio.h>
#include <string.h>

#include "core/context.h"
#include "core/inspect.h"

size_t mpiar__inspect_plans_built(void) {
  return __atomic_load_n(&mpiar__plans_built, __ATOMIC_RELAXED);
}

void mpiar__inspect_add_plans_built(size_t n) {
  __atomic_fetch_add(&mpiar__plans_built, n, __ATOMIC_RELAXED);
}

size_t mpiar__inspect_requests_allocated(void) {
  return __atomic_load_n(&mpiar__requests_allocated, __ATOMIC_RELAXED);
}

long mpiar__inspect_requests_live(void) {
  return __atomic_load_n(&mpiar__requests_live, __ATOMIC_RELAXED);
}

int mpiar__inspect_live_contexts(void) {
  return mpiar__live_contexts();
}

int mpiar__inspect_set_plan_cache_max(int max) {
  int old = mpiar__plan_cache_max;
  mpiar__plan_cache_max = max;
  return old;
}

size_t mpiar__inspect_set_max_message_bytes(size_t bytes) {
  size_t old = mpiar__max_message_bytes;
  mpiar__max_message_bytes = bytes;
  return old;
}

int mpiar__inspect_context(MPI_Comm comm, mpiar__inspect_context_t *out) {
  memset(out, 0, sizeof *out);
  mpiar__context_t *ctx = NULL;
  int rc = mpiar__context_enter(comm, 0, &ctx);
  if (rc != MPIAR_SUCCESS) {
    return rc;
  }
  out->yield = ctx->yield;
  out->node_cpus = ctx->node_cpus;
  out->local_ranks = ctx->local_ranks;
  out->nnodes = ctx->nnodes > 0 ? ctx->nnodes : 1;
  out->nplans = ctx->nplans;
  snprintf(out->transport, sizeof out->transport, "%s",
           ctx->eng.tx != NULL ? ctx->eng.tx->name : "none");
  mpiar__context_leave(ctx);
  return MPIAR_SUCCESS;
}

int mpiar__inspect_context_cached(MPI_Comm comm) {
  return mpiar__context_cached(comm) != NULL;
}

int mpiar__inspect_node_of(MPI_Comm comm, int *node_of, int n) {
  mpiar__context_t *ctx = NULL;
  int rc = mpiar__context_enter(comm, 0, &ctx);
  if (rc != MPIAR_SUCCESS) {
    return rc;
  }
  if (n != ctx->eng.size) {
    mpiar__context_leave(ctx);
    return mpiar__error(MPIAR_ERR_INVALID_ARG, "%d ranks asked of a communicator of %d", n,
                        ctx->eng.size);
  }
  for (int r = 0; r < n; r++) {
    node_of[r] = ctx->node_of != NULL ? ctx->node_of[r] : 0;
  }
  mpiar__context_leave(ctx);
  return MPIAR_SUCCESS;
}

int mpiar__inspect_set_yield(MPI_Comm comm, int yield) {
  mpiar__context_t *ctx = NULL;
  int rc = mpiar__context_enter(comm, 0, &ctx);
  if (rc != MPIAR_SUCCESS) {
    return rc;
  }
  ctx->yield = yield;
  mpiar__context_leave(ctx);
  return MPIAR_SUCCESS;
}

static void describe_plan(const mpiar__context_t *ctx, const mpiar__plan_t *plan,
                          mpiar__inspect_plan_t *out) {
  memset(out, 0, sizeof *out);
  if (plan == NULL) {
    return;
  }
  out->id = plan;
  snprintf(out->name, sizeof out->name, "%s", plan->name != NULL ? plan->name : "");
  out->count = plan->key.count;
  out->segment_elems = plan->key.segment_elems;
  out->nsteps = plan->sched.nsteps;
  out->kept = ctx->kept.req != NULL && ctx->kept.req->plan == plan;
}

int mpiar__inspect_plan(MPI_Comm comm, int which, mpiar__inspect_plan_t *out) {
  memset(out, 0, sizeof *out);
  if (which != MPIAR__INSPECT_RECENT && which != MPIAR__INSPECT_LAST_CALL) {
    return mpiar__error(MPIAR_ERR_INVALID_ARG, "no plan kind %d", which);
  }
  mpiar__context_t *ctx = NULL;
  int rc = mpiar__context_enter(comm, 0, &ctx);
  if (rc != MPIAR_SUCCESS) {
    return rc;
  }
  describe_plan(ctx,
                which == MPIAR__INSPECT_RECENT ? ctx->lru_head
                                               : (ctx->last != NULL ? ctx->last->plan : NULL),
                out);
  mpiar__context_leave(ctx);
  return MPIAR_SUCCESS;
}

int mpiar__inspect_plan_lookup(MPI_Comm comm, int alg, size_t count, size_t elem_size, int *built) {
  if (alg < 0 || alg >= mpiar__algorithm_count) {
    return mpiar__error(MPIAR_ERR_INVALID_ARG, "no registry entry %d", alg);
  }
  mpiar__context_t *ctx = mpiar__context_cached(comm);
  if (ctx == NULL) {
    return mpiar__error(MPIAR_ERR_COMM, "this thread has no context cached for the communicator");
  }
  int rc = mpiar__context_enter_ctx(ctx);
  if (rc != MPIAR_SUCCESS) {
    return rc;
  }
  const mpiar__algorithm_t *a = &mpiar__algorithms[alg];
  mpiar__plan_key_t key = {.coll = MPIAR__COLL_ALLREDUCE,
                           .count = count,
                           .elem_size = elem_size,
                           .builder = a,
                           .segment_elems = (a->flags & MPIAR__ALG_SEGMENTED) ? count : 0,
                           .in_place = 1,
                           .root = -1};
  mpiar__plan_t *plan = NULL;
  rc = mpiar__plan_get(ctx, &key, a->name, a->build, &plan, built);
  mpiar__context_leave(ctx);
  return rc;
}

int mpiar__inspect_request(mpiar_request_t h, mpiar__inspect_request_t *out) {
  memset(out, 0, sizeof *out);
  const mpiar__request_t *r = mpiar__handle_request(h);
  if (r == NULL) {
    return mpiar__error(MPIAR_ERR_INVALID_ARG, "not a live request handle");
  }
  out->active = __atomic_load_n(&r->state, __ATOMIC_ACQUIRE) == MPIAR__REQ_ACTIVE;
  out->check = r->check;
  return MPIAR_SUCCESS;
}

void mpiar__inspect_fingerprint(struct mpiar__fingerprint *fp) {
  mpiar__fingerprint_here(fp);
}

int mpiar__inspect_model_choice(const struct mpiar__tuning *fitted, size_t bytes,
                                mpiar_dtype_t dtype, int nranks, const struct mpiar__topology *topo,
                                const struct mpiar__algorithm **alg, size_t *segment_bytes) {
  mpiar__settings_t set;
  memset(&set, 0, sizeof set);
  mpiar__selector_t sel;
  memset(&sel, 0, sizeof sel);
  sel.tuning = fitted; /* the table unused (sel.table 0): the model with its parameters */
  mpiar__choice_t ch;
  int rc = mpiar__select(&set, &sel, NULL, 0, bytes, dtype, nranks, topo, 0, &ch);
  *alg = ch.alg;
  *segment_bytes = ch.segment_bytes;
  return rc;
}
