/*
 * Command-line options of mpiar-bench, in the style of the OSU micro-benchmarks and nccl-tests,
 * parsed by the tools' common parser (perf/common/tool.h) before MPI starts, so a bad argument
 * makes every rank exit with code 2 and none of them waits for the others.
 */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "algorithms/algorithms.h"
#include "base/common.h"
#include "base/settings.h"
#include "bench.h"
#include "tuning/tuning.h"
#include "common/tool.h"

int bench_mpi_has_dtype(mpiar_dtype_t dtype) {
  return mpiar__dtype_class(dtype) == MPIAR__DTYPE_INTEGER ||
         mpiar__dtype_class(dtype) == MPIAR__DTYPE_FLOAT;
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

static int parse_memory(const char *value, void *dest, char *err, size_t errlen) {
  if (strcmp(value, "shared") == 0 || strcmp(value, "malloc") == 0) {
    *(int *)dest = strcmp(value, "shared") == 0;
    return 0;
  }
  snprintf(err, errlen, "unknown memory '%s' (malloc or shared)", value);
  return -1;
}

static int parse_op(const char *value, void *dest, char *err, size_t errlen) {
  if (mpiar_op_from_name(value, dest) != MPIAR_SUCCESS) {
    snprintf(err, errlen, "unknown operation '%s' (sum prod min max band bor bxor avg)", value);
    return -1;
  }
  return 0;
}

static void list_algorithms(char *buf, size_t len);

/* "64K", "1M", "1536": the short form of a segment size in column names. */
static void short_size(size_t b, char *buf, size_t len) {
  if (b >= ((size_t)1 << 30) && b % ((size_t)1 << 30) == 0) {
    snprintf(buf, len, "%zuG", b >> 30);
  } else if (b >= ((size_t)1 << 20) && b % ((size_t)1 << 20) == 0) {
    snprintf(buf, len, "%zuM", b >> 20);
  } else if (b >= 1024 && b % 1024 == 0) {
    snprintf(buf, len, "%zuK", b >> 10);
  } else {
    snprintf(buf, len, "%zu", b);
  }
}

/* "ring", "ring/seg=1M", "ring/repro", "ring/seg=1M/repro", "auto/shared": a column's name. */
static void column_name(char *buf, size_t len, const char *base, size_t seg, int repro,
                        int shared) {
  char sz[24] = "";
  if (seg != 0) {
    short_size(seg, sz, sizeof sz);
  }
  snprintf(buf, len, "%s%s%s%s%s", base, seg ? BENCH_SEG_INFIX : "", sz,
           repro ? BENCH_REPRO_SUFFIX : "", shared ? BENCH_SHARED_SUFFIX : "");
}

/* Cut @p suffix off the end of @p name in place; @return 1 if it was there. */
static int cut_suffix(char *name, const char *suffix) {
  size_t len = strlen(name), k = strlen(suffix);
  if (len > k && strcmp(name + len - k, suffix) == 0) {
    name[len - k] = '\0';
    return 1;
  }
  return 0;
}

/*
 * Split a name into its registry part, segment and mode: @return 1 if name is a registry
 * algorithm, `auto`, `mpi`, or a segmented registry algorithm with "/seg=SIZE" (SIZE >= 4 KiB),
 * each of mpiar's optionally with BENCH_REPRO_SUFFIX, then BENCH_SHARED_SUFFIX, with *segment,
 * *repro and *shared set; 0 (with a reason in err) otherwise. *base is the registry's name,
 * `auto` or `mpi`.
 */
static int known_algorithm(char *name, const char **base, size_t *segment, int *repro, int *shared,
                           char *err, size_t errlen) {
  *segment = 0;
  *base = name;
  *repro = 0;
  /* "NAME/shared": an mpiar column on mpiar_alloc buffers; cut off in place like "/repro". */
  *shared = cut_suffix(name, BENCH_SHARED_SUFFIX);
  if (strcmp(name, BENCH_ALG_MPI) == 0) {
    if (*shared) {
      snprintf(err, errlen, "-a: 'mpi%s': MPI_Allreduce runs on ordinary buffers only",
               BENCH_SHARED_SUFFIX);
      return 0;
    }
    return 1;
  }
  /* "file:PATH": a schedule file (docs/schedules.md), the whole name its path. */
  if (strncmp(name, MPIAR__ALG_FILE_PREFIX, sizeof MPIAR__ALG_FILE_PREFIX - 1) == 0) {
    const mpiar__algorithm_t *a = mpiar__algorithm_find(name);
    if (a == NULL) {
      snprintf(err, errlen, "-a: '%.400s': no path after 'file:'", name);
      return 0;
    }
    *base = a->name;
    return 1;
  }
  /* "NAME/repro": an mpiar column in reproducible mode; the suffix is cut off in place (the
   * caller writes the column's name back). */
  *repro = cut_suffix(name, BENCH_REPRO_SUFFIX);
  if (strcmp(name, BENCH_ALG_AUTO) == 0) {
    *base = BENCH_ALG_AUTO;
    return 1;
  }
  if (*repro && strcmp(name, BENCH_ALG_MPI) == 0) {
    snprintf(err, errlen, "-a: 'mpi%s': MPI_Allreduce has no reproducible mode",
             BENCH_REPRO_SUFFIX);
    return 0;
  }
  char *seg = strstr(name, BENCH_SEG_INFIX);
  if (seg != NULL) {
    const char *size = seg + strlen(BENCH_SEG_INFIX);
    if (tool_parse_size(size, segment) != 0 || *segment < MPIAR__SEGMENT_MIN) {
      snprintf(err, errlen, "-a: '%s': the segment is not a size of at least 4K", name);
      return 0;
    }
  }
  /* The registry's name, with its parameter if it takes one ("recursive_multiplying/k=3"). */
  char reg[96];
  size_t len = seg ? (size_t)(seg - name) : strlen(name);
  snprintf(reg, sizeof reg, "%.*s", (int)(len < sizeof reg ? len : sizeof reg - 1), name);
  const mpiar__algorithm_t *a = len < sizeof reg ? mpiar__algorithm_find(reg) : NULL;
  if (a != NULL) {
    if (seg != NULL && !(a->flags & MPIAR__ALG_SEGMENTED)) {
      snprintf(err, errlen, "-a: '%s': %s takes no segment", name, a->name);
      return 0;
    }
    *base = a->name;
    return 1;
  }
  if (strchr(reg, '/') != NULL) {
    char why[512];
    mpiar__algorithm_explain(reg, why, sizeof why);
    snprintf(err, errlen, "-a: %.400s", why);
    return 0;
  }
  char names[1024];
  list_algorithms(names, sizeof names);
  snprintf(err, errlen,
           "-a: unknown algorithm '%s' (known: %s, and NAME/seg=SIZE for a segmented one)", name,
           names);
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
    const char *base = NULL;
    size_t seg = 0;
    int repro = 0;
    int shared = 0;
    if (!known_algorithm(p, &base, &seg, &repro, &shared, err, errlen)) {
      return -1;
    }
    if (seg != 0 || repro || shared) {
      /* The column's name in the canonical short form, as the default list writes it. */
      static char names[BENCH_MAX_ALGS][64];
      char *name = names[o->nalgs < BENCH_MAX_ALGS ? o->nalgs : 0];
      column_name(name, sizeof names[0], base, seg, repro, shared);
      p = name;
    }
    for (int i = 0; i < o->nalgs; i++) {
      if (strcmp(o->algs[i], p) == 0) {
        snprintf(err, errlen, "-a: algorithm '%.64s' is listed twice", p);
        return -1;
      }
    }
    if (o->nalgs == BENCH_MAX_ALGS) {
      snprintf(err, errlen, "-a: more than %d algorithms", BENCH_MAX_ALGS);
      return -1;
    }
    o->alg_base[o->nalgs] = base;
    o->alg_segment[o->nalgs] = seg;
    o->alg_repro[o->nalgs] = repro;
    o->alg_shared[o->nalgs] = shared;
    o->algs[o->nalgs++] = p;
    if (comma == NULL) {
      return 0;
    }
    p = comma + 1;
  }
}

