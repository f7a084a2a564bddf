/*
 * The public collective calls. Blocking, nonblocking and persistent forms share one path: check
 * the arguments, enter the communicator's context, select the algorithm, find the plan, make a
 * request; then start it (and, when blocking, wait for it) on the one executor.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/context.h"
#include "core/shm.h"
#include "reduce_kernels/kernels.h"

/* Everything a collective call names. */
typedef struct call {
  int coll; /* mpiar__coll_t */
  const char *fn;
  const void *in;
  void *out;
  size_t count;
  mpiar_dtype_t dtype;
  mpiar_op_t op;
  int root;
  MPI_Comm comm;
  mpiar_options_t opts; /* the caller's, completed with defaults */
} call_t;

/* Report a new choice once per communicator (rank 0 only) under MPIAR_DEBUG=1, with where it
 * came from. */
static void report_choice(mpiar__context_t *ctx, const char *coll, const char *name,
                          const void *builder, size_t bytes, size_t segment_elems, size_t elem_size,
                          const mpiar__choice_t *choice) {
  if (ctx->eng.rank != 0) {
    return;
  }
  size_t bucket = 0;
  while (bucket < 64 && ((size_t)1 << bucket) < bytes) {
    bucket++;
  }
  for (int i = 0; i < ctx->nreported; i++) {
    if (ctx->reported[i].builder == builder && ctx->reported[i].segment_elems == segment_elems &&
        ctx->reported[i].bytes_bucket == bucket) {
      return;
    }
  }
  int slot = ctx->nreported < 16 ? ctx->nreported++ : (int)(bucket % 16);
  ctx->reported[slot].builder = builder;
  ctx->reported[slot].segment_elems = segment_elems;
  ctx->reported[slot].bytes_bucket = bucket;
  char source[640] = "cost model";
  if (choice != NULL) {
    mpiar__choice_describe(ctx, choice, source, sizeof source);
  }
  fprintf(stderr, "mpiar: %s of %zu bytes on %d ranks: %s, segment %zu bytes (source: %s)\n", coll,
          bytes, ctx->eng.size, name, segment_elems * elem_size, source);
}

/*
 * The layouts of mpiar_options_t released so far. struct_size is the sizeof of the caller's
 * layout, which includes its tail padding: the first layout (0.1, the fields up to timeout_ms)
 * has sizeof 32 and the current one puts check in those last 4 bytes. So a field is read only
 * from a structure at least as large as the first layout that had it, never from an older
 * layout's padding.
 */
typedef struct options_v1 {
  size_t struct_size;
  const char *algorithm;
  size_t segment_bytes;
  int timeout_ms;
} options_v1_t;

/* The caller's options, checked: struct_size tells which fields the caller's header had. */
static int read_options(const mpiar_options_t *opts, mpiar_options_t *out, const char *fn) {
  static const mpiar_options_t defaults = MPIAR_OPTIONS_INIT;
  *out = defaults;
  if (opts == NULL) {
    return MPIAR_SUCCESS;
  }
  size_t need = offsetof(mpiar_options_t, timeout_ms) + sizeof(int);
  if (opts->struct_size < need || opts->struct_size > 4096) {
    return mpiar__error(MPIAR_ERR_INVALID_ARG,
                        "%s: the options were not initialised with MPIAR_OPTIONS_INIT (size field "
                        "%zu)",
                        fn, opts->struct_size);
  }
  /* "auto" is the automatic choice, as NULL is: the call cache serves both. */
  out->algorithm =
      opts->algorithm != NULL && strcmp(opts->algorithm, "auto") == 0 ? NULL : opts->algorithm;
  out->segment_bytes = opts->segment_bytes;
  out->timeout_ms = opts->timeout_ms;
  if (opts->struct_size > sizeof(options_v1_t)) { /* the layout with check and reproducible */
    out->check = opts->check;
    out->reproducible = opts->reproducible;
  }
  if (out->check < -1 || out->check > 1 || out->reproducible < -1 || out->reproducible > 1) {
    return mpiar__error(MPIAR_ERR_INVALID_ARG, "%s: options check and reproducible are -1, 0 or 1",
                        fn);
  }
  return MPIAR_SUCCESS;
}

/* The call's deadline in ms (0: none). */
static long deadline_ms(const call_t *c, const mpiar__settings_t *set) {
  return mpiar__deadline_ms(c->opts.timeout_ms, set);
}

/* What each collective's arguments are, for the checks and the messages (one row each). */
static const struct coll_args {
  const char *name; /* in MPIAR_DEBUG lines */
  int send_buffer;  /* a send buffer besides the receive buffer (or MPIAR_IN_PLACE) */
  int root;         /* a root rank, checked against the communicator */
  int reduces;      /* the operation applies (else the call key and signature hold none) */
  /* The buffers' sizes, in count elements (1) or count elements per rank (the communicator's
   * size, 0 here): a call with a per-rank buffer checks overlap once it knows the size. */
  int send_blocks, recv_blocks;
} coll_args[] = {
    [MPIAR__COLL_ALLREDUCE] = {"allreduce", 1, 0, 1, 1, 1},
    [MPIAR__COLL_BCAST] = {"bcast", 0, 1, 0, 1, 1},
    [MPIAR__COLL_REDUCE_SCATTER] = {"reduce_scatter_block", 1, 0, 1, 0, 1},
    [MPIAR__COLL_ALLGATHER] = {"allgather", 1, 0, 0, 1, 0},
};

