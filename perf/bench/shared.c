/*
 * mpiar-bench -m shared: the zero-copy allreduce on node-shared buffers (mpiar_alloc) beside
 * MPI_Allreduce and mpiar's MPI path on ordinary buffers, and the node's memory floor, all
 * interleaved block by block (docs/shm.md, docs/performance.md).
 *
 *   mpiexec -n P mpiar-bench -m shared [-b MIN] [-e MAX] [-f FACTOR] [-d DTYPE] [-r REPS]
 *                                      [-n CALLS]
 *
 * -r: repetitions per size (default 31, 15 from 4 MiB, 7 from 64 MiB); -n: the most calls in a
 * block (default 200; oversubscribed runs want fewer).
 *
 * Columns (median over repetitions of each rank's slowest; a repetition is one block of
 * back-to-back calls after a barrier, the block's time divided by its calls):
 *   MPI_Allreduce    ordinary buffers (malloc), send -> receive
 *   mpiar (MPI path) the same buffers through mpiar_allreduce
 *   mpiar shared     mpiar_allreduce on mpiar_alloc buffers, send -> receive (zero-copy)
 *   floor            every rank copies n bytes at once (memcpy: it reads n and writes n, the
 *                    traffic of one rank's share of the zero-copy allreduce: p shares of n/p read
 *                    and written p times), then a barrier ends the block: like the allreduce,
 *                    the floor is met only when every rank runs (on a loaded node the barrier
 *                    waits for the ranks the scheduler put aside, as the allreduce's flags do)
 * Every shared result is checked (exact small integers in the datatype) after its block.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpiar.h"

int bench_shared_main(int argc, char **argv);

static size_t parse_size(const char *s) {
  char *end = NULL;
  double v = strtod(s, &end);
  if (end != NULL) {
    if (*end == 'K' || *end == 'k') {
      v *= 1024;
    } else if (*end == 'M' || *end == 'm') {
      v *= 1024 * 1024;
    } else if (*end == 'G' || *end == 'g') {
      v *= 1024.0 * 1024 * 1024;
    }
  }
  return v < 1 ? 1 : (size_t)v;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static void fmt_size(size_t b, char *buf, size_t len) {
  if (b >= ((size_t)1 << 30) && b % ((size_t)1 << 30) == 0) {
    snprintf(buf, len, "%zu GiB", b >> 30);
  } else if (b >= ((size_t)1 << 20) && b % ((size_t)1 << 20) == 0) {
    snprintf(buf, len, "%zu MiB", b >> 20);
  } else if (b >= 1024 && b % 1024 == 0) {
    snprintf(buf, len, "%zu KiB", b >> 10);
  } else {
    snprintf(buf, len, "%zu B", b);
  }
}

static MPI_Datatype mpi_type(mpiar_dtype_t t) {
  switch (t) {
    case MPIAR_FLOAT64:
      return MPI_DOUBLE;
    case MPIAR_INT32:
      return MPI_INT32_T;
    case MPIAR_INT64:
      return MPI_INT64_T;
    default:
      return MPI_FLOAT;
  }
}

/* Element i of rank r's input: small integers, exact in every type measured. */
static void fill(void *buf, size_t count, mpiar_dtype_t t, int r) {
  for (size_t i = 0; i < count; i++) {
    int v = (int)((i * 7 + (size_t)r * 3) % 64);
    if (t == MPIAR_FLOAT64) {
      ((double *)buf)[i] = v;
    } else if (t == MPIAR_INT32) {
      ((int *)buf)[i] = v;
    } else if (t == MPIAR_INT64) {
      ((long long *)buf)[i] = v;
    } else {
      ((float *)buf)[i] = (float)v;
    }
  }
}

static long check(const void *buf, size_t count, mpiar_dtype_t t, int p) {
  long bad = 0;
  size_t step = count > 4096 ? count / 4093 : 1;
  for (size_t i = 0; i < count; i += step) {
    double want = 0;
    for (int r = 0; r < p; r++) {
      want += (double)((i * 7 + (size_t)r * 3) % 64);
    }
    double got = t == MPIAR_FLOAT64 ? ((const double *)buf)[i]
                 : t == MPIAR_INT32 ? ((const int *)buf)[i]
                 : t == MPIAR_INT64 ? (double)((const long long *)buf)[i]
                                    : ((const float *)buf)[i];
    bad += got != want;
  }
  return bad;
}

enum { COL_MPI, COL_MPIAR, COL_SHARED, COL_FLOOR, NCOLS };

