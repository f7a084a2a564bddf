/*
 * mpiar-latency: back-to-back allreduce latency, for oversubscribed nodes.
 *
 * mpiar-bench times every call between barriers, which is right on dedicated cores; with more
 * ranks than cores a barrier's busy-polling rank holds its core until the scheduler preempts it
 * (a whole tick), and that tick would be measured. Here each method runs blocks of K calls in a
 * row with one barrier per block; the time per call is the block time / K, the median over
 * blocks, the max over ranks. Methods alternate block by block, so drift hits all alike:
 * the blocking call (with the wait policy of MPIAR_WAIT, and spinning), a persistent request
 * (start + wait: no selection, no plan lookup, no allocation), a nonblocking call + wait, the
 * blocking call with the argument check (MPIAR_CHECK) and in reproducible mode, MPI_Allreduce,
 * and the blocking call and persistent requests over 8 sizes in turn (COUNT .. COUNT + 7
 * elements, as a training step's tensors come: a blocking call like the last one reuses its plan,
 * one of another size looks it up).
 *
 * Usage: mpiexec -n P mpiar-latency [-s BYTES] [-k CALLS] [-r BLOCKS] (--help for more)
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "common/tool.h"
#include "core/inspect.h"
#include "mpiar.h"

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Ranks of MPI_COMM_WORLD on this node: they share its memory. */
static int local_ranks(void) {
  MPI_Comm node;
  int n = 1;
  if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) ==
      MPI_SUCCESS) {
    MPI_Comm_size(node, &n);
    MPI_Comm_free(&node);
  }
  return n;
}