/* In place: MPIAR_IN_PLACE, or (where the input is read from the receive buffer's start) the
 * receive buffer itself; an allgather's block sits at the rank's place instead. */
static inline int call_in_place(const call_t *c) {
  return !coll_args[c->coll].send_buffer || c->in == MPIAR_IN_PLACE ||
         (c->in == c->out && c->coll != MPIAR__COLL_ALLGATHER);
}

/* Partial overlap of a send buffer of @p sb bytes and a receive buffer of @p rb bytes. */
static int check_overlap(const call_t *c, size_t sb, size_t rb) {
  uintptr_t s = (uintptr_t)c->in, r = (uintptr_t)c->out;
  if (s < r + rb && r < s + sb) {
    return mpiar__error(MPIAR_ERR_OVERLAP,
                        "%s: send buffer %p (%zu bytes) and receive buffer %p (%zu bytes) overlap",
                        c->fn, c->in, sb, (void *)c->out, rb);
  }
  return MPIAR_SUCCESS;
}

/* The checks of a call whose buffers hold count elements per rank, on @p nranks ranks. */
static int check_rank_buffers(const call_t *c, int nranks) {
  const struct coll_args *a = &coll_args[c->coll];
  if (a->send_blocks && a->recv_blocks) {
    return MPIAR_SUCCESS; /* checked with the others */
  }
  size_t es = mpiar_dtype_size(c->dtype);
  if (c->count > SIZE_MAX / es / (size_t)nranks / 2) {
    return mpiar__error(MPIAR_ERR_INVALID_ARG, "%s: %zu elements per rank on %d ranks overflow",
                        c->fn, c->count, nranks);
  }
  if (call_in_place(c) || c->count == 0) {
    return MPIAR_SUCCESS;
  }
  size_t block = c->count * es, all = block * (size_t)nranks;
  return check_overlap(c, a->send_blocks ? block : all, a->recv_blocks ? block : all);
}

/* Checks that need no communicator: settings, datatype, count, buffers, operation. */
static int check_args(const call_t *c, const mpiar__settings_t **set) {
  /* Settings, MPIAR_ALGORITHM against the registry and the tuning file. */
  int rc = mpiar__settings_checked(set, NULL);
  if (MPIAR__UNLIKELY(rc != MPIAR_SUCCESS)) {
    return mpiar__context_join_failed(c->comm, deadline_ms(c, *set), rc);
  }
  if ((rc = mpiar__check_reduction(c->fn, c->dtype, c->op, c->count)) != MPIAR_SUCCESS) {
    return rc;
  }
  size_t es = mpiar_dtype_size(c->dtype);
  if (c->count > 0 && c->out == NULL) {
    return mpiar__error(MPIAR_ERR_NULL_BUFFER, "%s: NULL buffer with count %zu", c->fn, c->count);
  }
  if (coll_args[c->coll].send_buffer) {
    if (!call_in_place(c) && c->count > 0) {
      if (c->in == NULL) {
        return mpiar__error(MPIAR_ERR_NULL_BUFFER, "%s: NULL send buffer with count %zu", c->fn,
                            c->count);
      }
      size_t bytes = c->count * es;
      uintptr_t s = (uintptr_t)c->in, r = (uintptr_t)c->out;
      if (coll_args[c->coll].send_blocks && coll_args[c->coll].recv_blocks && s < r + bytes &&
          r < s + bytes) {
        return mpiar__error(MPIAR_ERR_OVERLAP,
                            "%s: send buffer %p and receive buffer %p overlap partially over %zu "
                            "bytes",
                            c->fn, c->in, (void *)c->out, bytes);
      }
    }
  }
  rc = mpiar__kernels_init();
  if (MPIAR__UNLIKELY(rc != MPIAR_SUCCESS)) {
    /* A kernel level this CPU lacks (MPIAR_KERNEL) on this rank only: the others fail with it. */
    return mpiar__context_join_failed(c->comm, deadline_ms(c, *set), rc);
  }
  return MPIAR_SUCCESS;
}

/* ---- the call cache ---- */

_Static_assert(sizeof(mpiar__call_key_t) == 2 * sizeof(size_t) + 8 * sizeof(int32_t),
               "the call key has no padding (keys compare as bytes)");

static inline int call_key_equal(const mpiar__call_key_t *a, const mpiar__call_key_t *b) {
  return memcmp(a, b, sizeof *a) == 0;
}