int bench_shared_main(int argc, char **argv) {
  size_t min_b = 8, max_b = (size_t)256 << 20, factor = 4;
  int reps = 0, max_calls = 200;
  mpiar_dtype_t dtype = MPIAR_FLOAT32;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "-b") == 0 && v) {
      min_b = parse_size(v), i++;
    } else if (strcmp(a, "-e") == 0 && v) {
      max_b = parse_size(v), i++;
    } else if (strcmp(a, "-f") == 0 && v) {
      factor = parse_size(v), i++;
    } else if (strcmp(a, "-n") == 0 && v) {
      max_calls = atoi(v) > 0 ? atoi(v) : 1, i++;
    } else if (strcmp(a, "-r") == 0 && v) {
      reps = atoi(v), i++;
    } else if (strcmp(a, "-d") == 0 && v) {
      if (mpiar_dtype_from_name(v, &dtype) != MPIAR_SUCCESS ||
          (dtype != MPIAR_FLOAT32 && dtype != MPIAR_FLOAT64 && dtype != MPIAR_INT32 &&
           dtype != MPIAR_INT64)) {
        fprintf(stderr, "mpiar-bench -m shared: -d takes float32, float64, int32 or int64\n");
        return 2;
      }
      i++;
    } else {
      fprintf(stderr,
              "usage: mpiar-bench -m shared [-b MIN] [-e MAX] [-f FACTOR] [-d DTYPE] [-r REPS] "
              "[-n CALLS]\n");
      return strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0 ? 0 : 2;
    }
  }
  if (factor < 2 || min_b > max_b) {
    fprintf(stderr, "mpiar-bench -m shared: -f at least 2 and -b at most -e\n");
    return 2;
  }
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  int rank = 0, p = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &p);
  size_t es = mpiar_dtype_size(dtype);
  size_t cap = max_b < es ? es : max_b;
  char *sin = NULL, *sout = NULL;
  int rc = mpiar_alloc(comm, cap, (void **)&sin);
  if (rc == MPIAR_SUCCESS) {
    rc = mpiar_alloc(comm, cap, (void **)&sout);
  }
  char *min_ = malloc(cap), *mout = malloc(cap), *cin = malloc(cap), *cout = malloc(cap);
  if (rc != MPIAR_SUCCESS || !min_ || !mout || !cin || !cout) {
    fprintf(stderr, "rank %d: %s\n", rank, rc ? mpiar_last_error() : "out of memory");
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  memset(min_, 0, cap);
  memset(mout, 0, cap);
  memset(cin, 1, cap);
  memset(cout, 0, cap);
  if (rank == 0) {
    printf("# mpiar-bench -m shared: %d ranks, %s, sum; median per call (us); ratios: "
           "MPI_Allreduce / mpiar shared, floor / mpiar shared\n",
           p, mpiar_dtype_name(dtype));
    printf("| size | MPI_Allreduce | mpiar (MPI path) | mpiar shared | floor | vs MPI_Allreduce "
           "| of floor |\n|---|---|---|---|---|---|---|\n");
  }
  long failures = 0;
  for (size_t bytes = min_b; bytes <= max_b; bytes *= factor) {
    size_t count = bytes / es ? bytes / es : 1;
    size_t nb = count * es;
    /* Calls per block: about 1 MiB of data per block, 1 .. 200 calls. */
    int calls = (int)((size_t)(1 << 20) / nb);
    calls = calls < 1 ? 1 : calls > max_calls ? max_calls : calls;
    int nrep = reps > 0 ? reps : nb >= ((size_t)64 << 20) ? 7 : nb >= ((size_t)4 << 20) ? 15 : 31;
    fill(min_, count, dtype, rank);
    fill(sin, count, dtype, rank);
    double *t[NCOLS];
    for (int c = 0; c < NCOLS; c++) {
      t[c] = calloc((size_t)nrep, sizeof(double));
    }
    for (int r = -2; r < nrep; r++) { /* two untimed rounds first */
      for (int k = 0; k < NCOLS; k++) {
        int c = (k + (r < 0 ? 0 : r)) % NCOLS; /* the order rotates: no column always first */
        MPI_Barrier(comm);
        double t0 = MPI_Wtime();
        for (int i = 0; i < calls; i++) {
          switch (c) {
            case COL_MPI:
              MPI_Allreduce(min_, mout, (int)count, mpi_type(dtype), MPI_SUM, comm);
              break;
            case COL_MPIAR:
              rc = mpiar_allreduce(min_, mout, count, dtype, MPIAR_SUM, comm);
              break;
            case COL_SHARED:
              rc = mpiar_allreduce(sin, sout, count, dtype, MPIAR_SUM, comm);
              break;
            default:
              memcpy(cout, cin, nb);
          }
          if (rc != MPIAR_SUCCESS) {
            fprintf(stderr, "rank %d: %s\n", rank, mpiar_last_error());
            MPI_Abort(MPI_COMM_WORLD, 1);
          }
        }
        if (c == COL_FLOOR) {
          MPI_Barrier(comm);
        }
        double dt = (MPI_Wtime() - t0) / calls, worst = 0;
        MPI_Allreduce(&dt, &worst, 1, MPI_DOUBLE, MPI_MAX, comm);
        if (r >= 0) {
          t[c][r] = worst;
        }
        if (c == COL_SHARED) {
          failures += check(sout, count, dtype, p);
        }
      }
    }
    double med[NCOLS];
    for (int c = 0; c < NCOLS; c++) {
      qsort(t[c], (size_t)nrep, sizeof(double), cmp_double);
      med[c] = t[c][nrep / 2];
      free(t[c]);
    }
    if (rank == 0) {
      char sz[32];
      fmt_size(nb, sz, sizeof sz);
      printf("| %s | %.2f | %.2f | %.2f | %.2f | %.2fx | %.0f %% |\n", sz, med[COL_MPI] * 1e6,
             med[COL_MPIAR] * 1e6, med[COL_SHARED] * 1e6, med[COL_FLOOR] * 1e6,
             med[COL_MPI] / med[COL_SHARED], 100.0 * med[COL_FLOOR] / med[COL_SHARED]);
      fflush(stdout);
    }
    if (bytes > max_b / factor) {
      break;
    }
  }
  long total = 0;
  MPI_Allreduce(&failures, &total, 1, MPI_LONG, MPI_SUM, comm);
  if (rank == 0) {
    printf("# checked results: %ld wrong\n", total);
  }
  mpiar_free(sout);
  mpiar_free(sin);
  free(min_);
  free(mout);
  free(cin);
  free(cout);
  MPI_Comm_free(&comm);
  MPI_Finalize();
  return total != 0;
}