int main(int argc, char **argv) {
  size_t bytes = 1024;
  long calls = 200, blocks = 9;
  const tool_arg_t args[] = {
      {.short_name = 's',
       .long_name = "size",
       .kind = TOOL_ARG_SIZE,
       .dest = &bytes,
       .lo = 4,
       .hi = 4LL * INT_MAX,
       .metavar = "BYTES",
       .help = "message size, 4 B .. 8 GiB (one MPI_Allreduce of float32 elements;\n"
               "K, M, G suffixes: powers of 1024); default 1K"},
      {.short_name = 'k',
       .long_name = "calls",
       .kind = TOOL_ARG_INT,
       .dest = &calls,
       .lo = 1,
       .hi = 1000000,
       .metavar = "CALLS",
       .help = "calls per block, back to back; default 200"},
      {.short_name = 'r',
       .long_name = "blocks",
       .kind = TOOL_ARG_INT,
       .dest = &blocks,
       .lo = 1,
       .hi = 1000000,
       .metavar = "BLOCKS",
       .help = "timed blocks per method (after one warm-up block); default 9"},
  };
  const tool_spec_t spec = {
      .prog = "mpiar-latency",
      .usage = "mpiexec -n P mpiar-latency [options]",
      .about = "Back-to-back float32 sums, for nodes with more ranks than cores: blocks of CALLS\n"
               "calls with one barrier per block, methods alternating block by block (mpiar\n"
               "with the wait policy of MPIAR_WAIT, mpiar spinning, a persistent request,\n"
               "a nonblocking call, the argument check, reproducible mode, MPI_Allreduce,\n"
               "then the blocking call and 8 persistent requests over 8 sizes in turn).\n"
               "Reported: the median over blocks of the time per call, the slowest rank's.",
      .epilogue = "The sums are checked; exit code 1 if any element is wrong.",
      .args = args,
      .nargs = (int)(sizeof args / sizeof args[0]),
  };
  int ex = tool_args_run(&spec, argc, argv);
  if (ex >= 0) {
    return ex;
  }

  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  /* Two buffers per rank, on every rank of the node: refuse what cannot fit, on every rank. */
  char err[256];
  int fits = tool_check_memory(2.0 * (double)bytes * local_ranks(), "-s (2 buffers per rank)", err,
                               sizeof err) == 0;
  MPI_Allreduce(MPI_IN_PLACE, &fits, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (!fits) {
    if (rank == 0) {
      fprintf(stderr, "mpiar-latency: %s\nTry 'mpiar-latency --help'.\n", err);
    }
    MPI_Finalize();
    return TOOL_EXIT_USAGE;
  }
  size_t count = bytes / sizeof(float);
  enum { NSIZES = 8 }; /* the rotating methods use COUNT .. COUNT + 7 elements */
  size_t cap = count + NSIZES;
  float *in = malloc(cap * sizeof *in), *out = malloc(cap * sizeof *out);
  double *t = calloc((size_t)(9 * blocks), sizeof *t); /* 9 methods, see below */
  int have = in != NULL && out != NULL && t != NULL;
  MPI_Allreduce(MPI_IN_PLACE, &have, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (!have) {
    if (rank == 0) {
      fprintf(stderr, "mpiar-latency: cannot allocate 2 buffers of %zu bytes\n", bytes);
    }
    free(in);
    free(out);
    free(t);
    MPI_Finalize();
    return TOOL_EXIT_FAIL;
  }
  for (size_t i = 0; i < cap; i++) {
    in[i] = (float)(rank + 1);
  }
  /* Methods (alternating block by block): see the names. */
  enum { NMETHODS = 9, MPI_METHOD = 6 };
  static const char *names[NMETHODS] = {"mpiar_allreduce (wait policy of MPIAR_WAIT: auto)",
                                        "mpiar_allreduce, spinning (MPIAR_WAIT=spin)",
                                        "persistent: mpiar_start + mpiar_wait",
                                        "mpiar_iallreduce + mpiar_wait",
                                        "mpiar_allreduce with the argument check",
                                        "mpiar_allreduce, reproducible mode",
                                        "MPI_Allreduce",
                                        "mpiar_allreduce, 8 sizes in turn",
                                        "persistent, 8 sizes in turn (8 requests)"};
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
  (void)mpiar__inspect_set_yield(comms[1], 0);
  mpiar_request_t persistent = MPIAR_REQUEST_NULL, turns[NSIZES];
  mpiar_options_t checked = MPIAR_OPTIONS_INIT, reproducible = MPIAR_OPTIONS_INIT;
  checked.check = 1;
  reproducible.reproducible = 1;
  if (mpiar_allreduce_init(in, out, count, MPIAR_FLOAT32, MPIAR_SUM, comms[0], NULL,
                           &persistent) != MPIAR_SUCCESS) {
    fprintf(stderr, "mpiar-latency: %s\n", mpiar_last_error());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  for (int k = 0; k < NSIZES; k++) {
    if (mpiar_allreduce_init(in, out, count + (size_t)k, MPIAR_FLOAT32, MPIAR_SUM, comms[0], NULL,
                             &turns[k]) != MPIAR_SUCCESS) {
      fprintf(stderr, "mpiar-latency: %s\n", mpiar_last_error());
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
  }
  for (long b = -1; b < blocks; b++) { /* block -1 warms up */
    for (int m = 0; m < NMETHODS; m++) {
      MPI_Barrier(MPI_COMM_WORLD);
      double t0 = MPI_Wtime();
      for (long c = 0; c < calls; c++) {
        int rc;
        mpiar_request_t r;
        switch (m) {
        case 0:
        case 1:
          rc = mpiar_allreduce(in, out, count, MPIAR_FLOAT32, MPIAR_SUM, comms[m]);
          break;
        case 2:
          rc = mpiar_start(&persistent);
          rc = rc ? rc : mpiar_wait(&persistent);
          break;
        case 3:
          rc = mpiar_iallreduce(in, out, count, MPIAR_FLOAT32, MPIAR_SUM, comms[0], NULL, &r);
          rc = rc ? rc : mpiar_wait(&r);
          break;
        case 4:
          rc = mpiar_allreduce_ex(in, out, count, MPIAR_FLOAT32, MPIAR_SUM, comms[0], &checked);
          break;
        case 5:
          rc = mpiar_allreduce_ex(in, out, count, MPIAR_FLOAT32, MPIAR_SUM, comms[0],
                                  &reproducible);
          break;
        case MPI_METHOD:
          rc = MPI_Allreduce(in, out, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
          break;
        case 7:
          rc = mpiar_allreduce(in, out, count + (size_t)(c % NSIZES), MPIAR_FLOAT32, MPIAR_SUM,
                               comms[0]);
          break;
        default:
          rc = mpiar_start(&turns[c % NSIZES]);
          rc = rc ? rc : mpiar_wait(&turns[c % NSIZES]);
          break;
        }
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
  mpiar_request_free(&persistent);
  for (int k = 0; k < NSIZES; k++) {
    mpiar_request_free(&turns[k]);
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
      printf("%-52s %12.2f us  %8.4fx MPI time  %8.4fx mpiar_allreduce\n", names[m],
             med[m] * 1e6, med[m] / med[MPI_METHOD], med[m] / med[0]);
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
