/*
 * mpiar-latency: back-to-back allreduce latency, for oversubscribed nodes.
 *
 * mpiar-bench times every call between barriers, which is right on dedicated cores; with more
 * ranks than cores a barrier's busy-polling rank holds its core until the scheduler preempts it
 * (a whole tick), and that tick would be measured. Here each method runs blocks of K calls in a
 * row with one barrier per block; the time per call is the block time / K, the median over
 * blocks, the max over ranks. Methods alternate block by block (mpiar auto, each wait policy,
 * MPI_Allreduce), so drift hits all alike.
 *
 * Usage: mpiexec -n P mpiar-latency [-s BYTES] [-k CALLS] [-r BLOCKS]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "core/context.h"
#include "mpiar.h"

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static void usage(int rank, const char *msg) {
  if (rank == 0) {
    fprintf(stderr, "mpiar-latency: %s\nusage: mpiar-latency [-s BYTES] [-k CALLS] [-r BLOCKS]\n",
            msg);
  }
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  size_t bytes = 1024;
  long calls = 200, blocks = 9;
  for (int i = 1; i < argc; i++) {
    char *end = NULL;
    if (strcmp(argv[i], "-s") == 0 && i + 1 < argc) {
      if (mpiar__parse_size(argv[++i], &bytes) != 0 || bytes < 4) {
        usage(rank, "-s needs a size of at least 4 bytes");
        MPI_Finalize();
        return 2;
      }
    } else if ((strcmp(argv[i], "-k") == 0 || strcmp(argv[i], "-r") == 0) && i + 1 < argc) {
      long v = strtol(argv[i + 1], &end, 10);
      if (*end != '\0' || v < 1 || v > 1000000) {
        usage(rank, "-k and -r need a positive integer");
        MPI_Finalize();
        return 2;
      }
      *(argv[i][1] == 'k' ? &calls : &blocks) = v;
      i++;
    } else {
      usage(rank, "unknown argument");
      MPI_Finalize();
      return 2;
    }
  }
  size_t count = bytes / sizeof(float);
  float *in = malloc(count * sizeof *in), *out = malloc(count * sizeof *out);
  for (size_t i = 0; i < count; i++) {
    in[i] = (float)(rank + 1);
  }
  /* Methods: 0 mpiar with MPIAR_WAIT as set (auto by default), 1 mpiar spinning, 2 MPI. */
  enum { NMETHODS = 3 };
  static const char *names[NMETHODS] = {"mpiar (wait policy from MPIAR_WAIT, default auto)",
                                        "mpiar, spinning (MPIAR_WAIT=spin)", "MPI_Allreduce"};
  MPI_Comm comms[2];
  MPI_Comm_dup(MPI_COMM_WORLD, &comms[0]);
  MPI_Comm_dup(MPI_COMM_WORLD, &comms[1]);
  /* Create both contexts, then force the second one to spin. */
  for (int m = 0; m < 2; m++) {
    if (mpiar_allreduce(in, out, count, MPIAR_FLOAT32, MPIAR_SUM, comms[m]) != MPIAR_SUCCESS) {
      fprintf(stderr, "mpiar-latency: %s\n", mpiar_last_error());
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
  }
  mpiar__context_t *spin = NULL;
  if (mpiar__context_enter(comms[1], 0, &spin) == MPIAR_SUCCESS) {
    spin->yield = 0;
    mpiar__context_leave(spin);
  }
  double *t = calloc((size_t)(NMETHODS * blocks), sizeof *t);
  for (long b = -1; b < blocks; b++) { /* block -1 warms up */
    for (int m = 0; m < NMETHODS; m++) {
      MPI_Barrier(MPI_COMM_WORLD);
      double t0 = MPI_Wtime();
      for (long c = 0; c < calls; c++) {
        int rc = m < 2 ? mpiar_allreduce(in, out, count, MPIAR_FLOAT32, MPIAR_SUM, comms[m])
                       : MPI_Allreduce(in, out, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        if (rc != 0) {
          fprintf(stderr, "mpiar-latency: rank %d: error %d %s\n", rank, rc, mpiar_last_error());
          MPI_Abort(MPI_COMM_WORLD, 1);
        }
      }
      double dt = (MPI_Wtime() - t0) / (double)calls;
      if (b >= 0) {
        t[m * blocks + b] = dt;
      }
    }
  }
  /* Every method left the same exact sum (small integers) in `out`: check the last one, and
   * mpiar's once more, so that a fast wrong answer cannot pass unnoticed. */
  int bad = 0;
  float want = (float)size * (float)(size + 1) / 2.0f;
  for (int m = 0; m < 2; m++) {
    memset(out, 0, count * sizeof *out);
    mpiar_allreduce(in, out, count, MPIAR_FLOAT32, MPIAR_SUM, comms[m]);
    for (size_t i = 0; i < count; i++) {
      bad += out[i] != want;
    }
  }
  MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, t, (int)(NMETHODS * blocks), MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  if (rank == 0) {
    double med[NMETHODS];
    for (int m = 0; m < NMETHODS; m++) {
      qsort(t + m * blocks, (size_t)blocks, sizeof *t, cmp_double);
      med[m] = t[m * blocks + blocks / 2];
    }
    printf("# mpiar-latency: %d ranks, %zu bytes float32 sum, %ld blocks of %ld calls; median "
           "time per call\n",
           size, count * sizeof(float), blocks, calls);
    for (int m = 0; m < NMETHODS; m++) {
      printf("%-52s %12.2f us  %8.4fx MPI time\n", names[m], med[m] * 1e6, med[m] / med[2]);
    }
  }
  if (bad && rank == 0) {
    fprintf(stderr, "mpiar-latency: %d wrong elements\n", bad);
  }
  free(t);
  free(in);
  free(out);
  MPI_Comm_free(&comms[0]);
  MPI_Comm_free(&comms[1]);
  MPI_Finalize();
  return bad ? 1 : 0;
}