/* The hash of a call key (never 0): its top bits pick the entry. */
static inline uint64_t call_key_hash(const mpiar__call_key_t *k) {
  uint64_t w[sizeof *k / 8];
  memcpy(w, k, sizeof w);
  uint64_t h = w[0] * 0x9e3779b97f4a7c15ull;
  for (size_t i = 1; i < sizeof w / sizeof w[0]; i++) {
    h = (h ^ w[i]) * 0xff51afd7ed558ccdull;
  }
  return (h ^ (h >> 29)) | 1;
}

/* The filter of the kept request, read before entering: the call's buffers, count, datatype
 * and operation (never 0); the key is compared inside. */
static inline uint64_t kept_hash(const call_t *c) {
  uint64_t h = (uint64_t)(uintptr_t)c->in * 0x9e3779b97f4a7c15ull;
  h ^= (uint64_t)(uintptr_t)c->out * 0x632be59bd9b4e019ull;
  h ^= ((uint64_t)c->count << 16 | (uint64_t)c->dtype << 8 | (uint64_t)c->op) *
       0x85ebca77c2b2ae63ull;
  return h | 1;
}

static inline mpiar__call_entry_t *call_entry(mpiar__context_t *ctx, uint64_t hash) {
  return &ctx->calls[(hash >> 40) & (MPIAR__CALL_CACHE - 1)];
}

void mpiar__calls_forget_plan(mpiar__context_t *ctx, const mpiar__plan_t *plan) {
  for (size_t i = 0; i < MPIAR__CALL_CACHE; i++) {
    if (ctx->calls[i].plan == plan) {
      ctx->calls[i].plan = NULL;
    }
  }
}

/* The call key of @p c (one place: every field of mpiar__call_key_t is set here). */
static inline mpiar__call_key_t call_key(const call_t *c, int in_place, int reproducible,
                                         unsigned settings) {
  mpiar__call_key_t k = {
      .count = c->count,
      .zero = 0,
      .segment_bytes = c->opts.segment_bytes,
      .coll = c->coll,
      .root = c->coll == MPIAR__COLL_BCAST ? c->root : -1,
      .dtype = c->dtype,
      .op = coll_args[c->coll].reduces ? c->op : MPIAR_SUM,
      .in_place = in_place,
      .reproducible = reproducible,
      .settings = settings,
  };
  return k;
}

/* Select the algorithm of call @p c (key @p k) on @p ctx and find (or build) its plan: the
 * choice, the plan and the algorithm's number go to @p out. */
static int find_plan(const call_t *c, mpiar__context_t *ctx, const mpiar__settings_t *set,
                     const mpiar__call_key_t *k, mpiar__call_entry_t *out) {
  size_t es = mpiar_dtype_size(c->dtype);
  size_t bytes = c->count * es;
  mpiar__choice_t choice = {0};
  int have_choice = 0;
  int rc;
  if (c->coll == MPIAR__COLL_BCAST) {
    rc = mpiar__select_bcast(c->opts.algorithm, bytes, es, ctx->eng.size, &choice.alg);
  } else if (c->coll != MPIAR__COLL_ALLREDUCE) { /* bytes of the whole vector, p blocks */
    rc = mpiar__select_rsag(c->coll, c->opts.algorithm, bytes * (size_t)ctx->eng.size, es,
                            ctx->eng.size, &choice.alg);
  } else {
    int automatic = (c->opts.algorithm == NULL || strcmp(c->opts.algorithm, "auto") == 0) &&
                    c->opts.segment_bytes == 0 && set->algorithm[0] == '\0' &&
                    set->segment_bytes == 0;
    rc = mpiar__select(set, &ctx->selector, c->opts.algorithm, c->opts.segment_bytes, bytes,
                       c->dtype, ctx->eng.size, ctx->has_topo ? &ctx->topo : NULL,
                       automatic && k->reproducible, &choice);
    have_choice = 1;
  }
  if (rc != MPIAR_SUCCESS) {
    return rc;
  }
  const mpiar__algorithm_t *alg = choice.alg;
  if (k->reproducible && c->coll == MPIAR__COLL_ALLREDUCE) {
    /* The canonical order whatever was selected: the algorithm or its reproducible replacement
     * (which keeps the segment size). */
    alg = mpiar__algorithm_reproducible(alg, ctx->eng.size, c->dtype);
  } else if (k->reproducible && c->coll == MPIAR__COLL_REDUCE_SCATTER) {
    alg = mpiar__reduce_scatter_reproducible(alg, ctx->eng.size, c->dtype);
  }
  mpiar__plan_key_t key = {
      .coll = c->coll,
      .count = c->count,
      .elem_size = es,
      .builder = alg,
      .segment_elems = (alg->flags & MPIAR__ALG_SEGMENTED)
                           ? mpiar__segment_elems(choice.segment_bytes, c->count, es, ctx->eng.size)
                           : 0,
      .in_place = k->in_place,
      .root = k->root,
  };
  int built = 0;
  if ((rc = mpiar__plan_get(ctx, &key, alg->name, alg->build, &out->plan, &built)) !=
      MPIAR_SUCCESS) {
    return rc;
  }
  if (built && set->debug) {
    report_choice(ctx, coll_args[c->coll].name, alg->name, alg, bytes, key.segment_elems, es,
                  have_choice ? &choice : NULL);
  }
  out->alg_index = alg->index; /* the collective is another field */
  out->choice = choice;
  return MPIAR_SUCCESS;
}

