/*
 * mpiar-overlap: how well nonblocking allreduces overlap computation.
 *
 * A rank starts one large and many small allreduces (by default 16 MiB and 64 x 256 KiB of
 * float32, the shape of a training step's gradients), then computes for T, testing its requests
 * every ~50 us of computation, then waits. The computation is a fixed amount of work (calibrated
 * to take T alone), so time taken from it by communication shows. Reported per T (a multiple of
 * the communication's own time): the total, and total / max(T, communication alone); 1.0 is
 * perfect overlap, 2.0 none when T equals the communication time. Side by side: mpiar
 * (mpiar_iallreduce + mpiar_test), and MPI_Iallreduce + MPI_Testall. With --progress-thread the
 * mpiar rows use MPIAR_PROGRESS=thread and compute without test calls.
 *
 *   mpiexec -n 2 mpiar-overlap [-r REPS] [--big BYTES] [--small BYTES] [--nsmall N]
 *                              [--test-us US] [--progress-thread]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "base/common.h"
#include "base/settings.h"
#include "mpiar.h"

static int rank, size;
static volatile double sink;

/* Work that uses the core and little memory: a dependent chain of multiply-adds. */
static void work(long iters) {
  double x = 1.0 + rank * 1e-9, y = 0.999999;
  for (long i = 0; i < iters; i++) {
    x = x * y + 1e-9;
  }
  sink = x;
}

/* Iterations of work() per microsecond on this core (median of 5 timings). */
static double calibrate(void) {
  double best[5];
  long n = 2000000;
  for (int k = 0; k < 5; k++) {
    double t0 = MPI_Wtime();
    work(n);
    best[k] = (double)n / ((MPI_Wtime() - t0) * 1e6);
  }
  for (int i = 0; i < 5; i++) {
    for (int j = i + 1; j < 5; j++) {
      if (best[j] < best[i]) {
        double t = best[i];
        best[i] = best[j];
        best[j] = t;
      }
    }
  }
  return best[2];
}

typedef struct setup {
  int nops;
  size_t *counts;
  float **bufs;
  int progress_thread;
  double per_us;
  double test_us;
} setup_t;

