/*
 * mpiar-allreduce-loop: the latency of MPI_Allreduce as the OSU micro-benchmarks measure it, in a
 * plain MPI program that knows nothing of mpiar, so that the same binary runs natively and with
 * libmpiar_pmpi.so preloaded (perf/pmpi/compare.sh runs the two in turn).
 *
 * Per size (float32 sum, powers of two from -b to -e bytes): W untimed calls, then N timed calls,
 * each call timed alone between two MPI_Wtime() and followed by a barrier (so every call starts
 * with the ranks together, as in OSU's osu_allreduce); a rank's latency is its timed total / N,
 * and the line reports the average, minimum and maximum over the ranks; the maximum is OSU's
 * column to compare (the slowest rank's time is the collective's). A last column gives the
 * slowest rank's median call, which a loaded machine moves far less than the average (one call
 * descheduled for a tick outweighs thousands of microsecond calls). After the loop every element
 * of the result is checked against the exact sum of the ranks' inputs (small integers, exact in
 * float32); a wrong element ends the run with exit code 1.
 *
 * Usage: mpiexec -n P mpiar-allreduce-loop [-b MIN] [-e MAX] [-i ITERS] [-w WARMUP]
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/tool.h"
#include "mpi.h"

/* OSU's split: sizes above this many bytes take a tenth of the iterations and warm-up calls. */
#define LARGE_BYTES ((size_t)8192)

/* Rank r's element i: small integers, so that the float32 sum over any rank count is exact. */
static float input(int rank, size_t i) {
  return (float)((rank + 1) * 3 + (int)(i % 7));
}

/*
 * The timed loop of one size. @return this rank's average latency in us; *median: the median
 * call's, in us (times[] holds iters entries); *bad: wrong elements.
 */
