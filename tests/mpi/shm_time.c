/*
 * Times of the zero-copy collectives against mpiar's MPI path and MPI's own call (docs/shm.md,
 * "Measured"): for each size, each form runs `reps` times after a warm-up; a rep's time is the
 * slowest rank's (an MPI_Allreduce of the times, outside the timed region); the median and the
 * minimum are printed (on a loaded machine the minimum is the one that shows the path's cost).
 *
 *   mpiexec -n P shm_time [--coll allreduce|bcast|reduce_scatter|allgather] [--from B] [--to B]
 *                         [--reps R]
 *
 * B is the bytes of the vector (float32): an allreduce's and a broadcast's buffer, the whole
 * input of a reduce-scatter (each rank gets B / P), the whole output of an allgather. Not a test:
 * a measuring tool (its results are checked by test_shm, not here).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpiar.h"

enum { ALLREDUCE, BCAST, RS, AG };

static int rank, size;

/* One call of form @p form (0 zero-copy, 1 mpiar on malloc memory, 2 MPI's own). */
static int call(int coll, int form, float *in, float *out, size_t n) {
  size_t block = n / (size_t)size;
  if (form == 2) {
    switch (coll) {
      case ALLREDUCE:
        return MPI_Allreduce(in, out, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      case BCAST:
        return MPI_Bcast(out, (int)n, MPI_FLOAT, 0, MPI_COMM_WORLD);
      case RS:
        return MPI_Reduce_scatter_block(in, out, (int)block, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      default:
        return MPI_Allgather(in, (int)block, MPI_FLOAT, out, (int)block, MPI_FLOAT,
                             MPI_COMM_WORLD);
    }
  }
  switch (coll) {
    case ALLREDUCE:
      return mpiar_allreduce(in, out, n, MPIAR_FLOAT32, MPIAR_SUM, MPI_COMM_WORLD);
    case BCAST:
      return mpiar_bcast(out, n, MPIAR_FLOAT32, 0, MPI_COMM_WORLD);
    case RS:
      return mpiar_reduce_scatter_block(in, out, block, MPIAR_FLOAT32, MPIAR_SUM, MPI_COMM_WORLD);
    default:
      return mpiar_allgather(in, out, block, MPIAR_FLOAT32, MPI_COMM_WORLD);
  }
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int coll = ALLREDUCE, reps = 20;
  size_t from = 4096, to = (size_t)64 << 20;
  static const char *const names[] = {"allreduce", "bcast", "reduce_scatter", "allgather"};
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--coll") == 0) {
      for (int c = 0; c < 4; c++) {
        coll = strcmp(argv[i + 1], names[c]) == 0 ? c : coll;
      }
    } else if (strcmp(argv[i], "--from") == 0) {
      from = strtoull(argv[i + 1], NULL, 10);
    } else if (strcmp(argv[i], "--to") == 0) {
      to = strtoull(argv[i + 1], NULL, 10);
    } else if (strcmp(argv[i], "--reps") == 0) {
      reps = atoi(argv[i + 1]);
    }
  }
  reps = reps < 1 ? 1 : reps > 1000 ? 1000 : reps;
  float *sh_in = NULL, *sh_out = NULL;
  if (mpiar_alloc(MPI_COMM_WORLD, to, (void **)&sh_in) != MPIAR_SUCCESS ||
      mpiar_alloc(MPI_COMM_WORLD, to, (void **)&sh_out) != MPIAR_SUCCESS) {
    fprintf(stderr, "mpiar_alloc: %s\n", mpiar_last_error());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  float *in = aligned_alloc(64, to), *out = aligned_alloc(64, to);
  memset(in, 0, to);
  memset(out, 0, to);
  memset(sh_in, 0, to);
  memset(sh_out, 0, to);
  if (rank == 0) {
    printf("# %s on %d ranks, float32 sum, median and minimum of %d (the slowest rank's), us\n",
           names[coll], size, reps);
    printf("%12s %10s %10s %10s %10s %10s %10s %9s %9s\n", "bytes", "zc med", "mpiar med",
           "MPI med", "zc min", "mpiar min", "MPI min", "mpiar/zc", "MPI/zc");
  }
  double *t = malloc((size_t)reps * sizeof *t);
  for (size_t bytes = from; bytes <= to; bytes *= 4) {
    size_t n = bytes / sizeof(float) / (size_t)size * (size_t)size;
    double med[3], low[3];
    for (int form = 0; form < 3; form++) {
      float *a = form == 0 ? sh_in : in, *b = form == 0 ? sh_out : out;
      for (int r = -2; r < reps; r++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        int rc = call(coll, form, a, b, n);
        double dt = MPI_Wtime() - t0;
        if (rc != 0) {
          fprintf(stderr, "rank %d: %s form %d failed: %s\n", rank, names[coll], form,
                  mpiar_last_error());
          MPI_Abort(MPI_COMM_WORLD, 1);
        }
        MPI_Allreduce(MPI_IN_PLACE, &dt, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        if (r >= 0) {
          t[r] = dt;
        }
      }
      qsort(t, (size_t)reps, sizeof *t, cmp);
      med[form] = t[reps / 2] * 1e6;
      low[form] = t[0] * 1e6;
    }
    if (rank == 0) {
      printf("%12zu %10.1f %10.1f %10.1f %10.1f %10.1f %10.1f %9.2f %9.2f\n", n * sizeof(float),
             med[0], med[1], med[2], low[0], low[1], low[2], low[1] / low[0], low[2] / low[0]);
    }
  }
  free(t);
  free(in);
  free(out);
  mpiar_free(sh_out);
  mpiar_free(sh_in);
  MPI_Finalize();
  return 0;
}