/* Append one column to the default list; @return -1 when it is full. */
static int add_column(bench_opts_t *o, const char *base, size_t seg, int repro) {
  /* The names live until the process ends. */
  static char names[BENCH_MAX_ALGS][64];
  if (o->nalgs + 1 > BENCH_MAX_ALGS - 1) { /* room for `mpi` */
    return -1;
  }
  o->alg_base[o->nalgs] = base;
  o->alg_segment[o->nalgs] = seg;
  o->alg_repro[o->nalgs] = repro;
  if (seg == 0 && !repro) {
    o->algs[o->nalgs] = base;
  } else {
    column_name(names[o->nalgs], sizeof names[0], base, seg, repro, 0);
    o->algs[o->nalgs] = names[o->nalgs];
  }
  o->nalgs++;
  return 0;
}

int bench_default_algorithms(bench_opts_t *o, int multi_node, char *err, size_t errlen) {
  int n = mpiar_algorithm_count();
  o->nalgs = 0;
  for (int i = 0; i <= n; i++) {
    const char *name = i < n ? mpiar_algorithm_name(i) : BENCH_ALG_AUTO;
    const mpiar__algorithm_t *a = i < n ? mpiar__algorithm_find(name) : NULL;
    int hier = a != NULL && (a->flags & MPIAR__ALG_HIERARCHICAL);
    if (hier && !multi_node) {
      continue; /* its flat equivalent on one node; -a names it anyway */
    }
    if (a != NULL && (a->flags & MPIAR__ALG_MANUAL)) {
      continue; /* not an automatic candidate yet: measured when -a names it */
    }
    /* Segment columns for the flat segmented algorithms; a hierarchical one's segments are
     * asked for by name (-a hier_ring/seg=1M). */
    int segmented = a != NULL && (a->flags & MPIAR__ALG_SEGMENTED) && !hier;
    int ncol = 1 + (segmented ? o->nsegs : 0);
    for (int k = -1; k < ncol - 1; k++) {
      size_t seg = k < 0 ? 0 : o->segs[k];
      if (add_column(o, name, seg, 0) != 0 ||
          (o->reproducible && seg == 0 && add_column(o, name, 0, 1) != 0)) {
        snprintf(err, errlen,
                 "the registry and its segments make more than the %d columns this build "
                 "compares (use -a or fewer --segments)",
                 BENCH_MAX_ALGS - 1);
        return -1;
      }
    }
  }
  if (bench_mpi_has_dtype(o->dtype)) {
    o->alg_base[o->nalgs] = BENCH_ALG_MPI;
    o->algs[o->nalgs++] = BENCH_ALG_MPI;
  } else {
    o->mpi_dropped = 1;
  }
  return 0;
}