static double run_size(float *send, float *recv, size_t count, long iters, long warmup, int rank,
                       int size, double *times, double *median, size_t *bad) {
  for (size_t i = 0; i < count; i++) {
    send[i] = input(rank, i);
  }
  double total = 0.0;
  MPI_Barrier(MPI_COMM_WORLD);
  for (long k = 0; k < warmup + iters; k++) {
    double t0 = MPI_Wtime();
    MPI_Allreduce(send, recv, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    double t1 = MPI_Wtime();
    if (k >= warmup) {
      total += t1 - t0;
      times[k - warmup] = t1 - t0;
    }
    MPI_Barrier(MPI_COMM_WORLD);
  }
  *median = tool_median(times, (int)iters) * 1e6;
  *bad = 0;
  for (size_t i = 0; i < count; i++) {
    float want = 0.0f;
    for (int r = 0; r < size; r++) {
      want += input(r, i);
    }
    *bad += recv[i] != want;
  }
  return total * 1e6 / (double)iters;
}

int main(int argc, char **argv) {
  size_t min_bytes = 4, max_bytes = (size_t)1 << 20;
  long iters = 2000, warmup = 200;
  const tool_arg_t args[] = {
      {.short_name = 'b',
       .long_name = "min",
       .kind = TOOL_ARG_SIZE,
       .dest = &min_bytes,
       .lo = 4,
       .hi = 4LL * (INT_MAX / 4),
       .metavar = "BYTES",
       .help = "smallest size (K, M, G: powers of 1024); default 4"},
      {.short_name = 'e',
       .long_name = "max",
       .kind = TOOL_ARG_SIZE,
       .dest = &max_bytes,
       .lo = 4,
       .hi = 4LL * (INT_MAX / 4),
       .metavar = "BYTES",
       .help = "largest size; default 1M"},
      {.short_name = 'i',
       .long_name = "iterations",
       .kind = TOOL_ARG_INT,
       .dest = &iters,
       .lo = 10,
       .hi = 100000000,
       .metavar = "N",
       .help = "timed calls per size up to 8 KiB, a tenth above; default 2000"},
      {.short_name = 'w',
       .long_name = "warmup",
       .kind = TOOL_ARG_INT,
       .dest = &warmup,
       .lo = 0,
       .hi = 100000000,
       .metavar = "N",
       .help = "untimed calls before them, a tenth above 8 KiB; default 200"},
  };
  const tool_spec_t spec = {
      .prog = "mpiar-allreduce-loop",
      .usage = "mpiexec -n P mpiar-allreduce-loop [options]",
      .about = "MPI_Allreduce latency as OSU's osu_allreduce measures it (float32 sum, each call\n"
               "timed alone and followed by a barrier), in a program that knows nothing of mpiar:\n"
               "run it natively and with LD_PRELOAD of libmpiar_pmpi.so. One line per size:\n"
               "bytes, then the average, minimum and maximum over the ranks of the per-call\n"
               "latency in us (OSU's columns), then the slowest rank's median call in us.\n"
               "Every result is checked against the exact sum.",
      .epilogue = NULL,
      .args = args,
      .nargs = (int)(sizeof args / sizeof args[0]),
  };
  int code = tool_args_run(&spec, argc, argv);
  if (code >= 0) {
    return code;
  }
  if (min_bytes > max_bytes) {
    return tool_usage_error(&spec, "-b %zu is larger than -e %zu", min_bytes, max_bytes);
  }
  char err[256];
  /* This rank's two buffers (a run's other ranks check their own). */
  if (tool_check_memory(2.0 * (double)max_bytes, "-e (2 buffers per rank)", err, sizeof err) != 0) {
    return tool_usage_error(&spec, "%s", err);
  }
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  size_t max_count = max_bytes / sizeof(float);
  float *send = malloc(max_count * sizeof *send), *recv = malloc(max_count * sizeof *recv);
  double *times = malloc((size_t)iters * sizeof *times);
  int ok = send != NULL && recv != NULL && times != NULL, all_ok = 0;
  MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (!all_ok) {
    if (rank == 0) {
      fprintf(stderr, "mpiar-allreduce-loop: cannot allocate two buffers of %zu bytes\n",
              max_bytes);
    }
    free(send);
    free(recv);
    free(times);
    MPI_Finalize();
    return TOOL_EXIT_FAIL;
  }
  if (rank == 0) {
    printf("# mpiar-allreduce-loop: %d ranks, float32 sum, %ld (%ld above 8 KiB) calls after %ld "
           "(%ld)\n# bytes avg_us min_us max_us median_max_us\n",
           size, iters, iters / 10 > 0 ? iters / 10 : 1, warmup, warmup / 10);
  }
  int failed = 0;
  for (size_t bytes = min_bytes; bytes <= max_bytes; bytes *= 2) {
    const int large = bytes > LARGE_BYTES;
    const long n = large && iters / 10 > 0 ? iters / 10 : iters;
    size_t bad = 0;
    double med = 0.0, med_hi = 0.0;
    double t = run_size(send, recv, bytes / sizeof(float), n, large ? warmup / 10 : warmup, rank,
                        size, times, &med, &bad);
    double sum = 0.0, lo = 0.0, hi = 0.0;
    unsigned long long wrong = bad, all_wrong = 0;
    MPI_Reduce(&t, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Reduce(&t, &lo, 1, MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_WORLD);
    MPI_Reduce(&t, &hi, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Reduce(&med, &med_hi, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Reduce(&wrong, &all_wrong, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
      printf("%zu %.3f %.3f %.3f %.3f\n", bytes, sum / size, lo, hi, med_hi);
      if (all_wrong != 0) {
        fprintf(stderr, "mpiar-allreduce-loop: %zu bytes: %llu wrong elements over the ranks\n",
                bytes, all_wrong);
        failed = 1;
      }
    }
    if (bytes > max_bytes / 2) {
      break; /* (no overflow past the largest size) */
    }
  }
  MPI_Bcast(&failed, 1, MPI_INT, 0, MPI_COMM_WORLD);
  free(send);
  free(recv);
  free(times);
  MPI_Finalize();
  return failed ? TOOL_EXIT_FAIL : TOOL_EXIT_OK;
}