/* A call made ready to start: its context (entered), its request and its call cache entry
 * (NULL for a call that names an algorithm). */
typedef struct prepared {
  mpiar__context_t *ctx;
  mpiar__request_t *r;
  mpiar__call_entry_t *entry;
  int persistent; /* set by the caller */
  int shm;        /* the zero-copy path (core/shm.c): no request, sc is the call */
  mpiar__shm_call_t sc;
} prepared_t;

/*
 * Everything before the start: arguments, context (entered on success), the call cache (else
 * selection and the plan cache), a request holding the buffers. On success the caller owns p->r
 * and is inside the context.
 */
static int prepare(call_t *c, int blocking, prepared_t *p) {
  const mpiar__settings_t *set = NULL;
  int rc = check_args(c, &set);
  if (rc != MPIAR_SUCCESS) {
    return rc;
  }
  long timeout_ms = deadline_ms(c, set);
  mpiar__context_t *ctx = NULL;
  if ((rc = mpiar__context_enter(c->comm, timeout_ms, &ctx)) != MPIAR_SUCCESS) {
    return rc;
  }
  if (coll_args[c->coll].root && (c->root < 0 || c->root >= ctx->eng.size)) {
    rc = mpiar__error(MPIAR_ERR_INVALID_ARG, "%s: root %d is not a rank of a %d-rank communicator",
                      c->fn, c->root, ctx->eng.size);
    goto fail;
  }
  if ((rc = check_rank_buffers(c, ctx->eng.size)) != MPIAR_SUCCESS) {
    goto fail;
  }
  int in_place = call_in_place(c);
  if (MPIAR__UNLIKELY(ctx->shm != NULL)) {
    /* Buffers in mpiar_alloc memory of this communicator: the zero-copy path. */
    p->sc = (mpiar__shm_call_t){.coll = c->coll,
                                .root = c->root,
                                .in = in_place ? NULL : c->in,
                                .out = c->out,
                                .count = c->count,
                                .dtype = c->dtype,
                                .op = c->op,
                                .timeout_ms = timeout_ms,
                                .across = blocking && c->coll == MPIAR__COLL_ALLREDUCE &&
                                          !(c->opts.reproducible >= 0 ? c->opts.reproducible
                                                                      : set->reproducible)};
    if (mpiar__shm_eligible(ctx, &p->sc)) {
      p->ctx = ctx;
      p->r = NULL;
      p->entry = NULL;
      p->shm = 1;
      return MPIAR_SUCCESS;
    }
  }
  mpiar__call_key_t key =
      call_key(c, in_place, c->opts.reproducible >= 0 ? c->opts.reproducible : set->reproducible,
               set->generation);
  /* The call cache, unless the options name an algorithm (a name is text the caller may change
   * under the same pointer). */
  mpiar__call_entry_t named, *e = &named;
  if (c->opts.algorithm == NULL) {
    /* The last call's entry first (a loop of like calls): no hash. */
    e = ctx->last;
    if (e == NULL || e->plan == NULL || !call_key_equal(&e->key, &key)) {
      e = call_entry(ctx, call_key_hash(&key));
      if (e->plan == NULL || !call_key_equal(&e->key, &key)) {
        if (e == ctx->kept.entry) {
          /* The kept request's entry changes: the same-call path may not use it any more. */
          __atomic_store_n(&ctx->kept.hash, 0, __ATOMIC_RELAXED);
          ctx->kept.entry = NULL;
        }
        e->plan = NULL;
        if ((rc = find_plan(c, ctx, set, &key, e)) != MPIAR_SUCCESS) {
          goto fail;
        }
        e->key = key;
      }
      ctx->last = e;
    }
  } else if ((rc = find_plan(c, ctx, set, &key, e)) != MPIAR_SUCCESS) {
    goto fail;
  }
  mpiar__plan_t *plan = e->plan;
  mpiar__request_t *r = ctx->kept.req;
  if (blocking && r != NULL && r->plan == plan) {
    /* The last blocking call's request, done and clean: it holds the plan's reference; it
     * takes the context's again. */
    __atomic_store_n(&ctx->kept.hash, 0, __ATOMIC_RELAXED);
    ctx->kept.req = NULL;
    r->state = MPIAR__REQ_INACTIVE;
    ctx->refs++;
  } else if ((rc = mpiar__request_new(ctx, plan, &r)) != MPIAR_SUCCESS) {
    goto fail;
  }
  r->dtype = c->dtype;
  /* AVG travels as a sum and is divided by the final reduction of each element. */
  r->kop = c->op == MPIAR_AVG ? MPIAR_SUM : c->op;
  r->average = coll_args[c->coll].reduces && c->op == MPIAR_AVG;
  r->in = c->in;
  r->out = c->out;
  r->base[MPIAR__BUF_INPUT] = (char *)(in_place ? c->out : c->in);
  r->base[MPIAR__BUF_OUTPUT] = (char *)c->out;
  r->base[MPIAR__BUF_SCRATCH] = (char *)r->scratch;
  r->timeout_ms = timeout_ms;
  r->check = c->opts.check >= 0 ? c->opts.check : set->check;
  if (r->check) { /* what the argument check agrees on */
    r->signature[0] = (uint64_t)c->coll;
    r->signature[1] = (uint64_t)c->count;
    r->signature[2] = (uint64_t)plan->key.elem_size;
    r->signature[3] = (uint64_t)c->dtype;
    r->signature[4] = coll_args[c->coll].reduces ? (uint64_t)c->op : 0;
    r->signature[5] = e->alg_index;
    r->signature[6] = (uint64_t)plan->key.segment_elems;
    r->signature[7] = c->coll == MPIAR__COLL_BCAST ? (uint64_t)c->root : UINT64_MAX;
  }
  p->ctx = ctx;
  p->r = r;
  p->entry = e == &named ? NULL : e;
  return MPIAR_SUCCESS;
fail:
  mpiar__context_leave(ctx);
  return rc;
}

