/*
 * The interposer honours reproducible mode: a plain MPI program's MPI_Allreduce (float32 and
 * float64 sums of values over a wide range of magnitudes), run with MPIAR_REPRODUCIBLE=1 and the
 * ring forced (whose order otherwise depends on the element's position), gives every element the
 * bits of the canonical combination, computed here with mpiar_reduce_canonical(). MPI's own
 * allreduce or mpiar's ring without the mode would give other bits at 3 ranks and more:
 * `pmpi_reproducible --control` (run without the mode) passes only if the bits differ.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "mpiar_types.h"

static double value(int r, size_t i) {
  uint64_t h = ((uint64_t)r * 1000003u + i * 7919u) * 0x9E3779B97F4A7C15ull;
  h ^= h >> 29;
  double m = (double)(h >> 11) / 9007199254740992.0 + 0.5;
  return ldexp(m, (int)((h >> 5) % 80) - 40) * ((h & 1) ? -1 : 1);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int control = argc > 1 && strcmp(argv[1], "--control") == 0;
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  enum { N = 30011 };
  int failed = 0;
  for (int t = 0; t < 2; t++) {
    size_t es = t == 0 ? 4 : 8;
    mpiar_dtype_t dt = t == 0 ? MPIAR_FLOAT32 : MPIAR_FLOAT64;
    void **in = calloc((size_t)size, sizeof *in);
    for (int r = 0; r < size; r++) {
      in[r] = malloc(N * es);
      for (size_t i = 0; i < N; i++) {
        if (t == 0) {
          ((float *)in[r])[i] = (float)value(r, i);
        } else {
          ((double *)in[r])[i] = value(r, i);
        }
      }
    }
    void *want = malloc(N * es), *got = malloc(N * es);
    if (mpiar_reduce_canonical(want, (const void *const *)in, size, N, dt, MPIAR_SUM) != 0) {
      fprintf(stderr, "mpiar_reduce_canonical: %s\n", mpiar_last_error());
      failed = 1;
    }
    MPI_Allreduce(in[rank], got, N, t == 0 ? MPI_FLOAT : MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    if (memcmp(want, got, N * es) != 0) {
      fprintf(stderr, "rank %d: %s MPI_Allreduce is not the canonical combination\n", rank,
              t == 0 ? "float" : "double");
      failed = 1;
    }
    for (int r = 0; r < size; r++) {
      free(in[r]);
    }
    free(in);
    free(want);
    free(got);
  }
  int any = 0;
  PMPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (rank == 0) {
    printf("interposed MPI_Allreduce%s on %d ranks: %s\n", control ? " without the mode" : "",
           size, any ? "not the canonical bits" : "canonical bits");
  }
  MPI_Finalize();
  return control ? !any : any;
}
