/*
 * Command-line options of mpiar-bench, in the style of the OSU micro-benchmarks and nccl-tests,
 * parsed by the tools' common parser (perf/common/tool.h) before MPI starts, so a bad argument
 * makes every rank exit with code 2 and none of them waits for the others.
 */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "bench.h"
#include "common/tool.h"

int bench_mpi_has_dtype(mpiar_dtype_t dtype) {
  return dtype != MPIAR_FLOAT16 && dtype != MPIAR_BFLOAT16 && (unsigned)dtype < MPIAR__DTYPE_COUNT;
}

const char *bench_format_size(size_t bytes, char *buf, size_t len) {
  static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  size_t v = bytes;
  while (u < 4 && v >= 1024 && v % 1024 == 0) {
    v /= 1024;
    u++;
  }
  snprintf(buf, len, "%zu %s", v, units[u]);
  return buf;
}

static int parse_dtype(const char *value, void *dest, char *err, size_t errlen) {
  if (mpiar_dtype_from_name(value, dest) != MPIAR_SUCCESS) {
    snprintf(err, errlen,
             "unknown datatype '%s' (int8 uint8 int32 uint32 int64 uint64 float16 bfloat16 "
             "float32 float64)",
             value);
    return -1;
  }
  return 0;
}

static int parse_op(const char *value, void *dest, char *err, size_t errlen) {
  if (mpiar_op_from_name(value, dest) != MPIAR_SUCCESS) {
    snprintf(err, errlen, "unknown operation '%s' (sum prod min max band bor bxor avg)", value);
    return -1;
  }
  return 0;
}

int bench_split_name(const char *name, char *buf, size_t len) {
  size_t n = strlen(name), k = strlen(BENCH_REPRO_SUFFIX);
  int repro = n > k && strcmp(name + n - k, BENCH_REPRO_SUFFIX) == 0;
  snprintf(buf, len, "%.*s", (int)(repro ? n - k : n), name);
  return repro;
}

int bench_is_auto(const char *name) {
  char base[64];
  bench_split_name(name, base, sizeof base);
  return strcmp(base, BENCH_ALG_AUTO) == 0;
}

/* @return 1 if name is a registry algorithm, `auto` or `mpi` (mpiar's with or without
 * BENCH_REPRO_SUFFIX). */
static int known_algorithm(const char *full) {
  if (strcmp(full, BENCH_ALG_MPI) == 0) {
    return 1;
  }
  char name[64];
  bench_split_name(full, name, sizeof name);
  if (strcmp(name, BENCH_ALG_AUTO) == 0) {
    return 1;
  }
  int n = mpiar_algorithm_count();
  for (int i = 0; i < n; i++) {
    const char *r = mpiar_algorithm_name(i);
    if (r != NULL && strcmp(r, name) == 0) {
      return 1;
    }
  }
  return 0;
}

/* The list of names, for --help and error messages. */
static void list_algorithms(char *buf, size_t len) {
  size_t used = 0;
  buf[0] = '\0';
  int n = mpiar_algorithm_count();
  for (int i = 0; i < n + 2 && used < len; i++) {
    const char *name = i < n ? mpiar_algorithm_name(i) : (i == n ? BENCH_ALG_AUTO : BENCH_ALG_MPI);
    int w = snprintf(buf + used, len - used, "%s%s", i ? ", " : "", name ? name : "?");
    used += w > 0 ? (size_t)w : 0;
  }
}

/*
 * Split a comma-separated list into o->algs. The names point into `storage`, a copy of the
 * argument that lives until the process ends. @return 0, or -1 with a message in err.
 */
static int parse_algorithms(char *storage, bench_opts_t *o, char *err, size_t errlen) {
  o->nalgs = 0;
  char *p = storage;
  for (;;) {
    char *comma = strchr(p, ',');
    if (comma != NULL) {
      *comma = '\0';
    }
    if (*p == '\0') {
      snprintf(err, errlen, "-a: empty algorithm name in the list");
      return -1;
    }
    if (!known_algorithm(p)) {
      char names[256];
      list_algorithms(names, sizeof names);
      snprintf(err, errlen, "-a: unknown algorithm '%s' (known: %s)", p, names);
      return -1;
    }
    for (int i = 0; i < o->nalgs; i++) {
      if (strcmp(o->algs[i], p) == 0) {
        snprintf(err, errlen, "-a: algorithm '%s' is listed twice", p);
        return -1;
      }
    }
    if (o->nalgs == BENCH_MAX_ALGS) {
      snprintf(err, errlen, "-a: more than %d algorithms", BENCH_MAX_ALGS);
      return -1;
    }
    o->algs[o->nalgs++] = p;
    if (comma == NULL) {
      return 0;
    }
    p = comma + 1;
  }
}

/*
 * Every registry algorithm, then `auto`, then `mpi` when MPI has the datatype. The hierarchical
 * algorithms are left out where the job runs on one node (they are their flat equivalents there;
 * name them with -a to run them anyway): `multi_node` says whether it does not.
 */
