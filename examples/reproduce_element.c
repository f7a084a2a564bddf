/*
 * Reproducible mode: recompute elements of an allreduce result on one process.
 *
 * With MPIAR_REPRODUCIBLE=1 every element of an allreduce result is the canonical combination of
 * the ranks' values, whatever the algorithm, message size, segment size or fusion: with p' the
 * largest power of two <= p and rem = p - p', the leaves are y_i = x_{2i} + x_{2i+1} for i < rem
 * and y_i = x_{i+rem} otherwise, and the result is the balanced pairwise tree over y_0 .. y_{p'-1},
 * lower half first. Given the ranks' inputs (saved gradients, say), the result can be recomputed
 * anywhere, bit for bit:
 *   - a whole vector with mpiar_reduce_canonical();
 *   - one element by hand, with one mpiar_reduce_local() call per "+" of the tree, as below.
 * This program builds p ranks' vectors, recomputes them both ways and checks that the bits agree
 * (for float32 sum and bfloat16 average, where the sum is divided once by p at the end).
 *
 * Usage: mpiar_reproduce_element [RANKS [INDEX]]   (default 5 ranks, element 3)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpiar.h>

enum { N = 1000 };

/* The tree over leaves [lo, hi) for element `i` of vectors x[0..p-1] (pof2 = p'). */
static int by_hand(const float *const *x, int p, int pof2, int lo, int hi, size_t i, float *out) {
  const int rem = p - pof2;
  if (hi - lo == 1) {
    if (lo < rem) { /* the fold leaf: x_{2lo} + x_{2lo+1} */
      return mpiar_reduce_local(out, &x[2 * lo][i], &x[2 * lo + 1][i], 1, MPIAR_FLOAT32, MPIAR_SUM);
    }
    *out = x[lo + rem][i];
    return MPIAR_SUCCESS;
  }
  const int mid = lo + (hi - lo) / 2;
  float a, b;
  int rc = by_hand(x, p, pof2, lo, mid, i, &a);
  if (rc == MPIAR_SUCCESS) {
    rc = by_hand(x, p, pof2, mid, hi, i, &b);
  }
  /* The lower half first: mpiar_reduce_local(dst, a, b) computes a + b with a as written. */
  return rc == MPIAR_SUCCESS ? mpiar_reduce_local(out, &a, &b, 1, MPIAR_FLOAT32, MPIAR_SUM) : rc;
}

/* The same tree as text, e.g. (((x0 + x1) + x2) + (x3 + x4)) for 5 ranks. */
static void print_tree(int p, int pof2, int lo, int hi) {
  const int rem = p - pof2;
  if (hi - lo == 1) {
    if (lo < rem) {
      printf("(x%d + x%d)", 2 * lo, 2 * lo + 1);
    } else {
      printf("x%d", lo + rem);
    }
    return;
  }
  printf("(");
  print_tree(p, pof2, lo, lo + (hi - lo) / 2);
  printf(" + ");
  print_tree(p, pof2, lo + (hi - lo) / 2, hi);
  printf(")");
}

int main(int argc, char **argv) {
  const int p = argc > 1 ? atoi(argv[1]) : 5;
  const size_t idx = argc > 2 ? (size_t)atol(argv[2]) : 3;
  if (p < 1 || p > 4096 || idx >= N) {
    fprintf(stderr, "usage: %s [RANKS (1..4096) [INDEX (0..%d)]]\n", argv[0], N - 1);
    return 2;
  }
  /* Each rank's "gradient": values of very different magnitudes, so that order shows. */
  float **x = malloc((size_t)p * sizeof *x);
  uint16_t **h = malloc((size_t)p * sizeof *h);
  float *sum = malloc(N * sizeof *sum);
  uint16_t *avg = malloc(N * sizeof *avg);
  if (!x || !h || !sum || !avg) {
    return 1;
  }
  uint32_t seed = 12345;
  for (int r = 0; r < p; r++) {
    x[r] = malloc(N * sizeof **x);
    h[r] = malloc(N * sizeof **h);
    if (!x[r] || !h[r]) {
      return 1;
    }
    for (size_t i = 0; i < N; i++) {
      seed = seed * 1664525u + 1013904223u;
      const float v = (float)((int)(seed >> 8) - (1 << 23)) * 0x1p-23f * (float)(1u << (seed % 24));
      x[r][i] = v;
      uint32_t bits;
      memcpy(&bits, &v, 4);
      h[r][i] = (uint16_t)(bits >> 16); /* a bfloat16 (truncated; any bits will do) */
    }
  }

  /* Whole vectors: what a reproducible allreduce returns on every rank. */
  int rc = mpiar_reduce_canonical(sum, (const void *const *)x, p, N, MPIAR_FLOAT32, MPIAR_SUM);
  if (rc == MPIAR_SUCCESS) {
    rc = mpiar_reduce_canonical(avg, (const void *const *)h, p, N, MPIAR_BFLOAT16, MPIAR_AVG);
  }
  if (rc != MPIAR_SUCCESS) {
    fprintf(stderr, "mpiar_reduce_canonical: %s: %s\n", mpiar_strerror(rc), mpiar_last_error());
    return 1;
  }

  /* One element by hand, in the documented order. */
  int pof2 = 1;
  while (pof2 * 2 <= p) {
    pof2 *= 2;
  }
  float mine;
  rc = by_hand((const float *const *)x, p, pof2, 0, pof2, idx, &mine);
  if (rc != MPIAR_SUCCESS) {
    fprintf(stderr, "mpiar_reduce_local: %s: %s\n", mpiar_strerror(rc), mpiar_last_error());
    return 1;
  }
  if (p <= 16) {
    printf("element %zu over %d ranks = ", idx, p);
    print_tree(p, pof2, 0, pof2);
    printf("\n");
  }
  printf("float32 sum: by hand %.9g, mpiar_reduce_canonical %.9g: %s\n", (double)mine,
         (double)sum[idx], memcmp(&mine, &sum[idx], 4) == 0 ? "same bits" : "DIFFERENT");
  int ok = memcmp(&mine, &sum[idx], 4) == 0;

  /* Average: the same tree summing bfloat16 values, then one division by p (in f32, rounded). */
  uint16_t part[1];
  uint16_t *tmp = malloc((size_t)p * sizeof *tmp);
  const void **col = malloc((size_t)p * sizeof *col);
  if (!tmp || !col) {
    return 1;
  }
  for (int r = 0; r < p; r++) {
    tmp[r] = h[r][idx];
    col[r] = &tmp[r];
  }
  /* The element's column alone through the same call: the result does not depend on the rest. */
  rc = mpiar_reduce_canonical(part, col, p, 1, MPIAR_BFLOAT16, MPIAR_AVG);
  printf("bfloat16 avg: element alone 0x%04x, within the vector 0x%04x: %s\n", part[0], avg[idx],
         rc == MPIAR_SUCCESS && part[0] == avg[idx] ? "same bits" : "DIFFERENT");
  ok = ok && rc == MPIAR_SUCCESS && part[0] == avg[idx];

  for (int r = 0; r < p; r++) {
    free(x[r]);
    free(h[r]);
  }
  free(x);
  free(h);
  free(sum);
  free(avg);
  free(tmp);
  free(col);
  return ok ? 0 : 1;
}
