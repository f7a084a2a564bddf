/*
 * The canonical order of reproducible mode, evaluated serially: mpiar_reduce_canonical().
 *
 * Definition (the one every reproducible schedule computes, for every element, on every rank):
 * for p ranks with inputs x_0 .. x_{p-1}, let p' be the largest power of two <= p and
 * rem = p - p'. The p' "leaves" are
 *     y_i = x_{2i} op x_{2i+1}      for 0 <= i < rem      (the fold of the first 2 rem ranks)
 *     y_i = x_{i+rem}               for rem <= i < p'
 * and the result is the balanced pairwise tree over them, lower half first:
 *     Y(lo, hi) = y_lo                            when hi - lo = 1
 *     Y(lo, hi) = Y(lo, mid) op Y(mid, hi)        mid = (lo + hi) / 2
 *     result    = Y(0, p')
 * Examples: p = 3: (x0 x1) x2; p = 4: (x0 x1)(x2 x3); p = 5: ((x0 x1) x2)(x3 x4);
 * p = 6: ((x0 x1)(x2 x3))(x4 x5); p = 8: ((x0 x1)(x2 x3))((x4 x5)(x6 x7)).
 * Each "a op b" is one call of the reduce kernel (mpiar_reduce_local(dst, a, b, ...)) with a
 * first. AVG is the canonical SUM followed by one division by p in the element type: f32
 * s / (float)p, f64 s / (double)p, f16 and bf16 converted to f32, divided by (float)p and rounded
 * back to nearest even (a NaN keeps its payload, quieted), which is what the executors do at the
 * reduction that completes an element. With p = 1 the result is x_0, unchanged, for every op.
 *
 * Why this tree: it is the tree recursive doubling computes natively (its classic fold of the
 * first 2 rem ranks, then exchanges at distance 1, 2, 4, ... between partial results, lower rank
 * first), so the latency-optimal algorithm needs no change; Rabenseifner's half-vector pre-step
 * computes it too when its halving runs at distance 1 first; and a direct reduce-scatter, in which
 * every rank receives all pieces of its own block, can evaluate any tree at the receiver, which
 * keeps the 2 (p-1)/p n bytes per rank of a bandwidth-optimal allreduce for every p. Its depth is
 * ceil(log2 p), so the rounding error grows with log p, not p, and every internal node combines
 * two subtrees whose sizes differ by at most a factor of two.
 *
 * The evaluation here walks the leaves left to right with a stack of partial results (a binary
 * counter: two partials of the same level combine, lower first), one chunk of elements at a
 * time, so it needs log2(p) + 3 chunk-sized temporaries whatever p and count are.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "reduce_kernels/kernels.h"

/* Elements per chunk: small enough for the temporaries to stay in cache. */
#define CHUNK ((size_t)4096)

typedef struct partial {
  const unsigned char *ptr;
  int tmp;   /* temporary holding it, or -1 when it is an input */
  int level; /* height in the balanced tree over the leaves y_i */
} partial_t;

typedef struct pool {
  unsigned char *mem;
  size_t stride; /* bytes per temporary */
  uint64_t used; /* bit t: temporary t holds a live partial */
} pool_t;

static int take(pool_t *pl) {
  int t = 0;
  while (pl->used >> t & 1) {
    t++;
  }
  pl->used |= (uint64_t)1 << t;
  return t;
}

static void give(pool_t *pl, int t) {
  if (t >= 0) {
    pl->used &= ~((uint64_t)1 << t);
  }
}