/*
 * Run a prepared blocking call (the caller is inside its context): start, wait, then keep the
 * request for the next call of its cache entry if it succeeded, else release it.
 * @p no_options: the call had no options (the same call again may then skip the checks).
 */
static int run_prepared(const prepared_t *p, const call_t *c, int no_options) {
  mpiar__context_t *ctx = p->ctx;
  mpiar__request_t *r = p->r;
  ctx->refs++;
  int rc = mpiar__request_start(r);
  if (rc == MPIAR_SUCCESS) {
    rc = mpiar__wait_result(r);
  }
  if (rc == MPIAR_SUCCESS && p->entry != NULL && !ctx->eng.broken) {
    if (ctx->kept.req != NULL) {
      mpiar__context_drop_kept(ctx);
    }
    ctx->kept.req = r;
    ctx->refs--; /* a kept request does not hold its context */
    ctx->kept.entry = p->entry;
    ctx->kept.in = c->in;
    ctx->kept.out = c->out;
    __atomic_store_n(&ctx->kept.hash,
                     no_options && c->coll == MPIAR__COLL_ALLREDUCE ? kept_hash(c) : 0,
                     __ATOMIC_RELAXED);
  } else {
    mpiar__request_release(r);
  }
  mpiar__context_leave(ctx);
  mpiar__context_unref(ctx);
  return rc;
}

/*
 * Blocking: prepare, start, wait. A successful call's request is kept for the next call of its
 * cache entry, which then allocates and resets nothing.
 */
static int run_blocking(call_t *c, int no_options) {
  prepared_t p = {.persistent = 0};
  int rc = prepare(c, 1, &p);
  if (rc == MPIAR_SUCCESS && p.shm) {
    rc = mpiar__shm_run(p.ctx, &p.sc);
    mpiar__context_leave(p.ctx);
    return rc;
  }
  return rc != MPIAR_SUCCESS ? rc : run_prepared(&p, c, no_options);
}

/*
 * The same allreduce as the last blocking call on @p comm (no options; the same key and
 * buffers): its arguments passed every check then, and its request is kept as it ran.
 * *handled is 0 when this is not such a call (nothing was done).
 */
static int run_same_call(const call_t *c, int *handled) {
  *handled = 0;
  mpiar__context_t *ctx = mpiar__context_cached(c->comm);
  const mpiar__settings_t *set = NULL;
  /* The filter is read before entering (the kept request's fields are only read inside). */
  if (ctx == NULL || __atomic_load_n(&ctx->kept.hash, __ATOMIC_RELAXED) != kept_hash(c) ||
      mpiar__settings_checked(&set, NULL) != MPIAR_SUCCESS ||
      mpiar__context_enter_ctx(ctx) != MPIAR_SUCCESS) {
    return MPIAR_SUCCESS; /* the full path runs it (and reports what enter found) */
  }
  /* A nonzero filter means that the kept entry still holds the key of the kept call (an
   * allreduce without options: an entry that changes drops the filter), so the fields that may
   * differ are compared: buffers (and so in place), count, datatype, operation and the settings
   * (and so reproducible mode). */
  prepared_t p = {.ctx = ctx, .r = ctx->kept.req, .entry = ctx->kept.entry};
  if (ctx->eng.broken || p.r == NULL || ctx->kept.in != c->in || ctx->kept.out != c->out ||
      p.entry->plan != p.r->plan || p.entry->key.count != c->count ||
      p.entry->key.dtype != (int32_t)c->dtype || p.entry->key.op != (int32_t)c->op ||
      p.entry->key.settings != set->generation) {
    mpiar__context_leave(ctx);
    return MPIAR_SUCCESS;
  }
  *handled = 1;
  ctx->kept.req = NULL;
  p.r->state = MPIAR__REQ_INACTIVE;
  ctx->refs++; /* the request holds its context again */
  return run_prepared(&p, c, 1);
}

