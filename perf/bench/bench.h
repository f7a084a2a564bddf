/*
 * mpiar-bench: every allreduce algorithm of the registry, `auto` and the MPI library's own
 * MPI_Allreduce, run side by side over a sweep of message sizes, with the point-to-point
 * exchange bandwidth of each size as the limit they are measured against, and the memory floor
 * (what an allreduce must read and write on a node, over the node's memory bandwidth measured in
 * the same run). With -m shared the mpiar columns run on mpiar_alloc buffers (the zero-copy path).
 *
 * The program is split in three: options.c parses the command line (no MPI, so that bad
 * arguments are rejected identically on every rank before MPI starts; perf/common/tool.h), report.c
 * turns the measured times into statistics, the summary table, CSV and JSON, and main.c runs the
 * sweep.
 */
#ifndef MPIAR_BENCH_H
#define MPIAR_BENCH_H

#include <stddef.h>
#include <stdio.h>

#include "common/tool.h"
#include "mpiar.h"

/* The most columns one run compares: registry entries, their segment columns, `auto`, `mpi`
 * and the reproducible-mode forms. */
#define BENCH_MAX_ALGS 64

/* A name with this suffix runs in reproducible mode ("ring/repro", "auto/repro"). */
#define BENCH_REPRO_SUFFIX "/repro"

/* A name with this suffix runs on node-shared buffers from mpiar_alloc ("auto/shared"): the
 * zero-copy path (docs/shm.md), whatever the algorithm named. */
#define BENCH_SHARED_SUFFIX "/shared"

/* Names that are not registry entries. */
#define BENCH_ALG_AUTO "auto"
#define BENCH_ALG_MPI "mpi"

/*
 * A segmented algorithm with a fixed segment size is a column of its own, "NAME/seg=SIZE"
 * (SIZE as "64K", "1M"): by default every segmented algorithm with each of mpiar-tune's candidate
 * segments, so that the best column is the best choice tuning could have made and `auto`'s
 * regret (time / best - 1) is measured against all of them.
 */
#define BENCH_SEG_INFIX "/seg="

/* Sizes from 4 B to 256 MiB: the README's main sweep. */
#define BENCH_DEFAULT_MIN_BYTES ((size_t)4)
#define BENCH_DEFAULT_MAX_BYTES ((size_t)256 << 20)

/*
 * Without -i, each size runs about BENCH_AUTO_ITER_BYTES / bytes repetitions, clamped to
 * [BENCH_AUTO_ITERS_MIN, BENCH_AUTO_ITERS_MAX] (the tools' common rule, perf/common/tool.h):
 * small messages need many repetitions for a stable median, large ones few, and the whole
 * default sweep stays within a few tens of seconds per algorithm on a two-core machine.
 */
#define BENCH_AUTO_ITER_BYTES TOOL_ITER_BYTES
#define BENCH_AUTO_ITERS_MIN TOOL_ITERS_MIN
#define BENCH_AUTO_ITERS_MAX TOOL_ITERS_MAX

/* Size ranges of the summary: small is 4 B..4 KiB, large is >= 4 MiB, medium in between. */
#define BENCH_SMALL_MAX_BYTES ((size_t)4 << 10)
#define BENCH_LARGE_MIN_BYTES ((size_t)4 << 20)

typedef struct bench_opts {
  size_t min_bytes;                 /* -b */
  size_t max_bytes;                 /* -e */
  size_t factor;                    /* -f: each size is the previous one times this */
  int iters;                        /* -i: repetitions per size; 0 = scaled with size */
  int min_iters;                    /* --min-iters: the fewest of a scaled size (0: default) */
  int warmup;                       /* -w: untimed repetitions per size; -1 = scaled with size */
  mpiar_dtype_t dtype;              /* -d */
  mpiar_op_t op;                    /* -o */
  int nalgs;                        /* -a: the algorithms, in the order they run */
  const char *algs[BENCH_MAX_ALGS]; /* as named: "ring", "ring/seg=1M", "auto", "mpi" */
  const char *alg_base[BENCH_MAX_ALGS]; /* the registry name ("ring"), or auto / mpi */
  size_t alg_segment[BENCH_MAX_ALGS];   /* the segment of a "NAME/seg=SIZE" column, else 0 */
  int alg_repro[BENCH_MAX_ALGS];        /* 1: a "NAME/repro" column (reproducible mode) */
  int alg_shared[BENCH_MAX_ALGS];       /* 1: a "NAME/shared" column (mpiar_alloc buffers) */
  int shared_mode;  /* -m shared: every mpiar column on mpiar_alloc buffers (bench_shared_list) */
  size_t sizes[32]; /* --sizes: the sweep's sizes instead of -b, -e, -f */
  int nsizes;
  size_t floor_buffer;   /* --floor-buffer: bytes per rank of the bandwidth pass; 0: default */
  int validate;          /* -c */
  int inplace;           /* --in-place */
  int quiet;             /* -q: no progress line */
  const char *csv_path;  /* --csv */
  const char *json_path; /* --json */
  int mpi_dropped;       /* `mpi` left out of the default list: MPI has no such datatype */
  int reproducible;      /* --reproducible: each mpiar entry also in reproducible mode */
  size_t segs[8];        /* the segments of the default list's segment columns */
  int nsegs;
  const char *collective;      /* --collective: "allreduce" (NULL), "reduce_scatter", "allgather" */
  const char *collective_algs; /* -a of another collective: its names as given */
} bench_opts_t;