int bench_shared_list(bench_opts_t *o, char *err, size_t errlen) {
  static char names[BENCH_MAX_ALGS][72];
  bench_opts_t in = *o;
  int mpi = 0, plain_auto = 0;
  o->nalgs = 0;
  for (int a = 0; a <= in.nalgs; a++) {
    const int extra = a == in.nalgs; /* after the list: `auto` on ordinary buffers, then `mpi` */
    if (!extra && strcmp(in.algs[a], BENCH_ALG_MPI) == 0) {
      mpi = 1;
      continue;
    }
    if (!extra && strcmp(in.algs[a], BENCH_ALG_AUTO) == 0) {
      plain_auto = 1;
    }
    if (extra && !plain_auto) {
      break;
    }
    if (o->nalgs >= BENCH_MAX_ALGS - 1) { /* room for `mpi` */
      snprintf(err, errlen, "-m shared: more than %d columns", BENCH_MAX_ALGS);
      return -1;
    }
    const int k = o->nalgs;
    o->alg_base[k] = extra ? BENCH_ALG_AUTO : in.alg_base[a];
    o->alg_segment[k] = extra ? 0 : in.alg_segment[a];
    o->alg_repro[k] = extra ? 0 : in.alg_repro[a];
    o->alg_shared[k] = !extra;
    if (extra) {
      o->algs[k] = BENCH_ALG_AUTO;
    } else if (in.alg_shared[a]) {
      o->algs[k] = in.algs[a];
    } else {
      column_name(names[k], sizeof names[k], in.alg_base[a], in.alg_segment[a], in.alg_repro[a], 1);
      o->algs[k] = names[k];
    }
    o->nalgs++;
  }
  for (int a = 0; a < o->nalgs; a++) {
    for (int b = 0; b < a; b++) {
      if (strcmp(o->algs[a], o->algs[b]) == 0) {
        snprintf(err, errlen,
                 "-m shared: '%.64s' is listed twice (-a names it with and without %s)", o->algs[a],
                 BENCH_SHARED_SUFFIX);
        return -1;
      }
    }
  }
  if (mpi) {
    o->alg_base[o->nalgs] = BENCH_ALG_MPI;
    o->alg_segment[o->nalgs] = 0;
    o->alg_repro[o->nalgs] = 0;
    o->alg_shared[o->nalgs] = 0;
    o->algs[o->nalgs++] = BENCH_ALG_MPI;
  }
  return 0;
}

