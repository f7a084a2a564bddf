/*
 * mpiar-kernel-bench: bandwidth of the reduce kernels (f32, f64, bf16 and f16 SUM) for each ISA
 * level this CPU supports and each thread count, beside memcpy at the same size, measured in the
 * same run. Bytes count what is read plus written: 3 x the operand size for a reduction
 * (a, b read, dst written), 2 x for memcpy. Each figure is the median over repetitions. The
 * result each kernel leaves after its timed calls is compared with the reference kernel's, bit
 * for bit (every level and thread count must give the same bits); a difference is exit code 1.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(MPIAR_HAVE_OPENMP)
#include <omp.h>
#endif

#include "common/tool.h"
#include "reduce_kernels/kernels.h"

#define MAX_LIST 16

typedef struct {
  size_t sizes[MAX_LIST];
  int nsizes;
  long threads[MAX_LIST];
  int nthreads;
  long reps;
  double min_ms;
  int quick;
} options_t;

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

/* Parse the command line. @return -1 to run, else the exit code. */
static int parse_args(int argc, char **argv, options_t *o) {
  memset(o, 0, sizeof *o);
  int sizes_given = 0, reps_given = 0, min_ms_given = 0;
  const tool_arg_t args[] = {
      {.long_name = "sizes",
       .kind = TOOL_ARG_SIZE_LIST,
       .dest = o->sizes,
       .nitems = &o->nsizes,
       .max_items = MAX_LIST,
       .lo = 64,
       .hi = TOOL_SIZE_MAX,
       .given = &sizes_given,
       .metavar = "LIST",
       .help = "bytes per operand, 64 B or more (K, M, G suffixes; default: L1,\n"
               "L2 and DRAM sized arrays 16K,512K,256M)"},
      {.long_name = "threads",
       .kind = TOOL_ARG_INT_LIST,
       .dest = o->threads,
       .nitems = &o->nthreads,
       .max_items = MAX_LIST,
       .lo = 1,
       .hi = 1024,
       .metavar = "LIST",
       .help = "thread counts (default 1,2)"},
      {.long_name = "reps",
       .kind = TOOL_ARG_INT,
       .dest = &o->reps,
       .lo = 1,
       .hi = 64,
       .given = &reps_given,
       .metavar = "N",
       .help = "repetitions; the median is reported (default 7)"},
      {.long_name = "min-ms",
       .kind = TOOL_ARG_DOUBLE,
       .dest = &o->min_ms,
       .dlo = 0,
       .dlo_open = 1,
       .dhi = 60000,
       .given = &min_ms_given,
       .metavar = "MS",
       .help = "minimum duration of one repetition (default 20)"},
      {.long_name = "quick",
       .kind = TOOL_ARG_FLAG,
       .dest = &o->quick,
       .help = "16K,512K,8M, 3 repetitions of at least 5 ms (options given\n"
               "explicitly take precedence)"},
  };
  const tool_spec_t spec = {
      .prog = "mpiar-kernel-bench",
      .usage = "mpiar-kernel-bench [options]",
      .about = "Bandwidth of the reduce kernels (f32, f64, bf16 and f16 sum) for each ISA level\n"
               "this CPU supports and each thread count, beside memcpy at the same size.\n"
               "Every kernel's result is first checked against the reference kernel's, bit\n"
               "for bit.",
      .epilogue = "Prints a Markdown table: GB/s (read + written: 3 x the operand size for a\n"
                  "reduction, 2 x for memcpy) of each kernel, memcpy's GB/s at the same size and\n"
                  "thread count, their ratio, and the speed-up over the reference level; then\n"
                  "one line \"# checked: N kernel runs against the reference, M differ\".",
      .args = args,
      .nargs = (int)(sizeof args / sizeof args[0]),
  };
  int ex = tool_args_run(&spec, argc, argv);
  if (ex >= 0) {
    return ex;
  }
  static const size_t full[] = {(size_t)16 << 10, (size_t)512 << 10, (size_t)256 << 20};
  static const size_t quick[] = {(size_t)16 << 10, (size_t)512 << 10, (size_t)8 << 20};
  if (!sizes_given) {
    memcpy(o->sizes, o->quick ? quick : full, sizeof full);
    o->nsizes = 3;
  }
  if (o->nthreads == 0) {
    o->threads[0] = 1;
    o->threads[1] = 2;
    o->nthreads = 2;
  }
  if (!reps_given) {
    o->reps = o->quick ? 3 : 7;
  }
  if (!min_ms_given) {
    o->min_ms = o->quick ? 5 : 20;
  }
  /* Three operands of the largest size, plus the reference result, allocated at once. */
  size_t largest = 0;
  for (int i = 0; i < o->nsizes; i++) {
    largest = o->sizes[i] > largest ? o->sizes[i] : largest;
  }
  char err[256];
  if (tool_check_memory(4.0 * (double)largest, "--sizes (4 buffers of the largest size)", err,
                        sizeof err) != 0) {
    return tool_usage_error(&spec, "%s", err);
  }
  return -1;
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
  int ex = parse_args(argc, argv, &o);
  if (ex >= 0) {
    return ex;
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
         !!(f & MPIAR__FEAT_AVX512_FP16), (int)o.reps, o.min_ms);
  int checked = 0, differ = 0;
  printf("| size/operand | kernel | level | threads | GB/s | memcpy GB/s | / memcpy | x reference "
         "|\n");
  printf("|---|---|---|---|---|---|---|---|\n");
  for (int s = 0; s < o.nsizes; s++) {
    size_t bytes = o.sizes[s];
    char *a = NULL, *b = NULL, *d = NULL, *ref = NULL;
    if (posix_memalign((void **)&a, 64, bytes) || posix_memalign((void **)&b, 64, bytes) ||
        posix_memalign((void **)&d, 64, bytes) || posix_memalign((void **)&ref, 64, bytes)) {
      fprintf(stderr, "mpiar-kernel-bench: cannot allocate 4 x %zu bytes\n", bytes);
      return TOOL_EXIT_FAIL;
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
      work_t mw = {NULL, d, a, b, bytes / 64, 64, (int)o.threads[t]};
      double mgbs = 2.0 * (double)bytes / time_call(&mw, (int)o.reps, o.min_ms) / 1e9;
      for (size_t k = 0; k < sizeof dts / sizeof dts[0]; k++) {
        size_t es = mpiar_dtype_size(dts[k]);
        size_t n = bytes / es;
        double ref_gbs = 0;
        /* What every level must give, bit for bit: the reference kernel on one thread. */
        tables[MPIAR__ISA_REFERENCE].fn[dts[k]][MPIAR_SUM](ref, a, b, n);
        for (int l = 0; l < MPIAR__ISA_COUNT; l++) {
          if (!have[l]) {
            continue;
          }
          work_t w = {tables[l].fn[dts[k]][MPIAR_SUM], d, a, b, n, es, (int)o.threads[t]};
          memset(d, 0, bytes);
          double gbs = 3.0 * (double)bytes / time_call(&w, (int)o.reps, o.min_ms) / 1e9;
          /* The timed calls left their result in d. */
          checked++;
          if (memcmp(d, ref, n * es) != 0) {
            differ++;
            fprintf(stderr,
                    "mpiar-kernel-bench: %s %s sum, %d threads, %s: result differs from "
                    "the reference\n",
                    sz, mpiar_dtype_name(dts[k]), (int)o.threads[t],
                    mpiar__isa_name((mpiar__isa_t)l));
          }
          if (l == MPIAR__ISA_REFERENCE) {
            ref_gbs = gbs;
          }
          printf("| %s | %s sum | %s | %d | %.1f | %.1f | %.2f | %.1f |\n", sz,
                 mpiar_dtype_name(dts[k]), mpiar__isa_name((mpiar__isa_t)l), (int)o.threads[t], gbs,
                 mgbs, gbs / mgbs, gbs / ref_gbs);
          fflush(stdout);
        }
      }
    }
    free(a);
    free(b);
    free(d);
    free(ref);
  }
  printf("\n# checked: %d kernel runs against the reference, %d differ\n", checked, differ);
  return differ ? TOOL_EXIT_FAIL : TOOL_EXIT_OK;
}
