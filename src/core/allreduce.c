/* The public collective calls: argument checks, context, selection, plan, execution. */
#include <stdlib.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/context.h"
#include "reduce_kernels/kernels.h"

static int debug_enabled(void) {
  static int value = -1;
  if (value < 0) {
    const char *v = getenv("MPIAR_DEBUG");
    value = (v != NULL && strcmp(v, "0") != 0 && *v != '\0') ? 1 : 0;
  }
  return value;
}

/* Report a new choice once per communicator (rank 0 only) under MPIAR_DEBUG=1. */
static void report_choice(mpiar__context_t *ctx, const char *coll, const char *name,
                          const void *builder, size_t bytes, size_t segment_elems,
                          size_t elem_size) {
  if (!debug_enabled() || ctx->rank != 0) {
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
  fprintf(stderr, "mpiar: %s of %zu bytes on %d ranks: %s, segment %zu bytes\n", coll, bytes,
          ctx->size, name, segment_elems * elem_size);
}

/*
 * Checks shared by every collective before it touches the communicator: MPI's state, the
 * datatype, the count, the buffer; then the kernel layer and the deadline (both can fail on a
 * malformed environment variable).
 */
static int check_common(const void *buf, size_t count, mpiar_dtype_t dtype,
                        const mpiar_options_t *opts, size_t *bytes, long *timeout_ms) {
  int rc = mpiar__check_mpi_state();
  if (rc != MPIAR_SUCCESS) {
    return rc;
  }
  size_t es = mpiar_dtype_size(dtype);
  if (es == 0) {
    return mpiar__error(MPIAR_ERR_INVALID_ARG, "invalid datatype %d", (int)dtype);
  }
  if (count > SIZE_MAX / es / 2) {
    return mpiar__error(MPIAR_ERR_INVALID_ARG, "count %zu is too large", count);
  }
  if (count > 0 && buf == NULL) {
    return mpiar__error(MPIAR_ERR_NULL_BUFFER, "NULL buffer with count %zu", count);
  }
  *bytes = count * es;
  rc = mpiar__kernels_init();
  if (rc != MPIAR_SUCCESS) {
    return rc;
  }
  return mpiar__timeout_ms(opts->timeout_ms, timeout_ms);
}

/* Find or build the plan of @p key, report a new choice under MPIAR_DEBUG, and run it. */
static int run_plan(mpiar__context_t *ctx, const mpiar__plan_key_t *key,
                    const mpiar__algorithm_t *alg, const char *coll, const void *in, void *out,
                    mpiar_dtype_t dtype, mpiar_op_t op, long timeout_ms) {
  mpiar__plan_t *plan = NULL;
  size_t built = mpiar__plans_built;
  int rc = mpiar__plan_get(ctx, key, alg->name, alg->build, &plan);
  if (rc != MPIAR_SUCCESS) {
    return rc;
  }
  if (mpiar__plans_built != built) {
    report_choice(ctx, coll, alg->name, alg, key->count * key->elem_size, key->segment_elems,
                  key->elem_size);
  }
  return mpiar__execute(ctx, plan, in, out, dtype, op, timeout_ms);
}

static int context_ready(MPI_Comm comm, mpiar__context_t **ctx) {
  int rc = mpiar__context_get(comm, ctx);
  if (rc == MPIAR_SUCCESS && (*ctx)->broken) {
    rc = mpiar__error(MPIAR_ERR_COMM_BROKEN,
                      "an earlier call failed on this communicator (%s); free it and use a "
                      "new one",
                      (*ctx)->broken_reason);
  }
  return rc;
}

int mpiar_allreduce_ex(const void *sendbuf, void *recvbuf, size_t count, mpiar_dtype_t dtype,
                       mpiar_op_t op, MPI_Comm comm, const mpiar_options_t *opts) {
  static const mpiar_options_t defaults = MPIAR_OPTIONS_INIT;
  mpiar__error_clear();
  opts = opts != NULL ? opts : &defaults;
  size_t bytes = 0;
  long timeout_ms = 0;
  int rc = check_common(recvbuf, count, dtype, opts, &bytes, &timeout_ms);
  if (rc != MPIAR_SUCCESS) {
    return rc;
  }
  if ((unsigned)op >= MPIAR__OP_COUNT) {
    return mpiar__error(MPIAR_ERR_INVALID_ARG, "invalid operation %d", (int)op);
  }
  if (!mpiar_op_supported(dtype, op)) {
    return mpiar__error(MPIAR_ERR_BAD_DTYPE_OP, "operation %s is not defined on %s",
                        mpiar_op_name(op), mpiar_dtype_name(dtype));
  }
  int in_place = sendbuf == MPIAR_IN_PLACE || sendbuf == recvbuf;
  if (!in_place && count > 0) {
    if (sendbuf == NULL) {
      return mpiar__error(MPIAR_ERR_NULL_BUFFER, "NULL send buffer with count %zu", count);
    }
    uintptr_t s = (uintptr_t)sendbuf, r = (uintptr_t)recvbuf;
    if (s < r + bytes && r < s + bytes) {
      return mpiar__error(MPIAR_ERR_OVERLAP,
                          "send buffer %p and receive buffer %p overlap partially over %zu "
                          "bytes",
                          sendbuf, (void *)recvbuf, bytes);
    }
  }
  mpiar__context_t *ctx = NULL;
  if ((rc = context_ready(comm, &ctx)) != MPIAR_SUCCESS) {
    return rc;
  }
  const mpiar__algorithm_t *alg = NULL;
  size_t seg_bytes = 0;
  size_t es = mpiar_dtype_size(dtype);
  int automatic =
      (opts->algorithm == NULL || strcmp(opts->algorithm, "auto") == 0) && opts->segment_bytes == 0;
  if (automatic && ctx->last_choice.valid && ctx->last_choice.bytes == bytes &&
      ctx->last_choice.elem_size == es) {
    alg = ctx->last_choice.alg;
    seg_bytes = ctx->last_choice.segment_bytes;
  } else {
    rc =
        mpiar__select(opts->algorithm, opts->segment_bytes, bytes, es, ctx->size, &alg, &seg_bytes);
    if (rc != MPIAR_SUCCESS) {
      return rc;
    }
    if (automatic) {
      ctx->last_choice.valid = 1;
      ctx->last_choice.bytes = bytes;
      ctx->last_choice.elem_size = es;
      ctx->last_choice.alg = alg;
      ctx->last_choice.segment_bytes = seg_bytes;
    }
  }
  if (count == 0) {
    return MPIAR_SUCCESS;
  }
  mpiar__plan_key_t key = {
      .coll = MPIAR__COLL_ALLREDUCE,
      .count = count,
      .elem_size = es,
      .builder = alg,
      .segment_elems = (alg->flags & MPIAR__ALG_SEGMENTED) ? (seg_bytes + es - 1) / es : 0,
      .in_place = in_place,
      .root = -1,
  };
  /* MPIAR_AVG is divided inside the schedule, by each element's final reduction. */
  return run_plan(ctx, &key, alg, "allreduce", in_place ? recvbuf : sendbuf, recvbuf, dtype, op,
                  timeout_ms);
}

int mpiar_allreduce(const void *sendbuf, void *recvbuf, size_t count, mpiar_dtype_t dtype,
                    mpiar_op_t op, MPI_Comm comm) {
  return mpiar_allreduce_ex(sendbuf, recvbuf, count, dtype, op, comm, NULL);
}

int mpiar_bcast_ex(void *buf, size_t count, mpiar_dtype_t dtype, int root, MPI_Comm comm,
                   const mpiar_options_t *opts) {
  static const mpiar_options_t defaults = MPIAR_OPTIONS_INIT;
  mpiar__error_clear();
  opts = opts != NULL ? opts : &defaults;
  size_t bytes = 0;
  long timeout_ms = 0;
  int rc = check_common(buf, count, dtype, opts, &bytes, &timeout_ms);
  if (rc != MPIAR_SUCCESS) {
    return rc;
  }
  mpiar__context_t *ctx = NULL;
  if ((rc = context_ready(comm, &ctx)) != MPIAR_SUCCESS) {
    return rc;
  }
  if (root < 0 || root >= ctx->size) {
    return mpiar__error(MPIAR_ERR_INVALID_ARG, "root %d is not a rank of a %d-rank communicator",
                        root, ctx->size);
  }
  const mpiar__algorithm_t *alg = NULL;
  size_t es = mpiar_dtype_size(dtype);
  if ((rc = mpiar__select_bcast(opts->algorithm, bytes, es, ctx->size, &alg)) != MPIAR_SUCCESS) {
    return rc;
  }
  if (count == 0 || ctx->size == 1) {
    return MPIAR_SUCCESS;
  }
  mpiar__plan_key_t key = {
      .coll = MPIAR__COLL_BCAST,
      .count = count,
      .elem_size = es,
      .builder = alg,
      .segment_elems = 0,
      .in_place = 1,
      .root = root,
  };
  /* Broadcast schedules copy and move bytes only: the datatype and operation are not used. */
  return run_plan(ctx, &key, alg, "bcast", buf, buf, dtype, MPIAR_SUM, timeout_ms);
}

int mpiar_bcast(void *buf, size_t count, mpiar_dtype_t dtype, int root, MPI_Comm comm) {
  return mpiar_bcast_ex(buf, count, dtype, root, comm, NULL);
}