static const char about[] =
    "Times every allreduce algorithm of mpiar, its automatic choice and MPI_Allreduce\n"
    "side by side over a sweep of message sizes. The algorithms run interleaved at each\n"
    "size, in an order shuffled anew for every repetition (the same on every rank); each\n"
    "repetition is timed between barriers and its time is that of the slowest rank.\n"
    "\n"
    "The point-to-point limit of a size bounds what any of these schedules can move:\n"
    "each repetition also runs, interleaved with the algorithms, a paired\n"
    "MPI_Isend/MPI_Irecv exchange of the 2(p-1)/p * bytes that a bandwidth-optimal\n"
    "allreduce moves per rank, and, for every algorithm that runs, its schedule's own\n"
    "sends and receives (the same peers, message sizes and counts) posted all at once\n"
    "with no reduction and no waiting between steps. The limit is the fastest of these\n"
    "exchanges, best repetition: a schedule cannot move its messages faster than with\n"
    "its reductions and dependencies taken away.\n"
    "\n"
    "The memory floor of a size is what an allreduce must read and write on a node (every\n"
    "rank's input read once, every output written once: 2 x ranks per node x size bytes)\n"
    "over the node's memory bandwidth, measured before the sweep with every rank\n"
    "streaming through a buffer larger than the last-level cache at once (and again\n"
    "after it, to show drift); each column's % of the floor is floor time / its time.";

static const char epilogue[] =
    "Output (rank 0, stdout): a table with each algorithm's median time in microseconds\n"
    "and its speedup vs MPI = time(MPI_Allreduce) / time(algorithm) (> 1: faster than\n"
    "MPI), the point-to-point limit, and the best mpiar bus bandwidth as a percentage of\n"
    "it (busbw = bytes / time * 2(p-1)/p, as in nccl-tests); then the median speedups\n"
    "over small (<= 4 KiB), medium and large (>= 4 MiB) sizes; and the regret of auto\n"
    "and of MPI_Allreduce per size: time / the best column's - 1, the best of every\n"
    "algorithm and segment size measured in the same run (median and worst over the\n"
    "sizes; auto's choices come from MPIAR_TUNING_FILE where it applies). A progress\n"
    "line goes to stderr when it is a terminal.";

