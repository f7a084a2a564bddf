/*
 * mpiar-bench --collective reduce_scatter|allgather: every algorithm of that collective's registry,
 * `auto` and the MPI library's MPI_Reduce_scatter_block / MPI_Allgather, side by side over the
 * size sweep. A size is the whole vector's bytes (a reduce-scatter's input, an allgather's output:
 * p blocks), as in the allreduce table. The algorithms run interleaved, one repetition of each in
 * turn after a barrier; a repetition's time is the slowest rank's, and the table shows the median
 * in microseconds. With -c every column's result is checked once per size against the exact
 * values (small integers); --in-place runs MPIAR_IN_PLACE / MPI_IN_PLACE.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algorithms/algorithms.h"
#include "bench.h"

#define MAX_COLS 16

static MPI_Datatype mpi_type(mpiar_dtype_t t) {
  switch (t) {
  case MPIAR_FLOAT32:
    return MPI_FLOAT;
  case MPIAR_FLOAT64:
    return MPI_DOUBLE;
  case MPIAR_INT32:
    return MPI_INT32_T;
  case MPIAR_INT64:
    return MPI_INT64_T;
  case MPIAR_UINT8:
    return MPI_UINT8_T;
  default:
    return MPI_DATATYPE_NULL;
  }
}

static MPI_Op mpi_op(mpiar_op_t op) {
  switch (op) {
  case MPIAR_PROD:
    return MPI_PROD;
  case MPIAR_MIN:
    return MPI_MIN;
  case MPIAR_MAX:
    return MPI_MAX;
  default:
    return MPI_SUM;
  }
}

/* Small integers, exact in every type: rank r's element i. */
static void fill(void *buf, mpiar_dtype_t t, size_t n, int r, size_t first) {
  for (size_t i = 0; i < n; i++) {
    const int v = (int)((r * 3 + (first + i) * 7) % 5);
    switch (t) {
    case MPIAR_FLOAT32:
      ((float *)buf)[i] = (float)v;
      break;
    case MPIAR_FLOAT64:
      ((double *)buf)[i] = v;
      break;
    case MPIAR_INT32:
      ((int32_t *)buf)[i] = v;
      break;
    case MPIAR_INT64:
      ((int64_t *)buf)[i] = v;
      break;
    default:
      ((uint8_t *)buf)[i] = (uint8_t)v;
      break;
    }
  }
}

static double get(const void *buf, mpiar_dtype_t t, size_t i) {
  switch (t) {
  case MPIAR_FLOAT32:
    return ((const float *)buf)[i];
  case MPIAR_FLOAT64:
    return ((const double *)buf)[i];
  case MPIAR_INT32:
    return ((const int32_t *)buf)[i];
  case MPIAR_INT64:
    return (double)((const int64_t *)buf)[i];
  default:
    return ((const uint8_t *)buf)[i];
  }
}

typedef struct col {
  const char *name;
  int mpi;
} col_t;

/* One run of column @p c. @return an mpiar or MPI error code (0: success). */
static int run_once(const bench_opts_t *o, int rs, const col_t *c, void *send, void *recv,
                    size_t block, MPI_Comm comm) {
  const void *in = o->inplace ? MPIAR_IN_PLACE : send;
  if (c->mpi) {
    const void *min = o->inplace ? MPI_IN_PLACE : send;
    return rs ? MPI_Reduce_scatter_block(min, recv, (int)block, mpi_type(o->dtype),
                                         mpi_op(o->op), comm)
              : MPI_Allgather(min, (int)block, mpi_type(o->dtype), recv, (int)block,
                              mpi_type(o->dtype), comm);
  }
  mpiar_options_t opts = MPIAR_OPTIONS_INIT;
  opts.algorithm = c->name;
  return rs ? mpiar_reduce_scatter_block_ex(in, recv, block, o->dtype, o->op, comm, &opts)
            : mpiar_allgather_ex(in, recv, block, o->dtype, comm, &opts);
}

/* Put the input where the call reads it (in place: the receive buffer). */
static void prepare(const bench_opts_t *o, int rs, void *send, void *recv, size_t block,
                    int rank, int p) {
  const size_t es = mpiar_dtype_size(o->dtype);
  if (rs) {
    fill(o->inplace ? recv : send, o->dtype, block * (size_t)p, rank, 0);
  } else {
    fill(o->inplace ? (char *)recv + (size_t)rank * block * es : send, o->dtype, block, rank, 0);
  }
}

/* @return the number of wrong elements of this rank's result. */
static long check(const bench_opts_t *o, int rs, const void *recv, size_t block, int rank, int p) {
  long bad = 0;
  if (rs) {
    for (size_t i = 0; i < block; i++) {
      double want = 0;
      for (int r = 0; r < p; r++) {
        const double v = (double)((r * 3 + ((size_t)rank * block + i) * 7) % 5);
        want = r == 0                     ? v
               : o->op == MPIAR_MAX       ? (v > want ? v : want)
               : o->op == MPIAR_MIN       ? (v < want ? v : want)
               : o->op == MPIAR_PROD      ? want * v
                                          : want + v;
      }
      bad += get(recv, o->dtype, i) != want;
    }
  } else {
    for (int r = 0; r < p; r++) {
      for (size_t i = 0; i < block; i++) {
        bad += get(recv, o->dtype, (size_t)r * block + i) != (double)((r * 3 + i * 7) % 5);
      }
    }
  }
  return bad;
}

