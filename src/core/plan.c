/*
 * Plan cache. A plan is a built, finalized schedule plus what the executor derives from it once:
 * the message pieces with their tags, the dependency counts and the steps that start a run. Plans
 * are immutable after building and shared by every request that runs them; each plan also keeps a
 * few finished requests for reuse, so a cache hit allocates nothing and builds nothing. Plans are
 * found through a hash of their key and kept in a recency list; beyond MPIAR__PLAN_CACHE_MAX the
 * least recently used plan that no request holds is freed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/context.h"
#include "core/schedfile_plan.h"

size_t mpiar__plans_built;
int mpiar__plan_cache_max = MPIAR__PLAN_CACHE_MAX;

/* The largest schedule a plan may hold (steps of one rank): bounds memory and build time. */
#define MPIAR__PLAN_MAX_STEPS ((size_t)1 << 24)

static int key_equal(const mpiar__plan_key_t *a, const mpiar__plan_key_t *b) {
  return a->coll == b->coll && a->count == b->count && a->elem_size == b->elem_size &&
         a->builder == b->builder && a->segment_elems == b->segment_elems &&
         a->in_place == b->in_place && a->root == b->root;
}

void mpiar__plan_free(mpiar__plan_t *plan) {
  if (plan == NULL) {
    return;
  }
  while (plan->spare != NULL) {
    mpiar__request_t *r = plan->spare;
    plan->spare = r->next;
    mpiar__request_free_mem(r);
  }
  mpiar__plan_unprepare(plan);
  free(plan);
}

static int plan_build(mpiar__context_t *ctx, const mpiar__plan_key_t *key, const char *name,
                      mpiar__builder_fn build, mpiar__plan_t **out) {
  int rc = mpiar__schedfile_plan_agree(ctx, key); /* a schedule file: the ranks agree on it */
  if (rc != MPIAR_SUCCESS) {
    return rc;
  }
  mpiar__plan_t *plan = calloc(1, sizeof *plan);
  if (plan == NULL) {
    return mpiar__error(MPIAR_ERR_NOMEM, "cannot allocate a plan");
  }
  plan->key = *key;
  plan->name = name;
  mpiar__schedule_init(&plan->sched, ctx->eng.rank, ctx->eng.size, key->count, key->elem_size,
                       key->in_place, name, key->segment_elems);
  plan->sched.root = key->root;
  plan->sched.topo = ctx->has_topo ? &ctx->topo : NULL;
  plan->sched.max_steps = MPIAR__PLAN_MAX_STEPS;
  MPIAR__CHECK(build(&plan->sched));
  MPIAR__CHECK(mpiar__schedule_finalize(&plan->sched));

  MPIAR__CHECK(mpiar__plan_prepare(plan, ctx->eng.exact_max, mpiar__max_message_bytes));
  const mpiar__schedule_t *s = &plan->sched;
  const mpiar__settings_t *set = NULL;
  mpiar__settings(&set);
  if (set->debug_schedule) {
    fprintf(stderr, "mpiar: rank %d schedule %s, %zu elements of %zu bytes\n", ctx->eng.rank, name,
            key->count, key->elem_size);
    mpiar__schedule_print(s, stderr);
  }
  __atomic_fetch_add(&mpiar__plans_built, 1, __ATOMIC_RELAXED);
  *out = plan;
  return MPIAR_SUCCESS;
cleanup:
  mpiar__plan_free(plan);
  return rc;
}

static uint32_t key_hash(const mpiar__plan_key_t *k) {
  uint64_t h = 0x9e3779b97f4a7c15ULL;
  const uint64_t parts[] = {(uint64_t)k->coll,          (uint64_t)k->count,
                            (uint64_t)k->elem_size,     (uint64_t)(uintptr_t)k->builder,
                            (uint64_t)k->segment_elems, (uint64_t)k->in_place,
                            (uint64_t)(int64_t)k->root};
  for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
    h = (h ^ parts[i]) * 0xff51afd7ed558ccdULL;
    h ^= h >> 29;
  }
  return (uint32_t)(h ^ (h >> 32));
}

static void lru_unlink(mpiar__context_t *ctx, mpiar__plan_t *p) {
  if (p->lru_prev != NULL) {
    p->lru_prev->lru_next = p->lru_next;
  } else {
    ctx->lru_head = p->lru_next;
  }
  if (p->lru_next != NULL) {
    p->lru_next->lru_prev = p->lru_prev;
  } else {
    ctx->lru_tail = p->lru_prev;
  }
  p->lru_prev = p->lru_next = NULL;
}

static void lru_push_front(mpiar__context_t *ctx, mpiar__plan_t *p) {
  p->lru_prev = NULL;
  p->lru_next = ctx->lru_head;
  if (ctx->lru_head != NULL) {
    ctx->lru_head->lru_prev = p;
  } else {
    ctx->lru_tail = p;
  }
  ctx->lru_head = p;
}

/* Remove a plan from its bucket and the recency list, and free it. */
static void plan_evict(mpiar__context_t *ctx, mpiar__plan_t *victim) {
  mpiar__plan_t **link = &ctx->buckets[victim->hash & (MPIAR__PLAN_BUCKETS - 1)];
  while (*link != victim) {
    link = &(*link)->hnext;
  }
  *link = victim->hnext;
  lru_unlink(ctx, victim);
  mpiar__calls_forget_plan(ctx, victim);
  mpiar__plan_free(victim);
  ctx->nplans--;
}

void mpiar__plans_free_all(mpiar__context_t *ctx) {
  /* Plans still held by requests (persistent ones the user has not freed) stay: the requests
   * free them with the context. */
  mpiar__plan_t *p = ctx->lru_tail;
  while (p != NULL) {
    mpiar__plan_t *prev = p->lru_prev;
    if (p->refs == 0) {
      plan_evict(ctx, p);
    }
    p = prev;
  }
}

int mpiar__plan_get(mpiar__context_t *ctx, const mpiar__plan_key_t *key, const char *name,
                    mpiar__builder_fn build, mpiar__plan_t **plan, int *built) {
  uint32_t h = key_hash(key);
  if (built != NULL) {
    *built = 0;
  }
  mpiar__plan_t **bucket = &ctx->buckets[h & (MPIAR__PLAN_BUCKETS - 1)];
  for (mpiar__plan_t *p = *bucket; p != NULL; p = p->hnext) {
    if (p->hash == h && key_equal(&p->key, key)) {
      if (ctx->lru_head != p) {
        lru_unlink(ctx, p);
        lru_push_front(ctx, p);
      }
      *plan = p;
      return MPIAR_SUCCESS;
    }
  }
  mpiar__plan_t *fresh = NULL;
  int rc = plan_build(ctx, key, name, build, &fresh);
  if (rc != MPIAR_SUCCESS) {
    return rc;
  }
  ctx->nplans++;
  fresh->hash = h;
  fresh->hnext = *bucket;
  *bucket = fresh;
  lru_push_front(ctx, fresh);
  /* Drop the least recently used plans that no request holds. */
  mpiar__plan_t *p = ctx->lru_tail;
  while (ctx->nplans > mpiar__plan_cache_max && p != NULL && p != fresh) {
    mpiar__plan_t *prev = p->lru_prev;
    if (p->refs == 0) {
      plan_evict(ctx, p);
    }
    p = prev;
  }
  *plan = fresh;
  if (built != NULL) {
    *built = 1;
  }
  return MPIAR_SUCCESS;
}