int bench_default_algorithms(bench_opts_t *o, int multi_node, char *err, size_t errlen) {
  int n = mpiar_algorithm_count();
  int per = o->reproducible ? 2 : 1;
  if ((n + 1) * per + 1 > BENCH_MAX_ALGS) {
    snprintf(err, errlen, "the registry has %d algorithms; this build compares at most %d", n,
             BENCH_MAX_ALGS);
    return -1;
  }
  static char repro_names[BENCH_MAX_ALGS][64];
  o->nalgs = 0;
  for (int i = 0; i <= n; i++) {
    const char *name = i < n ? mpiar_algorithm_name(i) : BENCH_ALG_AUTO;
    if (!multi_node && strncmp(name, "hier_", 5) == 0) {
      continue;
    }
    o->algs[o->nalgs++] = name;
    if (o->reproducible) {
      snprintf(repro_names[o->nalgs], sizeof repro_names[0], "%s%s", name, BENCH_REPRO_SUFFIX);
      o->algs[o->nalgs] = repro_names[o->nalgs];
      o->nalgs++;
    }
  }
  if (bench_mpi_has_dtype(o->dtype)) {
    o->algs[o->nalgs++] = BENCH_ALG_MPI;
  } else {
    o->mpi_dropped = 1;
  }
  return 0;
}

static const char about[] =
    "Times every allreduce algorithm of mpiar, its automatic choice and MPI_Allreduce\n"
    "side by side over a sweep of message sizes. The algorithms run interleaved\n"
    "(A B C A B C ...) at each size; each repetition is timed between barriers and its\n"
    "time is that of the slowest rank.\n"
    "\n"
    "The point-to-point limit of a size bounds what any of these schedules can move:\n"
    "each repetition also runs, interleaved with the algorithms, a paired\n"
    "MPI_Isend/MPI_Irecv exchange of the 2(p-1)/p * bytes that a bandwidth-optimal\n"
    "allreduce moves per rank, and, for every algorithm that runs, its schedule's own\n"
    "sends and receives (the same peers, message sizes and counts) posted all at once\n"
    "with no reduction and no waiting between steps. The limit is the fastest of these\n"
    "exchanges, best repetition: a schedule cannot move its messages faster than with\n"
    "its reductions and dependencies taken away.";

static const char epilogue[] =
    "Output (rank 0, stdout): a table with each algorithm's median time in microseconds\n"
    "and its speedup vs MPI = time(MPI_Allreduce) / time(algorithm) (> 1: faster than\n"
    "MPI), the point-to-point limit, and the best mpiar bus bandwidth as a percentage of\n"
    "it (busbw = bytes / time * 2(p-1)/p, as in nccl-tests); then the median speedups\n"
    "over small (<= 4 KiB), medium and large (>= 4 MiB) sizes. A progress line goes to\n"
    "stderr when it is a terminal.";

