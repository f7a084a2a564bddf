/*
 * The timing rules the measuring tools share (mpiar-bench, mpiar-tune): how many repetitions a
 * size gets, how many untimed ones come first, the sizes of a sweep, and the median.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/tool.h"

int tool_iters_for(size_t bytes, size_t iter_bytes, int lo, int hi) {
  size_t n = iter_bytes / (bytes ? bytes : 1);
  if (n < (size_t)lo) {
    n = (size_t)lo;
  }
  return n > (size_t)hi ? hi : (int)n;
}

int tool_warmup_for(int iters) {
  int w = iters / 10;
  return w < 1 ? 1 : (w > 20 ? 20 : w);
}

int tool_size_sweep(size_t min_bytes, size_t max_bytes, size_t factor, size_t esize, size_t *out,
                    int max_sizes) {
  int n = 0;
  for (size_t s = min_bytes; s <= max_bytes && n < max_sizes;) {
    size_t count = s / esize ? s / esize : 1;
    size_t bytes = count * esize;
    if (n == 0 || out[n - 1] != bytes) {
      out[n++] = bytes;
    }
    if (s > max_bytes / factor) {
      break;
    }
    s *= factor;
  }
  return n;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a;
  double y = *(const double *)b;
  return (x > y) - (x < y);
}

double tool_median(double *v, int n) {
  if (n <= 0) {
    return __builtin_nan("");
  }
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return (n % 2) ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

uint64_t tool_mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

void tool_shuffle(int *order, int n, uint64_t seed) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 0x2545F4914F6CDD1Dull;
  for (int i = 0; i < n; i++) {
    order[i] = i;
  }
  for (int i = n - 1; i > 0; i--) {
    /* splitmix64 */
    const uint64_t z = tool_mix64(x);
    x += 0x9E3779B97F4A7C15ull;
    const int j = (int)(z % (uint64_t)(i + 1));
    const int t = order[i];
    order[i] = order[j];
    order[j] = t;
  }
}