/* Start everything (method 0: mpiar, 1: MPI), compute `iters` in slices, wait; seconds taken. */
static double run(const setup_t *s, int method, long iters) {
  mpiar_request_t *mr = calloc((size_t)s->nops, sizeof *mr);
  MPI_Request *rr = calloc((size_t)s->nops, sizeof *rr);
  MPI_Status *st = calloc((size_t)s->nops, sizeof *st);
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = MPI_Wtime();
  for (int k = 0; k < s->nops; k++) {
    if (method == 0) {
      int rc = mpiar_iallreduce(MPIAR_IN_PLACE, s->bufs[k], s->counts[k], MPIAR_FLOAT32, MPIAR_SUM,
                                MPI_COMM_WORLD, NULL, &mr[k]);
      if (rc != MPIAR_SUCCESS) {
        fprintf(stderr, "mpiar-overlap: %s\n", mpiar_last_error());
        MPI_Abort(MPI_COMM_WORLD, 1);
      }
    } else {
      MPI_Iallreduce(MPI_IN_PLACE, s->bufs[k], (int)s->counts[k], MPI_FLOAT, MPI_SUM,
                     MPI_COMM_WORLD, &rr[k]);
    }
  }
  long slice = (long)(s->test_us * s->per_us);
  slice = slice > 0 ? slice : 1;
  for (long done = 0; done < iters; done += slice) {
    work(iters - done < slice ? iters - done : slice);
    if (method == 0 && !s->progress_thread) {
      int index = 0, flag = 0;
      mpiar_testany(s->nops, mr, &index, &flag);
    } else if (method == 1) {
      int flag = 0;
      MPI_Testall(s->nops, rr, &flag, st);
    }
  }
  if (method == 0) {
    if (mpiar_waitall(s->nops, mr) != MPIAR_SUCCESS) {
      fprintf(stderr, "mpiar-overlap: %s\n", mpiar_last_error());
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
  } else {
    MPI_Waitall(s->nops, rr, st);
  }
  double t = MPI_Wtime() - t0;
  double slowest = 0;
  MPI_Allreduce(&t, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  free(mr);
  free(rr);
  free(st);
  return slowest;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp);
  return v[n / 2];
}

static void usage(FILE *f) {
  fprintf(f, "usage: mpiexec -n P mpiar-overlap [-r REPS] [--big BYTES] [--small BYTES]\n"
             "                    [--nsmall N] [--test-us US] [--progress-thread]\n");
}

int main(int argc, char **argv) {
  int reps = 7, nsmall = 64;
  size_t big = (size_t)16 << 20, small = (size_t)256 << 10;
  double test_us = 50;
  int progress_thread = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    long x = 0;
    if (strcmp(a, "--progress-thread") == 0) {
      progress_thread = 1;
    } else if ((strcmp(a, "-r") == 0 && v && mpiar__parse_long(v, 1, 1000, &x) == 0)) {
      reps = (int)x;
      i++;
    } else if (strcmp(a, "--nsmall") == 0 && v && mpiar__parse_long(v, 0, 4096, &x) == 0) {
      nsmall = (int)x;
      i++;
    } else if (strcmp(a, "--test-us") == 0 && v && mpiar__parse_long(v, 1, 1000000, &x) == 0) {
      test_us = (double)x;
      i++;
    } else if (strcmp(a, "--big") == 0 && v && mpiar__parse_size(v, &big) == 0) {
      i++;
    } else if (strcmp(a, "--small") == 0 && v && mpiar__parse_size(v, &small) == 0) {
      i++;
    } else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      usage(stdout);
      return 0;
    } else {
      fprintf(stderr, "mpiar-overlap: bad argument '%s'%s\n", a,
              v != NULL ? " (or its value)" : " (missing value?)");
      usage(stderr);
      return 2;
    }
  }
  if (progress_thread) {
    setenv("MPIAR_PROGRESS", "thread", 1);
  }
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  setup_t s = {0};
  s.nops = 1 + nsmall;
  s.counts = calloc((size_t)s.nops, sizeof *s.counts);
  s.bufs = calloc((size_t)s.nops, sizeof *s.bufs);
  for (int k = 0; k < s.nops; k++) {
    s.counts[k] = (k == 0 ? big : small) / sizeof(float);
    s.bufs[k] = calloc(s.counts[k] + 1, sizeof(float));
  }
  s.progress_thread = progress_thread;
  s.test_us = test_us;
  s.per_us = calibrate();
  double all = 0;
  MPI_Allreduce(&s.per_us, &all, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
  s.per_us = all;

  static const char *const names[2] = {"mpiar iallreduce", "MPI_Iallreduce"};
  double comm[2];
  for (int m = 0; m < 2; m++) {
    double *t = calloc((size_t)reps, sizeof *t);
    run(&s, m, 0); /* warm-up: contexts, plans */
    for (int r = 0; r < reps; r++) {
      t[r] = run(&s, m, 0);
    }
    comm[m] = median(t, reps);
    free(t);
  }
  if (rank == 0) {
    printf("# mpiar-overlap: %d ranks, 1 x %zu B + %d x %zu B float32 sum, test every %.0f us of "
           "compute%s, median of %d\n",
           size, big, nsmall, small, test_us,
           progress_thread ? " (mpiar: progress thread, no tests)" : "", reps);
    printf("# communication alone: mpiar %.1f ms, MPI %.1f ms\n", comm[0] * 1e3, comm[1] * 1e3);
    printf("%-18s %8s %10s %10s %10s %8s\n", "method", "T/comm", "T ms", "total ms",
           "max(T,comm)", "ratio");
  }
  const double factors[] = {0.5, 1, 2, 4};
  for (size_t f = 0; f < sizeof factors / sizeof factors[0]; f++) {
    for (int m = 0; m < 2; m++) {
      double T = factors[f] * comm[m];
      long iters = (long)(T * 1e6 * s.per_us);
      double *t = calloc((size_t)reps, sizeof *t);
      for (int r = 0; r < reps; r++) {
        t[r] = run(&s, m, iters);
      }
      double total = median(t, reps);
      double bound = T > comm[m] ? T : comm[m];
      if (rank == 0) {
        printf("%-18s %8.1f %10.2f %10.2f %10.2f %8.2f\n", names[m], factors[f], T * 1e3,
               total * 1e3, bound * 1e3, total / bound);
      }
      free(t);
    }
  }
  for (int k = 0; k < s.nops; k++) {
    free(s.bufs[k]);
  }
  free(s.bufs);
  free(s.counts);
  MPI_Finalize();
  return 0;
}