int bench_collective_run(const bench_opts_t *o, MPI_Comm comm, int rank, int p) {
  const int rs = strcmp(o->collective, "reduce_scatter") == 0;
  const size_t es = mpiar_dtype_size(o->dtype);
  col_t cols[MAX_COLS];
  int ncols = 0;
  if (o->collective_algs != NULL) {
    static char storage[512];
    snprintf(storage, sizeof storage, "%s", o->collective_algs);
    for (char *tok = strtok(storage, ","); tok != NULL && ncols < MAX_COLS;
         tok = strtok(NULL, ",")) {
      cols[ncols++] = (col_t){tok, strcmp(tok, BENCH_ALG_MPI) == 0};
    }
  } else {
    const mpiar__algorithm_t *list =
        rs ? mpiar__reduce_scatter_algorithms : mpiar__allgather_algorithms;
    const int n = rs ? mpiar__reduce_scatter_algorithm_count : mpiar__allgather_algorithm_count;
    for (int i = 0; i < n && ncols < MAX_COLS - 2; i++) {
      cols[ncols++] = (col_t){list[i].name, 0};
    }
    cols[ncols++] = (col_t){BENCH_ALG_AUTO, 0};
    if (mpi_type(o->dtype) != MPI_DATATYPE_NULL && o->op != MPIAR_AVG) {
      cols[ncols++] = (col_t){BENCH_ALG_MPI, 1};
    }
  }
  for (int a = 0; a < ncols; a++) {
    if (cols[a].mpi && mpi_type(o->dtype) == MPI_DATATYPE_NULL) {
      if (rank == 0) {
        fprintf(stderr, "mpiar-bench: MPI has no predefined datatype for %s\n",
                mpiar_dtype_name(o->dtype));
      }
      return TOOL_EXIT_USAGE;
    }
  }
  size_t sizes[64];
  const int nsizes = tool_size_sweep(o->min_bytes, o->max_bytes, o->factor, es, sizes, 64);
  if (rank == 0) {
    printf("# mpiar-bench --collective %s: %d ranks, %s %s%s; median of interleaved repetitions "
           "(slowest rank), microseconds; size = p blocks\n",
           o->collective, p, mpiar_dtype_name(o->dtype), rs ? mpiar_op_name(o->op) : "",
           o->inplace ? ", in place" : "");
    printf("| size |");
    for (int a = 0; a < ncols; a++) {
      printf(" %s |", cols[a].name);
    }
    printf(" mpi / auto |\n|---|");
    for (int a = 0; a <= ncols; a++) {
      printf("---|");
    }
    printf("\n");
  }
  int exit_code = 0;
  for (int k = 0; k < nsizes; k++) {
    size_t block = sizes[k] / es / (size_t)p;
    if (block == 0) {
      block = 1;
    }
    const size_t all = block * (size_t)p;
    void *send = malloc((rs ? all : block) * es + 64);
    void *recv = malloc(all * es + 64);
    const int iters = o->iters > 0 ? o->iters
                                   : tool_iters_for(all * es, BENCH_AUTO_ITER_BYTES,
                                                    o->min_iters > 0 ? o->min_iters
                                                                     : BENCH_AUTO_ITERS_MIN,
                                                    BENCH_AUTO_ITERS_MAX);
    const int warm = o->warmup >= 0 ? o->warmup : tool_warmup_for(iters);
    double *t = calloc((size_t)ncols * (size_t)iters, sizeof *t);
    double *tmax = calloc((size_t)ncols * (size_t)iters, sizeof *tmax);
    long bad = 0;
    int failed = 0;
    for (int it = -warm; it < iters && !failed; it++) {
      for (int a = 0; a < ncols && !failed; a++) {
        prepare(o, rs, send, recv, block, rank, p);
        MPI_Barrier(comm);
        const double t0 = MPI_Wtime();
        const int rc = run_once(o, rs, &cols[a], send, recv, block, comm);
        const double t1 = MPI_Wtime();
        if (rc != 0) {
          fprintf(stderr, "mpiar-bench: rank %d: %s failed: %s\n", rank, cols[a].name,
                  cols[a].mpi ? "MPI error" : mpiar_last_error());
          failed = 1;
        }
        if (it >= 0) {
          t[(size_t)a * (size_t)iters + (size_t)it] = t1 - t0;
        }
        if (o->validate && it == 0) {
          bad += check(o, rs, recv, block, rank, p);
        }
      }
    }
    int any_failed = 0;
    MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, comm);
    if (any_failed) {
      free(send);
      free(recv);
      free(t);
      free(tmax);
      return TOOL_EXIT_FAIL;
    }
    long bad_all = 0;
    MPI_Allreduce(&bad, &bad_all, 1, MPI_LONG, MPI_SUM, comm);
    MPI_Reduce(t, tmax, ncols * iters, MPI_DOUBLE, MPI_MAX, 0, comm);
    if (bad_all > 0) {
      exit_code = TOOL_EXIT_FAIL;
    }
    if (rank == 0) {
      char sz[32];
      printf("| %s |", bench_format_size(all * es, sz, sizeof sz));
      double med_auto = 0, med_mpi = 0;
      for (int a = 0; a < ncols; a++) {
        const double m = tool_median(tmax + (size_t)a * (size_t)iters, iters);
        printf(" %.1f |", m * 1e6);
        if (strcmp(cols[a].name, BENCH_ALG_AUTO) == 0) {
          med_auto = m;
        } else if (cols[a].mpi) {
          med_mpi = m;
        }
      }
      if (med_auto > 0 && med_mpi > 0) {
        printf(" %.2fx |", med_mpi / med_auto);
      } else {
        printf(" - |");
      }
      printf("%s\n", bad_all > 0 ? " WRONG RESULTS" : "");
      fflush(stdout);
    }
    free(send);
    free(recv);
    free(t);
    free(tmax);
  }
  return exit_code;
}