int bench_parse_args(int argc, char **argv, bench_opts_t *o) {
  memset(o, 0, sizeof *o);
  o->min_bytes = BENCH_DEFAULT_MIN_BYTES;
  o->max_bytes = BENCH_DEFAULT_MAX_BYTES;
  o->dtype = MPIAR_FLOAT32;
  o->op = MPIAR_SUM;
  long factor = 2;
  long iters = 0;
  long warmup = -1;
  const char *alg_arg = NULL;
  int min_given = 0;
  int max_given = 0;
  char iters_help[160];
  snprintf(iters_help, sizeof iters_help,
           "timed repetitions per size; default: scaled with the size\n"
           "(%d at the smallest sizes down to %d for %zu MiB and more)",
           BENCH_AUTO_ITERS_MAX, BENCH_AUTO_ITERS_MIN,
           (BENCH_AUTO_ITER_BYTES / BENCH_AUTO_ITERS_MIN) >> 20);
  char names[256];
  list_algorithms(names, sizeof names);
  char alg_help[512];
  snprintf(alg_help, sizeof alg_help,
           "algorithms to compare, in order, from\n"
           "%s\n"
           "(auto: mpiar's own choice, mpi: MPI_Allreduce); default all of\n"
           "them (mpi is left out for float16 and bfloat16, which MPI lacks).\n"
           "For avg, mpi runs MPI_Allreduce(MPI_SUM) and divides.",
           names);
  const tool_arg_t args[] = {
      {.short_name = 'b',
       .kind = TOOL_ARG_SIZE,
       .dest = &o->min_bytes,
       .lo = 1,
       .hi = TOOL_SIZE_MAX,
       .given = &min_given,
       .metavar = "SIZE",
       .help = "smallest message in bytes (K, M, G suffixes: powers of 1024);\ndefault 4"},
      {.short_name = 'e',
       .kind = TOOL_ARG_SIZE,
       .dest = &o->max_bytes,
       .lo = 1,
       .hi = TOOL_SIZE_MAX,
       .given = &max_given,
       .metavar = "SIZE",
       .help = "largest message in bytes; default 256M"},
      {.short_name = 'f',
       .kind = TOOL_ARG_INT,
       .dest = &factor,
       .lo = 2,
       .hi = 1 << 20,
       .metavar = "FACTOR",
       .help = "each size is the previous one times FACTOR; default 2"},
      {.short_name = 'i',
       .kind = TOOL_ARG_INT,
       .dest = &iters,
       .lo = 1,
       .hi = 100000000L,
       .metavar = "ITERS",
       .help = iters_help},
      {.short_name = 'w',
       .kind = TOOL_ARG_INT,
       .dest = &warmup,
       .lo = 0,
       .hi = 100000000L,
       .metavar = "WARMUP",
       .help = "untimed repetitions per size; default: a tenth of the timed\nones, 1 to 20"},
      {.short_name = 'd',
       .kind = TOOL_ARG_CUSTOM,
       .dest = &o->dtype,
       .parse = parse_dtype,
       .metavar = "DTYPE",
       .help = "element type: int8 uint8 int32 uint32 int64 uint64 float16\n"
               "bfloat16 float32 float64 (or i8 u8 i32 u32 i64 u64 f16 bf16 f32\n"
               "f64); default float32"},
      {.short_name = 'o',
       .kind = TOOL_ARG_CUSTOM,
       .dest = &o->op,
       .parse = parse_op,
       .metavar = "OP",
       .help = "sum prod min max band bor bxor avg; default sum"},
      {.short_name = 'a',
       .kind = TOOL_ARG_STRING,
       .dest = &alg_arg,
       .metavar = "ALG[,ALG]",
       .help = alg_help},
      {.short_name = 'c',
       .kind = TOOL_ARG_FLAG,
       .dest = &o->validate,
       .help = "check every result against the exact expected values (the\n"
               "inputs are small integers); exit code 1 if any differs"},
      {.long_name = "inplace",
       .kind = TOOL_ARG_FLAG,
       .dest = &o->inplace,
       .help = "reduce in place (MPIAR_IN_PLACE / MPI_IN_PLACE)"},
      {.long_name = "reproducible",
       .kind = TOOL_ARG_FLAG,
       .dest = &o->reproducible,
       .help = "also run every mpiar entry of the default list in reproducible mode\n"
               "(NAME/repro; with -a, name such entries yourself)"},
      {.long_name = "csv",
       .kind = TOOL_ARG_STRING,
       .dest = &o->csv_path,
       .metavar = "FILE",
       .help = "write one line per size and algorithm to FILE"},
      {.long_name = "json",
       .kind = TOOL_ARG_STRING,
       .dest = &o->json_path,
       .metavar = "FILE",
       .help = "write the whole run, with its summary, to FILE"},
      {.short_name = 'q',
       .long_name = "quiet",
       .kind = TOOL_ARG_FLAG,
       .dest = &o->quiet,
       .help = "no progress line on stderr"},
  };
  const tool_spec_t spec = {
      .prog = "mpiar-bench",
      .usage = "mpiexec -n P mpiar-bench [options]",
      .about = about,
      .epilogue = epilogue,
      .args = args,
      .nargs = (int)(sizeof args / sizeof args[0]),
  };
  int ex = tool_args_run(&spec, argc, argv);
  if (ex >= 0) {
    return ex;
  }
  o->factor = (size_t)factor;
  o->iters = (int)iters;
  o->warmup = (int)warmup;

  /* A single -b or -e alone moves the other bound when needed, as in nccl-tests. */
  if (min_given && !max_given && o->max_bytes < o->min_bytes) {
    o->max_bytes = o->min_bytes;
  }
  if (max_given && !min_given && o->min_bytes > o->max_bytes) {
    o->min_bytes = o->max_bytes;
  }
  if (o->min_bytes > o->max_bytes) {
    return tool_usage_error(&spec, "-b %zu is larger than -e %zu", o->min_bytes, o->max_bytes);
  }
  if (!mpiar_op_supported(o->dtype, o->op)) {
    return tool_usage_error(&spec, "-o %s is not defined on -d %s", mpiar_op_name(o->op),
                            mpiar_dtype_name(o->dtype));
  }
  char err[512];
  if (alg_arg != NULL) {
    /* The copy lives until the process ends: o->algs points into it. */
    static char storage[1024];
    if (strlen(alg_arg) >= sizeof storage) {
      return tool_usage_error(&spec, "-a: the list is too long");
    }
    strcpy(storage, alg_arg);
    if (parse_algorithms(storage, o, err, sizeof err) != 0) {
      return tool_usage_error(&spec, "%s", err);
    }
    for (int i = 0; i < o->nalgs; i++) {
      if (strcmp(o->algs[i], BENCH_ALG_MPI) == 0 && !bench_mpi_has_dtype(o->dtype)) {
        return tool_usage_error(&spec, "-a mpi: MPI has no predefined datatype for %s",
                                mpiar_dtype_name(o->dtype));
      }
    }
  } else {
    o->nalgs = 0; /* the default list, made once MPI tells whether the job spans nodes */
  }
  return -1;
}