/* Nonblocking (start now) or persistent (start later). */
static int run_request(call_t *c, int persistent, mpiar_request_t *req) {
  if (req == NULL) {
    return mpiar__error(MPIAR_ERR_INVALID_ARG, "%s: the request pointer is NULL", c->fn);
  }
  *req = MPIAR_REQUEST_NULL;
  prepared_t p = {.persistent = persistent};
  int rc = prepare(c, 0, &p);
  if (rc != MPIAR_SUCCESS) {
    return rc;
  }
  if (p.shm) {
    rc = persistent ? mpiar__shm_init(p.ctx, &p.sc, req) : mpiar__shm_start(p.ctx, &p.sc, req);
    mpiar__context_leave(p.ctx);
    return rc;
  }
  mpiar__context_t *ctx = p.ctx;
  mpiar__request_t *r = p.r;
  r->persistent = persistent;
  mpiar_request_t h = MPIAR_REQUEST_NULL;
  if ((rc = mpiar__handle_new(r, &h)) != MPIAR_SUCCESS ||
      (!persistent && (rc = mpiar__request_start(r)) != MPIAR_SUCCESS)) {
    if (h != MPIAR_REQUEST_NULL) {
      mpiar__handle_release(&h);
    }
    ctx->refs++;
    mpiar__request_release(r);
    mpiar__context_leave(ctx);
    mpiar__context_unref(ctx);
    return rc;
  }
  *req = h;
  mpiar__context_leave(ctx);
  return MPIAR_SUCCESS;
}

static int start_call(call_t *c, const mpiar_options_t *opts) {
  mpiar__error_clear();
  return read_options(opts, &c->opts, c->fn);
}

#define ALLREDUCE_CALL(name, send, recv, n, t, o, cm)                                     \
  {                                                                                       \
    .coll = MPIAR__COLL_ALLREDUCE, .fn = name, .in = (send), .out = (recv), .count = (n), \
    .dtype = (t), .op = (o), .root = -1, .comm = (cm)                                     \
  }
#define BCAST_CALL(name, b, n, t, rt, cm)                                                     \
  {                                                                                           \
    .coll = MPIAR__COLL_BCAST, .fn = name, .in = (b), .out = (b), .count = (n), .dtype = (t), \
    .op = MPIAR_SUM, .root = (rt), .comm = (cm)                                               \
  }

int mpiar_allreduce_ex(const void *sendbuf, void *recvbuf, size_t count, mpiar_dtype_t dtype,
                       mpiar_op_t op, MPI_Comm comm, const mpiar_options_t *opts) {
  call_t c = ALLREDUCE_CALL("mpiar_allreduce", sendbuf, recvbuf, count, dtype, op, comm);
  if (opts == NULL) {
    mpiar__error_clear();
    int handled = 0;
    int rc = run_same_call(&c, &handled);
    if (handled) {
      return rc;
    }
  }
  int rc = start_call(&c, opts);
  return rc != MPIAR_SUCCESS ? rc : run_blocking(&c, opts == NULL);
}

int mpiar_allreduce(const void *sendbuf, void *recvbuf, size_t count, mpiar_dtype_t dtype,
                    mpiar_op_t op, MPI_Comm comm) {
  return mpiar_allreduce_ex(sendbuf, recvbuf, count, dtype, op, comm, NULL);
}

int mpiar_bcast_ex(void *buf, size_t count, mpiar_dtype_t dtype, int root, MPI_Comm comm,
                   const mpiar_options_t *opts) {
  call_t c = BCAST_CALL("mpiar_bcast", buf, count, dtype, root, comm);
  int rc = start_call(&c, opts);
  return rc != MPIAR_SUCCESS ? rc : run_blocking(&c, 0);
}

int mpiar_bcast(void *buf, size_t count, mpiar_dtype_t dtype, int root, MPI_Comm comm) {
  return mpiar_bcast_ex(buf, count, dtype, root, comm, NULL);
}

int mpiar_iallreduce(const void *sendbuf, void *recvbuf, size_t count, mpiar_dtype_t dtype,
                     mpiar_op_t op, MPI_Comm comm, const mpiar_options_t *opts,
                     mpiar_request_t *req) {
  call_t c = ALLREDUCE_CALL("mpiar_iallreduce", sendbuf, recvbuf, count, dtype, op, comm);
  int rc = start_call(&c, opts);
  return rc != MPIAR_SUCCESS ? rc : run_request(&c, 0, req);
}

int mpiar_ibcast(void *buf, size_t count, mpiar_dtype_t dtype, int root, MPI_Comm comm,
                 const mpiar_options_t *opts, mpiar_request_t *req) {
  call_t c = BCAST_CALL("mpiar_ibcast", buf, count, dtype, root, comm);
  int rc = start_call(&c, opts);
  return rc != MPIAR_SUCCESS ? rc : run_request(&c, 0, req);
}

