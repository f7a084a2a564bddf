/*
 * mpiar-kernel-bench: bandwidth of the reduce kernels (f32, f64, bf16 and f16 SUM) for each ISA
 * level this CPU supports and each thread count, beside memcpy at the same size, measured in the
 * same run. Bytes count what is read plus written: 3 x the operand size for a reduction
 * (a, b read, dst written), 2 x for memcpy. Each figure is the median over repetitions.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(MPIAR_HAVE_OPENMP)
#include <omp.h>
#endif

#include "base/common.h"
#include "base/settings.h"
#include "reduce_kernels/kernels.h"

#define MAX_LIST 16

typedef struct {
  size_t sizes[MAX_LIST];
  int nsizes;
  int threads[MAX_LIST];
  int nthreads;
  int reps;
  double min_ms;
} options_t;

static void usage(FILE *f, const char *argv0) {
  fprintf(f,
          "usage: %s [--sizes=LIST] [--threads=LIST] [--reps=N] [--min-ms=MS] [--quick]\n"
          "  --sizes=16K,512K,256M  bytes per operand (K, M, G suffixes; default: L1, L2 and\n"
          "                         DRAM sized arrays 16K,512K,256M)\n"
          "  --threads=1,2          thread counts (default 1,2)\n"
          "  --reps=N               repetitions; the median is reported (default 7)\n"
          "  --min-ms=MS            minimum duration of one repetition (default 20)\n"
          "  --quick                16K,512K,8M, 3 repetitions of at least 5 ms\n"
          "  --help                 this text\n"
          "Prints a Markdown table: GB/s (read + written) of each kernel, memcpy's GB/s at the\n"
          "same size and thread count, their ratio, and the speed-up over the reference level.\n",
          argv0);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *x, const void *y) {
  double a = *(const double *)x, b = *(const double *)y;
  return (a > b) - (a < b);
}

/* What one timed call does: a kernel over the whole span split across threads, or memcpy. */
typedef struct {
  mpiar__kernel_fn fn; /* NULL: memcpy */
  char *d;
  const char *a, *b;
  size_t n, esize;
  int threads;
} work_t;

static void run_once(const work_t *w) {
  size_t bytes = w->n * w->esize;
#if defined(MPIAR_HAVE_OPENMP)
  if (w->threads > 1) {
    /* The same split as mpiar__reduce: 64-byte multiples per thread. */
    size_t per_line = 64 / w->esize;
    size_t chunk = (w->n + (size_t)w->threads - 1) / (size_t)w->threads;
    chunk = (chunk + per_line - 1) / per_line * per_line;
#pragma omp parallel num_threads(w->threads)
    {
      size_t start = (size_t)omp_get_thread_num() * chunk;
      if (start < w->n) {
        size_t len = (w->n - start < chunk) ? w->n - start : chunk;
        size_t off = start * w->esize;
        if (w->fn != NULL) {
          w->fn(w->d + off, w->a + off, w->b + off, len);
        } else {
          memcpy(w->d + off, w->a + off, len * w->esize);
        }
      }
    }
    return;
  }
#endif
  if (w->fn != NULL) {
    w->fn(w->d, w->a, w->b, w->n);
  } else {
    memcpy(w->d, w->a, bytes);
  }
}

/* Median seconds per call over reps repetitions, each repeating the call for >= min_ms. */
static double time_call(const work_t *w, int reps, double min_ms) {
  double t[64];
  run_once(w); /* warm caches and page tables */
  long iters = 1;
  for (;;) {
    double t0 = now_s();
    for (long i = 0; i < iters; i++) {
      run_once(w);
    }
    double dt = now_s() - t0;
    if (dt * 1e3 >= min_ms || iters > (1L << 30)) {
      break;
    }
    iters *= 2;
  }
  for (int r = 0; r < reps; r++) {
    double t0 = now_s();
    for (long i = 0; i < iters; i++) {
      run_once(w);
    }
    t[r] = (now_s() - t0) / (double)iters;
  }
  qsort(t, (size_t)reps, sizeof t[0], cmp_double);
  return t[reps / 2];
}

static int parse_sizes(const char *s, options_t *o) {
  char buf[256];
  snprintf(buf, sizeof buf, "%s", s);
  o->nsizes = 0;
  for (char *tok = strtok(buf, ","); tok != NULL; tok = strtok(NULL, ",")) {
    size_t v;
    if (o->nsizes == MAX_LIST || mpiar__parse_size(tok, &v) != 0 || v < 64) {
      return -1;
    }
    o->sizes[o->nsizes++] = v;
  }
  return o->nsizes > 0 ? 0 : -1;
}

static int parse_threads(const char *s, options_t *o) {
  char buf[256];
  snprintf(buf, sizeof buf, "%s", s);
  o->nthreads = 0;
  for (char *tok = strtok(buf, ","); tok != NULL; tok = strtok(NULL, ",")) {
    char *end = NULL;
    long v = strtol(tok, &end, 10);
    if (o->nthreads == MAX_LIST || *end != '\0' || v < 1 || v > 1024) {
      return -1;
    }
    o->threads[o->nthreads++] = (int)v;
  }
  return o->nthreads > 0 ? 0 : -1;
}

