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
  out->algorithm = opts->algorithm;
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

/* The deadline in ms from the options (0 = environment, < 0 = none); 0 means none. */
static long deadline_ms(const call_t *c, const mpiar__settings_t *set) {
  if (c->opts.timeout_ms > 0) {
    return c->opts.timeout_ms;
  }
  return c->opts.timeout_ms < 0 ? 0 : set->timeout_ms;
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
  if (c->coll == MPIAR__COLL_ALLREDUCE) {
    int in_place = c->in == MPIAR_IN_PLACE || c->in == c->out;
    if (!in_place && c->count > 0) {
      if (c->in == NULL) {
        return mpiar__error(MPIAR_ERR_NULL_BUFFER, "%s: NULL send buffer with count %zu", c->fn,
                            c->count);
      }
      size_t bytes = c->count * es;
      uintptr_t s = (uintptr_t)c->in, r = (uintptr_t)c->out;
      if (s < r + bytes && r < s + bytes) {
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



/*
 * The registry index of an algorithm, for the argument check: allreduce and broadcast entries by
 * their position (the collective is another field), research variants (reproducible mode) after
 * the registry.
 */
static uint64_t algorithm_index(const mpiar__algorithm_t *alg) {
  if (alg >= mpiar__bcast_algorithms &&
      alg < mpiar__bcast_algorithms + mpiar__bcast_algorithm_count) {
    return (uint64_t)(alg - mpiar__bcast_algorithms);
  }
  /* Registry, variants and parameter instances: the value of k is part of the number. */
  return mpiar__algorithm_number(alg);
}

/* Select the algorithm and find (or build) the plan of call @p c on @p ctx. */
static int find_plan(const call_t *c, mpiar__context_t *ctx, const mpiar__settings_t *set,
                     int in_place, int reproducible, mpiar__plan_t **plan_out,
                     uint64_t *alg_index) {
  size_t es = mpiar_dtype_size(c->dtype);
  size_t bytes = c->count * es;
  const mpiar__algorithm_t *alg = NULL;
  mpiar__choice_t choice = {0};
  int have_choice = 0;
  size_t seg_bytes = 0;
  int rc;
  if (c->coll == MPIAR__COLL_BCAST) {
    rc = mpiar__select_bcast(c->opts.algorithm, bytes, es, ctx->eng.size, &alg);
  } else {
    int automatic = (c->opts.algorithm == NULL || strcmp(c->opts.algorithm, "auto") == 0) &&
                    c->opts.segment_bytes == 0 && set->algorithm[0] == '\0' &&
                    set->segment_bytes == 0;
    rc = MPIAR_SUCCESS;
    uint64_t h = ((uint64_t)bytes ^ ((uint64_t)c->dtype << 56) ^ ((uint64_t)reproducible << 63)) *
                 0x9e3779b97f4a7c15ull; /* Fibonacci hashing: the top bits pick the entry */
    struct mpiar__choice_memo *m = &ctx->choices[(h >> 32) & (MPIAR__CHOICE_MEMO - 1)];
    if (automatic && m->valid && m->bytes == bytes && m->dtype == c->dtype &&
        m->reproducible == reproducible) {
      choice = m->choice;
    } else {
      rc = mpiar__select(set, &ctx->selector, c->opts.algorithm, c->opts.segment_bytes, bytes,
                         c->dtype, ctx->eng.size, ctx->has_topo ? &ctx->topo : NULL,
                         automatic && reproducible, &choice);
      if (rc == MPIAR_SUCCESS && automatic) {
        m->valid = 1;
        m->bytes = bytes;
        m->dtype = c->dtype;
        m->reproducible = reproducible;
        m->choice = choice;
      }
    }
    alg = choice.alg;
    seg_bytes = choice.segment_bytes;
    have_choice = 1;
  }
  if (rc != MPIAR_SUCCESS) {
    return rc;
  }
  if (reproducible && c->coll == MPIAR__COLL_ALLREDUCE) {
    /* The canonical order whatever was selected: the algorithm or its reproducible replacement
     * (which keeps the segment size). */
    alg = mpiar__algorithm_reproducible(alg, ctx->eng.size, c->dtype);
  }
  mpiar__plan_key_t key = {
      .coll = c->coll,
      .count = c->count,
      .elem_size = es,
      .builder = alg,
      .segment_elems = (alg->flags & MPIAR__ALG_SEGMENTED)
                           ? mpiar__segment_elems(seg_bytes, c->count, es, ctx->eng.size)
                           : 0,
      .in_place = in_place,
      .root = c->coll == MPIAR__COLL_BCAST ? c->root : -1,
  };
  int built = 0;
  if ((rc = mpiar__plan_get(ctx, &key, alg->name, alg->build, plan_out, &built)) !=
      MPIAR_SUCCESS) {
    return rc;
  }
  if (built && set->debug) {
    report_choice(ctx, c->coll == MPIAR__COLL_BCAST ? "bcast" : "allreduce", alg->name, alg, bytes,
                  key.segment_elems, es, have_choice ? &choice : NULL);
  }
  *alg_index = algorithm_index(alg);
  return MPIAR_SUCCESS;
}

/*
 * Everything before the start: arguments, context (entered on success), selection, plan, a
 * request holding the buffers. On success the caller owns *out and is inside the context.
 */
static int prepare(call_t *c, int blocking, mpiar__context_t **ctx_out, mpiar__request_t **out,
                   unsigned *settings) {
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
  int in_place = 1;
  int reproducible = c->opts.reproducible >= 0 ? c->opts.reproducible : set->reproducible;
  if (c->coll == MPIAR__COLL_BCAST) {
    if (c->root < 0 || c->root >= ctx->eng.size) {
      rc =
          mpiar__error(MPIAR_ERR_INVALID_ARG, "%s: root %d is not a rank of a %d-rank communicator",
                       c->fn, c->root, ctx->eng.size);
      goto fail;
    }
  } else {
    in_place = c->in == MPIAR_IN_PLACE || c->in == c->out;
  }
  /* The plan: the last call's when this one is like it (the same inputs to the selection and to
   * the plan's key, no algorithm named in the options), else selected and looked up. */
  mpiar__plan_t *plan = ctx->last_call.plan;
  uint64_t alg_index = ctx->last_call.alg_index;
  if (plan == NULL || c->opts.algorithm != NULL || ctx->last_call.coll != c->coll ||
      ctx->last_call.count != c->count || ctx->last_call.dtype != c->dtype ||
      ctx->last_call.root != c->root || ctx->last_call.in_place != in_place ||
      ctx->last_call.reproducible != reproducible ||
      ctx->last_call.segment_bytes != c->opts.segment_bytes ||
      ctx->last_call.settings != set->generation) {
    if ((rc = find_plan(c, ctx, set, in_place, reproducible, &plan, &alg_index)) != MPIAR_SUCCESS) {
      goto fail;
    }
    if (c->opts.algorithm == NULL) {
      ctx->last_call.plan = plan;
      ctx->last_call.coll = c->coll;
      ctx->last_call.count = c->count;
      ctx->last_call.dtype = c->dtype;
      ctx->last_call.root = c->root;
      ctx->last_call.in_place = in_place;
      ctx->last_call.reproducible = reproducible;
      ctx->last_call.segment_bytes = c->opts.segment_bytes;
      ctx->last_call.settings = set->generation;
      ctx->last_call.alg_index = alg_index;
    }
  }
  mpiar__request_t *r = ctx->blocking;
  if (blocking && r != NULL && r->plan == plan) {
    /* The last blocking call's request, done and clean: it holds the plan's reference; it
     * takes the context's again. */
    ctx->blocking = NULL;
    r->state = MPIAR__REQ_INACTIVE;
    ctx->refs++;
  } else if ((rc = mpiar__request_new(ctx, plan, &r)) != MPIAR_SUCCESS) {
    goto fail;
  }
  r->dtype = c->dtype;
  /* AVG travels as a sum and is divided by the final reduction of each element. */
  r->kop = c->op == MPIAR_AVG ? MPIAR_SUM : c->op;
  r->average = c->coll == MPIAR__COLL_ALLREDUCE && c->op == MPIAR_AVG;
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
    r->signature[4] = c->coll == MPIAR__COLL_ALLREDUCE ? (uint64_t)c->op : 0;
    r->signature[5] = alg_index;
    r->signature[6] = (uint64_t)plan->key.segment_elems;
    r->signature[7] = c->coll == MPIAR__COLL_BCAST ? (uint64_t)c->root : UINT64_MAX;
  }
  *ctx_out = ctx;
  *out = r;
  *settings = set->generation;
  return MPIAR_SUCCESS;
fail:
  mpiar__context_leave(ctx);
  return rc;
}

int mpiar__internal_allreduce(mpiar__context_t *ctx, void *buf, size_t count, mpiar_dtype_t dtype,
                              mpiar_op_t op, long timeout_ms) {
  const mpiar__settings_t *set = NULL;
  mpiar__settings(&set);
  size_t es = mpiar_dtype_size(dtype);
  mpiar__settings_t automatic = *set;
  automatic.algorithm[0] = '\0';
  automatic.segment_bytes = 0;
  /* The library's own messages (context creation) use the built-in model: no tuning file is
   * agreed on yet, and every rank must choose alike. */
  mpiar__choice_t choice;
  int rc = mpiar__select(&automatic, NULL, NULL, 0, count * es, dtype, ctx->eng.size, NULL, 0,
                         &choice);
  if (rc != MPIAR_SUCCESS) {
    return rc;
  }
  const mpiar__algorithm_t *alg = choice.alg;
  mpiar__plan_key_t key = {.coll = MPIAR__COLL_ALLREDUCE,
                           .count = count,
                           .elem_size = es,
                           .builder = alg,
                           .segment_elems = 0,
                           .in_place = 1,
                           .root = -1};
  mpiar__plan_t *plan = NULL;
  if ((rc = mpiar__plan_get(ctx, &key, alg->name, alg->build, &plan, NULL)) != MPIAR_SUCCESS) {
    return rc;
  }
  mpiar__request_t *r = NULL;
  if ((rc = mpiar__request_new(ctx, plan, &r)) != MPIAR_SUCCESS) {
    return rc;
  }
  r->dtype = dtype;
  r->kop = op;
  r->in = r->out = buf;
  r->base[MPIAR__BUF_INPUT] = r->base[MPIAR__BUF_OUTPUT] = buf;
  r->base[MPIAR__BUF_SCRATCH] = r->scratch;
  r->timeout_ms = timeout_ms;
  ctx->refs++;
  if ((rc = mpiar__request_start(r)) != MPIAR_SUCCESS) {
    mpiar__request_release(r);
  } else {
    rc = mpiar__wait_one(r);
  }
  ctx->refs--;
  return rc;
}

/* A hash of an allreduce's buffers, count, datatype and operation (never 0). */
static uint64_t same_call_key(const call_t *c) {
  uint64_t h = (uint64_t)(uintptr_t)c->in * 0x9e3779b97f4a7c15ull;
  h ^= (uint64_t)(uintptr_t)c->out + 0x632be59bd9b4e019ull + (h << 6) + (h >> 2);
  h ^= (uint64_t)c->count + 0x85ebca77c2b2ae63ull + (h << 6) + (h >> 2);
  h ^= ((uint64_t)c->dtype << 8 | (uint64_t)c->op) + (h << 6) + (h >> 2);
  return h | 1;
}

/*
 * Run a prepared blocking request (the caller is inside @p ctx): start, wait, then keep the
 * request for the next like call if it succeeded with the memo's plan, else release it.
 * @p no_options: the call had no options (the same call again may then skip the checks).
 */
static int run_prepared(mpiar__context_t *ctx, mpiar__request_t *r, const call_t *c, int no_options,
                        unsigned settings) {
  ctx->refs++;
  int rc = mpiar__request_start(r);
  if (rc == MPIAR_SUCCESS) {
    rc = mpiar__wait_result(r);
  }
  if (rc == MPIAR_SUCCESS && r->plan == ctx->last_call.plan && !ctx->eng.broken) {
    mpiar__context_drop_blocking(ctx);
    ctx->blocking = r;
    ctx->refs--; /* a kept request does not hold its context */
    __atomic_store_n(&ctx->same_call.key,
                     no_options && c->coll == MPIAR__COLL_ALLREDUCE ? same_call_key(c) : 0,
                     __ATOMIC_RELAXED);
    ctx->same_call.in = c->in;
    ctx->same_call.out = c->out;
    ctx->same_call.count = c->count;
    ctx->same_call.dtype = c->dtype;
    ctx->same_call.op = c->op;
    ctx->same_call.settings = settings;
  } else {
    mpiar__request_release(r);
  }
  mpiar__context_leave(ctx);
  mpiar__context_unref(ctx);
  return rc;
}

/*
 * Blocking: prepare, start, wait. A successful call's request is kept for the next like call
 * (the plan the memo holds), which then allocates and resets nothing.
 */
static int run_blocking(call_t *c, int no_options) {
  mpiar__context_t *ctx = NULL;
  mpiar__request_t *r = NULL;
  unsigned settings = 0;
  int rc = prepare(c, 1, &ctx, &r, &settings);
  if (rc != MPIAR_SUCCESS) {
    return rc;
  }
  return run_prepared(ctx, r, c, no_options, settings);
}

/*
 * The same allreduce as the last blocking call on @p comm (no options; the same buffers, count,
 * datatype and operation; the same settings): its arguments passed every check then, and its
 * request is kept as it ran. *handled is 0 when this is not such a call (nothing was done).
 */
static int run_same_call(const call_t *c, int *handled) {
  *handled = 0;
  mpiar__context_t *ctx = mpiar__context_cached(c->comm);
  const mpiar__settings_t *set = NULL;
  /* The key is read before entering (other calls' fields are only read inside). */
  if (ctx == NULL || __atomic_load_n(&ctx->same_call.key, __ATOMIC_RELAXED) != same_call_key(c) ||
      mpiar__settings_checked(&set, NULL) != MPIAR_SUCCESS) {
    return MPIAR_SUCCESS;
  }
  if (mpiar__context_enter_ctx(ctx) != MPIAR_SUCCESS) {
    return MPIAR_SUCCESS; /* the full path reports it */
  }
  mpiar__request_t *r = ctx->blocking;
  if (ctx->eng.broken || r == NULL || ctx->same_call.key == 0 || ctx->same_call.in != c->in ||
      ctx->same_call.out != c->out || ctx->same_call.count != c->count ||
      ctx->same_call.dtype != c->dtype || ctx->same_call.op != c->op ||
      ctx->same_call.settings != set->generation || r->plan != ctx->last_call.plan) {
    mpiar__context_leave(ctx);
    return MPIAR_SUCCESS;
  }
  *handled = 1;
  ctx->blocking = NULL;
  r->state = MPIAR__REQ_INACTIVE;
  ctx->refs++; /* the request holds its context again */
  return run_prepared(ctx, r, c, 1, set->generation);
}

/* Nonblocking (start now) or persistent (start later). */
static int run_request(call_t *c, int persistent, mpiar_request_t *req) {
  if (req == NULL) {
    return mpiar__error(MPIAR_ERR_INVALID_ARG, "%s: the request pointer is NULL", c->fn);
  }
  *req = MPIAR_REQUEST_NULL;
  mpiar__context_t *ctx = NULL;
  mpiar__request_t *r = NULL;
  unsigned settings = 0;
  int rc = prepare(c, 0, &ctx, &r, &settings);
  if (rc != MPIAR_SUCCESS) {
    return rc;
  }
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

#define ALLREDUCE_CALL(name, send, recv, n, t, o, cm)                                          \
  {                                                                                            \
    .coll = MPIAR__COLL_ALLREDUCE, .fn = name, .in = (send), .out = (recv), .count = (n),       \
    .dtype = (t), .op = (o), .root = -1, .comm = (cm)                                          \
  }
#define BCAST_CALL(name, b, n, t, rt, cm)                                                      \
  {                                                                                            \
    .coll = MPIAR__COLL_BCAST, .fn = name, .in = (b), .out = (b), .count = (n), .dtype = (t),  \
    .op = MPIAR_SUM, .root = (rt), .comm = (cm)                                                \
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
  long timeout_ms = o.timeout_ms > 0 ? o.timeout_ms : (o.timeout_ms < 0 ? 0 : set->timeout_ms);
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
