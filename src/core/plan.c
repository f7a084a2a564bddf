/*
 * Plan cache. A plan is a built, finalized schedule plus every array the executor needs, so a
 * cache hit allocates nothing and builds nothing. Plans are found through a hash of their key
 * and kept in a recency list, so that beyond MPIAR__PLAN_CACHE_MAX the least recently used one
 * is freed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/context.h"

size_t mpiar__plans_built;
int mpiar__plan_cache_max = MPIAR__PLAN_CACHE_MAX;

static int key_equal(const mpiar__plan_key_t *a, const mpiar__plan_key_t *b) {
  return a->coll == b->coll && a->count == b->count && a->elem_size == b->elem_size &&
         a->builder == b->builder && a->segment_elems == b->segment_elems &&
         a->in_place == b->in_place && a->root == b->root;
}

void mpiar__plan_free(mpiar__plan_t *plan) {
  if (plan == NULL) {
    return;
  }
  mpiar__schedule_destroy(&plan->sched);
  free(plan->pending);
  free(plan->ready);
  free(plan->piece_first);
  free(plan->piece_left);
  free(plan->active);
  free(plan->active_step);
  free(plan->done_idx);
  free(plan->statuses);
  free(plan);
}

/* Number of MPI messages a step of `bytes` bytes is sent as (at least one, even when empty). */
static size_t pieces_of(size_t bytes) {
  size_t max = mpiar__max_message_bytes;
  return bytes <= max ? 1 : (bytes + max - 1) / max;
}

static int plan_build(mpiar__context_t *ctx, const mpiar__plan_key_t *key, const char *name,
                      mpiar__builder_fn build, mpiar__plan_t **out) {
  int rc = MPIAR_SUCCESS;
  mpiar__plan_t *plan = calloc(1, sizeof *plan);
  if (plan == NULL) {
    return mpiar__error(MPIAR_ERR_NOMEM, "cannot allocate a plan");
  }
  plan->key = *key;
  plan->name = name;
  mpiar__schedule_init(&plan->sched, ctx->rank, ctx->size, key->count, key->elem_size,
                       key->in_place, name, key->segment_elems);
  plan->sched.root = key->root;
  MPIAR__CHECK(build(&plan->sched));
  MPIAR__CHECK(mpiar__schedule_finalize(&plan->sched));

  const mpiar__schedule_t *s = &plan->sched;
  size_t n = s->nsteps;
  plan->pending = malloc((n + 1) * sizeof *plan->pending);
  plan->ready = malloc((2 * n + 1) * sizeof *plan->ready);
  plan->piece_first = malloc((n + 1) * sizeof *plan->piece_first);
  plan->piece_left = malloc((n + 1) * sizeof *plan->piece_left);
  if (!plan->pending || !plan->ready || !plan->piece_first || !plan->piece_left) {
    MPIAR__FAIL(MPIAR_ERR_NOMEM, "cannot allocate the executor state of a %zu-step plan", n);
  }
  size_t pieces = 0;
  for (size_t i = 0; i < n; i++) {
    plan->piece_first[i] = (uint32_t)pieces;
    const mpiar__step_t *st = &s->steps[i];
    if (st->kind == MPIAR__STEP_SEND || st->kind == MPIAR__STEP_RECV) {
      pieces += pieces_of(st->count * s->elem_size);
    }
  }
  plan->piece_first[n] = (uint32_t)pieces;
  plan->npieces = pieces;
  plan->active = malloc((pieces + 1) * sizeof *plan->active);
  plan->active_step = malloc((pieces + 1) * sizeof *plan->active_step);
  plan->done_idx = malloc((pieces + 1) * sizeof *plan->done_idx);
  plan->statuses = malloc((pieces + 1) * sizeof *plan->statuses);
  if (!plan->active || !plan->active_step || !plan->done_idx || !plan->statuses) {
    MPIAR__FAIL(MPIAR_ERR_NOMEM, "cannot allocate %zu request slots", pieces);
  }

  size_t scratch = s->scratch_elems * s->elem_size;
  if (scratch > ctx->scratch_bytes) {
    void *p = NULL;
    /* 64-byte alignment keeps the vector kernels on full cache lines. */
    size_t rounded = (scratch + 63) & ~(size_t)63;
    if (posix_memalign(&p, 64, rounded) != 0) {
      MPIAR__FAIL(MPIAR_ERR_NOMEM, "cannot allocate %zu bytes of scratch", scratch);
    }
    free(ctx->scratch);
    ctx->scratch = p;
    ctx->scratch_bytes = rounded;
  }
  if (getenv("MPIAR_DEBUG_SCHEDULE") != NULL && strcmp(getenv("MPIAR_DEBUG_SCHEDULE"), "1") == 0) {
    fprintf(stderr, "mpiar: rank %d schedule %s, %zu elements of %zu bytes\n", ctx->rank, name,
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
  mpiar__plan_free(victim);
  ctx->nplans--;
}

void mpiar__plans_free_all(mpiar__context_t *ctx) {
  while (ctx->lru_tail != NULL) {
    plan_evict(ctx, ctx->lru_tail);
  }
}

int mpiar__plan_get(mpiar__context_t *ctx, const mpiar__plan_key_t *key, const char *name,
                    mpiar__builder_fn build, mpiar__plan_t **plan) {
  uint32_t h = key_hash(key);
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
  while (ctx->nplans > mpiar__plan_cache_max && ctx->lru_tail != fresh) {
    /* Drop the least recently used plans (the scratch stays: it is sized for the largest). */
    plan_evict(ctx, ctx->lru_tail);
  }
  *plan = fresh;
  return MPIAR_SUCCESS;
}