int bench_parse_args(int argc, char **argv, bench_opts_t *o) {
  memset(o, 0, sizeof *o);
  o->min_bytes = BENCH_DEFAULT_MIN_BYTES;
  o->max_bytes = BENCH_DEFAULT_MAX_BYTES;
  o->dtype = MPIAR_FLOAT32;
  o->op = MPIAR_SUM;
  long factor = 2;
  long iters = 0;
  long min_iters = 0;
  long warmup = -1;
  const char *alg_arg = NULL;
  int min_given = 0;
  int max_given = 0;
  int factor_given = 0;
  char iters_help[160];
  snprintf(iters_help, sizeof iters_help,
           "timed repetitions per size; default: scaled with the size\n"
           "(%d at the smallest sizes down to %d for %zu MiB and more)",
           BENCH_AUTO_ITERS_MAX, BENCH_AUTO_ITERS_MIN,
           (BENCH_AUTO_ITER_BYTES / BENCH_AUTO_ITERS_MIN) >> 20);
  char names[1024];
  list_algorithms(names, sizeof names);
  char alg_help[2048];
  snprintf(alg_help, sizeof alg_help,
           "algorithms to compare, in order, from\n"
           "%s\n"
           "(auto: mpiar's own choice, mpi: MPI_Allreduce), NAME/seg=SIZE\n"
           "for a segmented one with a fixed segment (ring/seg=1M),\n"
           "NAME/repro for one in reproducible mode and NAME/shared for one on\n"
           "mpiar_alloc buffers (the zero-copy path); default\n"
           "all of them, the flat segmented ones also with each --segments size\n"
           "(mpi is left out for float16 and bfloat16, which MPI lacks).\n"
           "For avg, mpi runs MPI_Allreduce(MPI_SUM) and divides.",
           names);
  size_t segs[8];
  int nsegs = 0, segs_given = 0, no_segs = 0;
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
      {.long_name = "sizes",
       .kind = TOOL_ARG_SIZE_LIST,
       .dest = o->sizes,
       .nitems = &o->nsizes,
       .max_items = (int)(sizeof o->sizes / sizeof o->sizes[0]),
       .lo = 1,
       .hi = TOOL_SIZE_MAX,
       .metavar = "LIST",
       .help = "the sizes to run, in increasing order (8,16M,64M), instead of\n"
               "the sweep of -b, -e and -f"},
      {.short_name = 'f',
       .kind = TOOL_ARG_INT,
       .dest = &factor,
       .given = &factor_given,
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
      {.long_name = "min-iters",
       .kind = TOOL_ARG_INT,
       .dest = &min_iters,
       .lo = 1,
       .hi = 100000000L,
       .metavar = "N",
       .help = "without -i: at least N repetitions per size (default 10);\n"
               "more give steadier medians at large sizes"},
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
      {.short_name = 'm',
       .long_name = "memory",
       .kind = TOOL_ARG_CUSTOM,
       .dest = &o->shared_mode,
       .parse = parse_memory,
       .metavar = "MEMORY",
       .help = "malloc (default) or shared: every mpiar column on mpiar_alloc\n"
               "buffers (NAME/shared, the zero-copy path of docs/shm.md), with\n"
               "auto on ordinary buffers (mpiar's MPI path) and mpi beside them;\n"
               "the default list then has no segment columns"},
      {.long_name = "floor-buffer",
       .kind = TOOL_ARG_SIZE,
       .dest = &o->floor_buffer,
       .lo = 4096,
       .hi = TOOL_SIZE_MAX,
       .metavar = "SIZE",
       .help = "bytes per rank of the pass that measures the node's memory\n"
               "bandwidth for the memory floor; default: the ranks of a node\n"
               "together twice the last-level cache, at least 64M each"},
      {.short_name = 'c',
       .kind = TOOL_ARG_FLAG,
       .dest = &o->validate,
       .help = "check every result against the exact expected values (the\n"
               "inputs are small integers); exit code 1 if any differs"},
      {.long_name = "in-place",
       .kind = TOOL_ARG_FLAG,
       .dest = &o->inplace,
       .help = "reduce in place (MPIAR_IN_PLACE / MPI_IN_PLACE), the form training\n"
               "uses: each run starts from the input copied into the result\n"
               "buffer, outside the timing"},
      {.long_name = "inplace",
       .kind = TOOL_ARG_FLAG,
       .dest = &o->inplace,
       .help = "the same as --in-place"},
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
      {.long_name = "segments",
       .kind = TOOL_ARG_SIZE_LIST,
       .dest = segs,
       .nitems = &nsegs,
       .max_items = 8,
       .lo = (long long)MPIAR__SEGMENT_MIN,
       .hi = TOOL_SIZE_MAX,
       .given = &segs_given,
       .metavar = "LIST",
       .help = "segment sizes of the default segmented columns; default\n"
               "mpiar-tune's candidates, 64K,256K,1M,4M,16M"},
      {.long_name = "no-segments",
       .kind = TOOL_ARG_FLAG,
       .dest = &no_segs,
       .help = "no segmented columns in the default list"},
      {.long_name = "reproducible",
       .kind = TOOL_ARG_FLAG,
       .dest = &o->reproducible,
       .help = "also run every unsegmented mpiar column of the default list in\n"
               "reproducible mode (NAME/repro; with -a, name such columns)"},
      {.long_name = "collective",
       .kind = TOOL_ARG_STRING,
       .dest = &o->collective,
       .metavar = "NAME",
       .help = "allreduce (default), reduce_scatter or allgather: the other two\n"
               "compare their registry, auto and MPI_Reduce_scatter_block /\n"
               "MPI_Allgather (size = p blocks; -a names their algorithms)"},
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
  o->min_iters = (int)min_iters;
  o->warmup = (int)warmup;

  /* A single -b or -e alone moves the other bound when needed, as in nccl-tests. */
  if (min_given && !max_given && o->max_bytes < o->min_bytes) {
    o->max_bytes = o->min_bytes;
  }
  if (max_given && !min_given && o->min_bytes > o->max_bytes) {
    o->min_bytes = o->max_bytes;
  }
  for (int i = 1; i < o->nsizes; i++) {
    if (o->sizes[i] <= o->sizes[i - 1]) {
      return tool_usage_error(&spec, "--sizes: %zu does not follow %zu: the sizes must increase",
                              o->sizes[i], o->sizes[i - 1]);
    }
  }
  if (o->nsizes > 0 && (min_given || max_given || factor_given)) {
    return tool_usage_error(&spec, "--sizes names the sizes: no -b, -e or -f with it");
  }
  if (o->shared_mode && o->collective != NULL && strcmp(o->collective, "allreduce") != 0) {
    return tool_usage_error(&spec, "-m shared measures the allreduce only");
  }
  if (o->min_bytes > o->max_bytes) {
    return tool_usage_error(&spec, "-b %zu is larger than -e %zu", o->min_bytes, o->max_bytes);
  }
  if (!mpiar_op_supported(o->dtype, o->op)) {
    return tool_usage_error(&spec, "-o %s is not defined on -d %s", mpiar_op_name(o->op),
                            mpiar_dtype_name(o->dtype));
  }
  char err[2048];
  if (o->collective != NULL && strcmp(o->collective, "allreduce") == 0) {
    o->collective = NULL;
  }
  if (o->collective != NULL) {
    if (strcmp(o->collective, "reduce_scatter") != 0 && strcmp(o->collective, "allgather") != 0) {
      return tool_usage_error(&spec, "--collective %s: allreduce, reduce_scatter or allgather",
                              o->collective);
    }
    o->collective_algs = alg_arg;
    return -1;
  }
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
    if (o->shared_mode && bench_shared_list(o, err, sizeof err) != 0) {
      return tool_usage_error(&spec, "%s", err);
    }
  } else {
    if (!segs_given) {
      for (int i = 0; i < mpiar__tuning_nsegments && i < 8; i++) {
        segs[nsegs++] = mpiar__tuning_segments[i];
      }
    }
    /* The default list is made once MPI tells whether the job spans nodes. */
    o->nalgs = 0;
    /* The zero-copy path sends no messages: a segment changes nothing there. */
    o->nsegs = no_segs || o->shared_mode ? 0 : nsegs;
    memcpy(o->segs, segs, sizeof o->segs);
  }
  if (alg_arg != NULL && (segs_given || no_segs)) {
    return tool_usage_error(&spec, "--segments and --no-segments shape the default list; with "
                                   "-a name the columns (ring/seg=1M)");
  }
  if (segs_given && no_segs) {
    return tool_usage_error(&spec, "--segments and --no-segments contradict each other");
  }
  return -1;
}