int mpiar_allreduce_init(const void *sendbuf, void *recvbuf, size_t count, mpiar_dtype_t dtype,
                         mpiar_op_t op, MPI_Comm comm, const mpiar_options_t *opts,
                         mpiar_request_t *req) {
  call_t c = ALLREDUCE_CALL("mpiar_allreduce_init", sendbuf, recvbuf, count, dtype, op, comm);
  int rc = start_call(&c, opts);
  return rc != MPIAR_SUCCESS ? rc : run_request(&c, 1, req);
}

int mpiar_bcast_init(void *buf, size_t count, mpiar_dtype_t dtype, int root, MPI_Comm comm,
                     const mpiar_options_t *opts, mpiar_request_t *req) {
  call_t c = BCAST_CALL("mpiar_bcast_init", buf, count, dtype, root, comm);
  int rc = start_call(&c, opts);
  return rc != MPIAR_SUCCESS ? rc : run_request(&c, 1, req);
}

#define RS_CALL(name, send, recv, n, t, o, cm)                                                 \
  {                                                                                            \
    .coll = MPIAR__COLL_REDUCE_SCATTER, .fn = name, .in = (send), .out = (recv), .count = (n), \
    .dtype = (t), .op = (o), .root = -1, .comm = (cm)                                          \
  }
#define AG_CALL(name, send, recv, n, t, cm)                                               \
  {                                                                                       \
    .coll = MPIAR__COLL_ALLGATHER, .fn = name, .in = (send), .out = (recv), .count = (n), \
    .dtype = (t), .op = MPIAR_SUM, .root = -1, .comm = (cm)                               \
  }

int mpiar_reduce_scatter_block_ex(const void *sendbuf, void *recvbuf, size_t recvcount,
                                  mpiar_dtype_t dtype, mpiar_op_t op, MPI_Comm comm,
                                  const mpiar_options_t *opts) {
  call_t c = RS_CALL("mpiar_reduce_scatter_block", sendbuf, recvbuf, recvcount, dtype, op, comm);
  int rc = start_call(&c, opts);
  return rc != MPIAR_SUCCESS ? rc : run_blocking(&c, 0);
}

int mpiar_reduce_scatter_block(const void *sendbuf, void *recvbuf, size_t recvcount,
                               mpiar_dtype_t dtype, mpiar_op_t op, MPI_Comm comm) {
  return mpiar_reduce_scatter_block_ex(sendbuf, recvbuf, recvcount, dtype, op, comm, NULL);
}

int mpiar_ireduce_scatter_block(const void *sendbuf, void *recvbuf, size_t recvcount,
                                mpiar_dtype_t dtype, mpiar_op_t op, MPI_Comm comm,
                                const mpiar_options_t *opts, mpiar_request_t *req) {
  call_t c = RS_CALL("mpiar_ireduce_scatter_block", sendbuf, recvbuf, recvcount, dtype, op, comm);
  int rc = start_call(&c, opts);
  return rc != MPIAR_SUCCESS ? rc : run_request(&c, 0, req);
}

int mpiar_reduce_scatter_block_init(const void *sendbuf, void *recvbuf, size_t recvcount,
                                    mpiar_dtype_t dtype, mpiar_op_t op, MPI_Comm comm,
                                    const mpiar_options_t *opts, mpiar_request_t *req) {
  call_t c =
      RS_CALL("mpiar_reduce_scatter_block_init", sendbuf, recvbuf, recvcount, dtype, op, comm);
  int rc = start_call(&c, opts);
  return rc != MPIAR_SUCCESS ? rc : run_request(&c, 1, req);
}

int mpiar_allgather_ex(const void *sendbuf, void *recvbuf, size_t count, mpiar_dtype_t dtype,
                       MPI_Comm comm, const mpiar_options_t *opts) {
  call_t c = AG_CALL("mpiar_allgather", sendbuf, recvbuf, count, dtype, comm);
  int rc = start_call(&c, opts);
  return rc != MPIAR_SUCCESS ? rc : run_blocking(&c, 0);
}

int mpiar_allgather(const void *sendbuf, void *recvbuf, size_t count, mpiar_dtype_t dtype,
                    MPI_Comm comm) {
  return mpiar_allgather_ex(sendbuf, recvbuf, count, dtype, comm, NULL);
}

int mpiar_iallgather(const void *sendbuf, void *recvbuf, size_t count, mpiar_dtype_t dtype,
                     MPI_Comm comm, const mpiar_options_t *opts, mpiar_request_t *req) {
  call_t c = AG_CALL("mpiar_iallgather", sendbuf, recvbuf, count, dtype, comm);
  int rc = start_call(&c, opts);
  return rc != MPIAR_SUCCESS ? rc : run_request(&c, 0, req);
}

int mpiar_allgather_init(const void *sendbuf, void *recvbuf, size_t count, mpiar_dtype_t dtype,
                         MPI_Comm comm, const mpiar_options_t *opts, mpiar_request_t *req) {
  call_t c = AG_CALL("mpiar_allgather_init", sendbuf, recvbuf, count, dtype, comm);
  int rc = start_call(&c, opts);
  return rc != MPIAR_SUCCESS ? rc : run_request(&c, 1, req);
}