/* One chunk [off, off + len): the leaves in order, combining equal levels as they appear. */
static void reduce_chunk(unsigned char *dst, const void *const inputs[], int nranks, size_t off,
                         size_t len, mpiar_dtype_t dtype, mpiar_op_t op, pool_t *pl) {
  const size_t es = mpiar_dtype_size(dtype);
  const int pof2 = 1 << (31 - __builtin_clz((unsigned)nranks)), rem = nranks - pof2;
  partial_t st[34];
  int sp = 0;
  for (int i = 0; i < pof2; i++) {
    partial_t y = {NULL, -1, 0};
    if (i < rem) {
      y.tmp = take(pl);
      y.ptr = pl->mem + (size_t)y.tmp * pl->stride;
      mpiar__reduce((void *)y.ptr, (const unsigned char *)inputs[2 * i] + off * es,
                    (const unsigned char *)inputs[2 * i + 1] + off * es, len, dtype, op);
    } else {
      y.ptr = (const unsigned char *)inputs[i + rem] + off * es;
    }
    st[sp++] = y;
    while (sp >= 2 && st[sp - 1].level == st[sp - 2].level) {
      partial_t *a = &st[sp - 2], *b = &st[sp - 1];
      const int t = a->tmp >= 0 ? a->tmp : b->tmp >= 0 ? b->tmp : take(pl);
      unsigned char *out = pl->mem + (size_t)t * pl->stride;
      mpiar__reduce(out, a->ptr, b->ptr, len, dtype, op);
      if (a->tmp != t) {
        give(pl, a->tmp);
      }
      if (b->tmp != t) {
        give(pl, b->tmp);
      }
      a->ptr = out;
      a->tmp = t;
      a->level++;
      sp--;
    }
  }
  /* p >= 2, so the root is a temporary; dst may be one of the inputs, read above. */
  memcpy(dst + off * es, st[0].ptr, len * es);
  give(pl, st[0].tmp);
}

int mpiar_reduce_canonical(void *dst, const void *const inputs[], int nranks, size_t count,
                           mpiar_dtype_t dtype, mpiar_op_t op) {
  mpiar__error_clear();
  int rc = mpiar__check_reduction("mpiar_reduce_canonical", dtype, op, count);
  if (rc != MPIAR_SUCCESS) {
    return rc;
  }
  if (nranks < 1) {
    return mpiar__error(MPIAR_ERR_INVALID_ARG, "mpiar_reduce_canonical over %d ranks", nranks);
  }
  if (count > 0) {
    if (inputs == NULL || dst == NULL) {
      return mpiar__error(MPIAR_ERR_NULL_BUFFER,
                          "mpiar_reduce_canonical of %zu elements with a "
                          "null %s",
                          count, dst == NULL ? "dst" : "inputs array");
    }
    for (int r = 0; r < nranks; r++) {
      if (inputs[r] == NULL) {
        return mpiar__error(MPIAR_ERR_NULL_BUFFER,
                            "mpiar_reduce_canonical of %zu elements: input %d is null", count, r);
      }
    }
  }
  rc = mpiar__kernels_init();
  if (rc != MPIAR_SUCCESS || count == 0) {
    return rc;
  }
  const size_t es = mpiar_dtype_size(dtype);
  if (nranks == 1) {
    if (dst != inputs[0]) {
      memmove(dst, inputs[0], count * es);
    }
    return MPIAR_SUCCESS;
  }
  /* The stack holds at most log2(p') + 1 partials, plus the fold being built and the result. */
  const int ntmp = (31 - __builtin_clz((unsigned)nranks)) + 3;
  pool_t pl = {NULL, CHUNK * es, 0};
  pl.mem = malloc((size_t)ntmp * pl.stride);
  if (pl.mem == NULL) {
    return mpiar__error(MPIAR_ERR_NOMEM, "mpiar_reduce_canonical: %d temporaries of %zu bytes",
                        ntmp, pl.stride);
  }
  const mpiar_op_t kop = op == MPIAR_AVG ? MPIAR_SUM : op;
  for (size_t off = 0; off < count; off += CHUNK) {
    const size_t len = count - off < CHUNK ? count - off : CHUNK;
    reduce_chunk(dst, inputs, nranks, off, len, dtype, kop, &pl);
  }
  free(pl.mem);
  if (op == MPIAR_AVG) {
    mpiar__divide(dst, dst, count, dtype, (double)nranks);
  }
  return MPIAR_SUCCESS;
}