/*
 * Parse the command line (argv[1..argc-1]) into @p o with the tools' common parser. Needs no
 * MPI; prints --help or the error (on the launcher's rank 0).
 * @return -1 to run, else the exit code: 0 after --help, 2 for a bad argument.
 */
int bench_parse_args(int argc, char **argv, bench_opts_t *o);

/*
 * The default list (no -a): every registry algorithm (the hierarchical ones only when
 * @p multi_node), the flat segmented ones also with each of o->segs, `auto`, the reproducible
 * forms with --reproducible, then `mpi` when MPI has the datatype. @return 0, or -1 with a
 * message in @p err.
 */
int bench_default_algorithms(bench_opts_t *o, int multi_node, char *err, size_t errlen);

/*
 * --collective reduce_scatter|allgather (collective.c): that registry's algorithms, `auto` and
 * MPI_Reduce_scatter_block / MPI_Allgather over the size sweep, printed as one table.
 * @return the exit code.
 */
int bench_collective_run(const bench_opts_t *o, MPI_Comm comm, int rank, int p);

/*
 * -m shared: every mpiar column of o->algs becomes its "/shared" form, and where the list has
 * `auto` a plain `auto` (mpiar's MPI path, on ordinary buffers) stays beside it, before `mpi`.
 * @return 0, or -1 with a message in @p err.
 */
int bench_shared_list(bench_opts_t *o, char *err, size_t errlen);

/* @return 1 if MPI has a predefined datatype for @p dtype (so `mpi` can run it), else 0. */
int bench_mpi_has_dtype(mpiar_dtype_t dtype);

/* Format @p bytes as "4 B", "64 KiB", "256 MiB" (exact powers) or "1536 B" into @p buf. */
const char *bench_format_size(size_t bytes, char *buf, size_t len);

/* Median, minimum and maximum of one algorithm's repetitions at one size, in seconds. */
typedef struct bench_stat {
  double median;
  double min;
  double max;
  long failures; /* results that differed from the expected values (-c), over all ranks */
} bench_stat_t;

/* Compute the statistics of @p n times (n >= 1); @p scratch holds n doubles. */
void bench_stat_compute(const double *times, int n, double *scratch, bench_stat_t *out);

/* One message of a limit plan (limit.c). */
typedef struct bench_msg {
  int is_send;
  int peer;
  int tag;
  size_t bytes;
  size_t offset; /* receives: where in the limit's receive buffer */
} bench_msg_t;

/*
 * A plan of the point-to-point limit: messages this rank posts all at once, then waits for. The
 * exchange plan moves the 2(p-1)/p * n bytes of a bandwidth-optimal allreduce in one message;
 * an algorithm's plan is its schedule's sends and receives without the reductions.
 */
typedef struct bench_plan {
  char name[48]; /* "exchange", or the algorithm (with "/seg=SIZE") */
  bench_msg_t *msgs;
  int nmsgs;
  size_t nreqs;      /* MPI requests, messages split in chunks of 1 GiB */
  size_t send_bytes; /* the largest message sent (read from the start of the send buffer) */
  size_t recv_bytes; /* receive buffer the plan needs */
} bench_plan_t;

/* The exchange plan of `bytes` per rank. @return 0 or -1 (no memory). */
int bench_plan_exchange(bench_plan_t *plan, size_t bytes, int rank, int p);

/* The plan of an algorithm's schedule for this rank. @return an mpiar code. */
int bench_plan_schedule(bench_plan_t *plan, const char *algorithm, size_t segment_bytes, int rank,
                        int p, size_t count, mpiar_dtype_t dtype, mpiar_op_t op, int in_place);