int mpiar_start(mpiar_request_t *req) {
  mpiar__error_clear();
  mpiar__request_t *r = NULL;
  int rc = mpiar__request_of(req, "mpiar_start", &r);
  if (rc != MPIAR_SUCCESS) {
    return rc;
  }
  if (r == NULL) {
    return mpiar__error(MPIAR_ERR_INVALID_ARG, "mpiar_start: the request is MPIAR_REQUEST_NULL");
  }
  if (!r->persistent) {
    return mpiar__error(MPIAR_ERR_INVALID_ARG,
                        "mpiar_start: the request is not persistent (made by mpiar_allreduce_init "
                        "or mpiar_bcast_init)");
  }
  if (r->state != MPIAR__REQ_INACTIVE) {
    return mpiar__error(MPIAR_ERR_INVALID_ARG,
                        "mpiar_start: the request is active (complete it with mpiar_wait or "
                        "mpiar_test first)");
  }
  if (r->greq != NULL) {
    return mpiar__grequest_restart(r); /* a persistent zero-copy collective (core/shm.c) */
  }
  rc = mpiar__context_enter_ctx(mpiar__ctx_of(r));
  if (rc != MPIAR_SUCCESS) {
    return rc;
  }
  if (mpiar__ctx_of(r)->eng.broken) {
    rc = mpiar__error(MPIAR_ERR_COMM_BROKEN,
                      "an earlier failure broke this communicator's context (%s); free it and use "
                      "a new one",
                      mpiar__ctx_of(r)->eng.broken_reason);
  } else {
    rc = mpiar__request_start(r);
  }
  mpiar__context_leave(mpiar__ctx_of(r));
  return rc;
}

int mpiar_startall(int n, mpiar_request_t reqs[]) {
  if (n < 0 || (n > 0 && reqs == NULL)) {
    mpiar__error_clear();
    return mpiar__error(MPIAR_ERR_INVALID_ARG, "mpiar_startall: %d requests at %p", n,
                        (void *)reqs);
  }
  for (int i = 0; i < n; i++) {
    int rc = mpiar_start(&reqs[i]);
    if (rc != MPIAR_SUCCESS) {
      char detail[512];
      snprintf(detail, sizeof detail, "%s", mpiar_last_error());
      return mpiar__error(rc, "request %d: %s", i, detail);
    }
  }
  return MPIAR_SUCCESS;
}

int mpiar_comm_init(MPI_Comm comm, const mpiar_options_t *opts) {
  mpiar__error_clear();
  mpiar_options_t o;
  int rc = read_options(opts, &o, "mpiar_comm_init");
  if (rc != MPIAR_SUCCESS) {
    return rc;
  }
  const mpiar__settings_t *set = NULL;
  rc = mpiar__settings_checked(&set, NULL);
  long timeout_ms = mpiar__deadline_ms(o.timeout_ms, set);
  if (rc != MPIAR_SUCCESS) {
    return mpiar__context_join_failed(comm, timeout_ms, rc);
  }
  mpiar__context_t *ctx = NULL;
  if ((rc = mpiar__context_enter(comm, timeout_ms, &ctx)) != MPIAR_SUCCESS) {
    return rc;
  }
  mpiar__context_leave(ctx);
  return MPIAR_SUCCESS;
}

int mpiar_select_comm(MPI_Comm comm, size_t count, mpiar_dtype_t dtype, const char **algorithm,
                      size_t *segment_bytes, const char **source) {
  mpiar__error_clear();
  size_t es = mpiar_dtype_size(dtype);
  if (algorithm == NULL || segment_bytes == NULL || es == 0 || count > SIZE_MAX / es / 2) {
    return mpiar__error(MPIAR_ERR_INVALID_ARG,
                        "mpiar_select_comm needs a valid datatype, a count that fits and two "
                        "results");
  }
  const mpiar__settings_t *set = NULL;
  int rc = mpiar__settings_checked(&set, NULL);
  if (rc != MPIAR_SUCCESS) {
    return mpiar__context_join_failed(comm, set->timeout_ms, rc);
  }
  mpiar__context_t *ctx = NULL;
  if ((rc = mpiar__context_enter(comm, set->timeout_ms, &ctx)) != MPIAR_SUCCESS) {
    return rc;
  }
  mpiar__choice_t ch;
  rc = mpiar__select(set, &ctx->selector, NULL, 0, count * es, dtype, ctx->eng.size,
                     ctx->has_topo ? &ctx->topo : NULL, set->reproducible, &ch);
  if (rc == MPIAR_SUCCESS) {
    *algorithm = ch.alg->name;
    *segment_bytes = ch.segment_bytes;
    if (source != NULL) {
      *source = mpiar__source_name(ch.source);
    }
  }
  mpiar__context_leave(ctx);
  return rc;
}