static int parse_args(int argc, char **argv, options_t *o) {
  parse_sizes("16K,512K,256M", o);
  parse_threads("1,2", o);
  o->reps = 7;
  o->min_ms = 20;
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i];
    char *end = NULL;
    if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
      usage(stdout, argv[0]);
      exit(0);
    } else if (strcmp(arg, "--quick") == 0) {
      parse_sizes("16K,512K,8M", o);
      o->reps = 3;
      o->min_ms = 5;
    } else if (strncmp(arg, "--sizes=", 8) == 0) {
      if (parse_sizes(arg + 8, o) != 0) {
        fprintf(stderr, "bad --sizes '%s' (sizes of at least 64 bytes, e.g. 16K,512K,256M)\n",
                arg + 8);
        return -1;
      }
    } else if (strncmp(arg, "--threads=", 10) == 0) {
      if (parse_threads(arg + 10, o) != 0) {
        fprintf(stderr, "bad --threads '%s' (e.g. 1,2)\n", arg + 10);
        return -1;
      }
    } else if (strncmp(arg, "--reps=", 7) == 0) {
      long v = strtol(arg + 7, &end, 10);
      if (*end != '\0' || end == arg + 7 || v < 1 || v > 64) {
        fprintf(stderr, "bad --reps '%s' (1..64)\n", arg + 7);
        return -1;
      }
      o->reps = (int)v;
    } else if (strncmp(arg, "--min-ms=", 9) == 0) {
      double v = strtod(arg + 9, &end);
      if (*end != '\0' || end == arg + 9 || !(v > 0 && v <= 60000)) {
        fprintf(stderr, "bad --min-ms '%s'\n", arg + 9);
        return -1;
      }
      o->min_ms = v;
    } else {
      fprintf(stderr, "unknown argument '%s'\n", arg);
      return -1;
    }
  }
  return 0;
}

static void fmt_size(size_t b, char *out, size_t n) {
  if (b >= (1u << 20) && b % (1u << 20) == 0) {
    snprintf(out, n, "%zu MiB", b >> 20);
  } else if (b >= 1024 && b % 1024 == 0) {
    snprintf(out, n, "%zu KiB", b >> 10);
  } else {
    snprintf(out, n, "%zu B", b);
  }
}

int main(int argc, char **argv) {
  options_t o;
  if (parse_args(argc, argv, &o) != 0) {
    usage(stderr, argv[0]);
    return 2;
  }
  static const mpiar_dtype_t dts[] = {MPIAR_FLOAT32, MPIAR_FLOAT64, MPIAR_BFLOAT16, MPIAR_FLOAT16};
  mpiar__kernel_table_t tables[MPIAR__ISA_COUNT];
  int have[MPIAR__ISA_COUNT];
  for (int l = 0; l < MPIAR__ISA_COUNT; l++) {
    have[l] = mpiar__kernel_table_fill((mpiar__isa_t)l, &tables[l]) == MPIAR_SUCCESS;
  }
  unsigned f = mpiar__cpu_features();
  printf("# mpiar-kernel-bench: CPU features avx2=%d avx512=%d avx512_bf16=%d avx512_fp16=%d; "
         "median of %d repetitions of >= %.0f ms\n\n",
         !!(f & MPIAR__FEAT_AVX2), !!(f & MPIAR__FEAT_AVX512), !!(f & MPIAR__FEAT_AVX512_BF16),
         !!(f & MPIAR__FEAT_AVX512_FP16), o.reps, o.min_ms);
  printf("| size/operand | kernel | level | threads | GB/s | memcpy GB/s | / memcpy | x reference "
         "|\n");
  printf("|---|---|---|---|---|---|---|---|\n");
  for (int s = 0; s < o.nsizes; s++) {
    size_t bytes = o.sizes[s];
    char *a = NULL, *b = NULL, *d = NULL;
    if (posix_memalign((void **)&a, 64, bytes) || posix_memalign((void **)&b, 64, bytes) ||
        posix_memalign((void **)&d, 64, bytes)) {
      fprintf(stderr, "cannot allocate 3 x %zu bytes\n", bytes);
      return 1;
    }
    /* Moderate finite values: the speed of special values is not what is measured here. */
    for (size_t i = 0; i < bytes; i++) {
      a[i] = (char)(0x3c + (i % 3));
      b[i] = (char)(0x3d - (i % 5));
    }
    memset(d, 0, bytes);
    char sz[32];
    fmt_size(bytes, sz, sizeof sz);
    for (int t = 0; t < o.nthreads; t++) {
      work_t mw = {NULL, d, a, b, bytes / 64, 64, o.threads[t]};
      double mgbs = 2.0 * (double)bytes / time_call(&mw, o.reps, o.min_ms) / 1e9;
      for (size_t k = 0; k < sizeof dts / sizeof dts[0]; k++) {
        size_t es = mpiar_dtype_size(dts[k]);
        double ref_gbs = 0;
        for (int l = 0; l < MPIAR__ISA_COUNT; l++) {
          if (!have[l]) {
            continue;
          }
          work_t w = {tables[l].fn[dts[k]][MPIAR_SUM], d, a, b, bytes / es, es, o.threads[t]};
          double gbs = 3.0 * (double)bytes / time_call(&w, o.reps, o.min_ms) / 1e9;
          if (l == MPIAR__ISA_REFERENCE) {
            ref_gbs = gbs;
          }
          printf("| %s | %s sum | %s | %d | %.1f | %.1f | %.2f | %.1f |\n", sz,
                 mpiar_dtype_name(dts[k]), mpiar__isa_name((mpiar__isa_t)l), o.threads[t], gbs,
                 mgbs, gbs / mgbs, gbs / ref_gbs);
          fflush(stdout);
        }
      }
    }
    free(a);
    free(b);
    free(d);
  }
  return 0;
}