/* Post every message of the plan and wait for all (reqs and statuses hold plan->nreqs).
 * @return an MPI code. */
int bench_plan_run(const bench_plan_t *plan, const void *sendbuf, void *recvbuf, MPI_Request *reqs,
                   MPI_Status *statuses, MPI_Comm comm);

void bench_plan_free(bench_plan_t *plan);

/* Everything measured at one size. */
typedef struct bench_row {
  size_t bytes; /* count * element size */
  size_t count;
  size_t limit_bytes; /* 2(p-1)/p * bytes: what a bandwidth-optimal allreduce moves per rank */
  int iters;
  int warmup;
  bench_plan_t *plans; /* the limit's plans at this size */
  int nplans;
  double limit_time;      /* best repetition of the fastest plan, seconds */
  const char *limit_plan; /* that plan's name */
  const char *auto_pick;  /* what `auto` selected at this size, NULL if `auto` did not run */
  size_t auto_segment;
  const char *auto_source; /* where that choice came from ("tuning table", "model ...") */
  int best_alg;            /* the fastest column that is neither auto nor mpi, or -1 */
  int best_candidate[BENCH_MAX_ALGS]; /* 1: a distinct schedule that counts for the best */
  double best_time;                   /* its median, seconds */
  double floor_bytes; /* what an allreduce of this size must read and write on a node (report.c) */
  double floor_time;  /* floor_bytes / the node's memory bandwidth, seconds */
  bench_stat_t alg[BENCH_MAX_ALGS];
} bench_row_t;

/* One run: the options, the machine, and a row per size. */
typedef struct bench_run {
  const bench_opts_t *opts;
  int nranks;
  int mpi_index;         /* index of `mpi` in opts->algs, or -1 */
  int auto_index;        /* index of `auto` in opts->algs, or -1 */
  const char *kernel;    /* mpiar_kernel_level() */
  char mpi_library[256]; /* first line of MPI_Get_library_version() */
  char host[128];
  char date[64]; /* UTC, ISO 8601 */
  int nrows;
  bench_row_t *rows;
  int shared_index; /* index of `auto/shared`, or -1 */
  /* The memory floor (main.c, measure_memory): the node's bandwidth with every rank streaming
   * through its own buffer at once, bytes read plus written per second, before the sweep (the
   * median of node_passes, and their range) and after it (the median of node_passes_end). */
  int ranks_per_node; /* the most ranks on one node */
  size_t node_buffer; /* bytes per rank of the bandwidth pass */
  int node_passes, node_passes_end;
  double node_bw, node_bw_min, node_bw_max, node_bw_end; /* bytes per second */
} bench_run_t;

/*
 * The bytes an allreduce of @p bytes per rank must read and write on a node with @p local ranks
 * (docs/performance.md, "The memory floor"): every rank's input read once and every rank's
 * output written once, 2 * local * bytes; in place on one rank of one communicator nothing.
 */
double bench_floor_bytes(size_t bytes, int local, int nranks, int in_place);

/* Derived figures of one algorithm at one row; NaN where undefined (e.g. no `mpi` column). */
typedef struct bench_figures {
  double algbw;       /* bytes / median time, GB/s (1e9 bytes per second) */
  double busbw;       /* algbw * 2(p-1)/p, GB/s */
  double limit_bw;    /* limit_bytes / limit time, GB/s */
  double pct_limit;   /* busbw / limit_bw * 100 */
  double speedup;     /* median time of `mpi` / median time of this algorithm: > 1 is faster */
  double regret;      /* median time / the best column's - 1: what choosing this column costs */
  double floor_busbw; /* the busbw of a call that took the floor's time, GB/s */
  double pct_floor;   /* the floor's time / median time * 100 */
} bench_figures_t;

void bench_figures(const bench_run_t *run, const bench_row_t *row, int alg, bench_figures_t *f);

/* The summary table's header, one row, and the closing summary (ranges, auto, targets). */
void bench_table_header(FILE *f, const bench_run_t *run);
void bench_table_row(FILE *f, const bench_run_t *run, const bench_row_t *row);
void bench_table_summary(FILE *f, const bench_run_t *run);

/* CSV: a header line, then one line per (size, algorithm), written as each size completes. */
void bench_csv_header(FILE *f);
void bench_csv_row(FILE *f, const bench_run_t *run, const bench_row_t *row);

/* JSON: the whole run as one object. @return 0, or -1 if writing failed. */
int bench_json_write(FILE *f, const bench_run_t *run);

#endif /* MPIAR_BENCH_H */
