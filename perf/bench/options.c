/*
 * Command-line parsing of mpiar-bench, in the style of the OSU micro-benchmarks and nccl-tests.
 * It needs no MPI: every rank parses the same arguments the same way before MPI starts, so a
 * bad argument makes every rank exit with code 2 and none of them waits for the others.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "base/common.h"
#include "base/settings.h"

void bench_usage(FILE *f) {
  fprintf(f,
          "Usage: mpiexec -n P mpiar-bench [options]\n"
          "\n"
          "Times every allreduce algorithm of mpiar, its automatic choice and MPI_Allreduce\n"
          "side by side over a sweep of message sizes. The algorithms run interleaved\n"
          "(A B C A B C ...) at each size; each repetition is timed between barriers and its\n"
          "time is that of the slowest rank. The point-to-point limit of each size is the\n"
          "bandwidth of a paired MPI_Isend/MPI_Irecv exchange of the 2(p-1)/p * bytes that\n"
          "a bandwidth-optimal allreduce moves per rank.\n"
          "\n"
          "Options:\n"
          "  -b SIZE        smallest message in bytes (K, M, G suffixes: powers of 1024);\n"
          "                 default 4\n"
          "  -e SIZE        largest message in bytes; default 256M\n"
          "  -f FACTOR      each size is the previous one times FACTOR (an integer >= 2);\n"
          "                 default 2\n"
          "  -i ITERS       timed repetitions per size; default: scaled with the size\n"
          "                 (%d at the smallest sizes down to %d for %zu MiB and more)\n"
          "  -w WARMUP      untimed repetitions per size; default: a tenth of the timed\n"
          "                 ones, 1 to 20\n"
          "  -d DTYPE       element type: int8 uint8 int32 uint32 int64 uint64 float16\n"
          "                 bfloat16 float32 float64 (or i8 u8 i32 u32 i64 u64 f16 bf16 f32\n"
          "                 f64); default float32\n"
          "  -o OP          sum prod min max band bor bxor avg; default sum\n"
          "  -a ALG[,ALG]   algorithms to compare, in order: the registry's\n"
          "                 (",
          BENCH_AUTO_ITERS_MAX, BENCH_AUTO_ITERS_MIN,
          (BENCH_AUTO_ITER_BYTES / BENCH_AUTO_ITERS_MIN) >> 20);
  int n = mpiar_algorithm_count();
  for (int i = 0; i < n; i++) {
    fprintf(f, "%s%s", i ? ", " : "", mpiar_algorithm_name(i));
  }
  fprintf(f, "),\n"
             "                 auto (mpiar's own choice) and mpi (MPI_Allreduce); default all\n"
             "                 of them (mpi is left out for float16 and bfloat16, which MPI\n"
             "                 lacks). For avg, mpi runs MPI_Allreduce(MPI_SUM) and divides.\n"
             "  -c             check every result against the exact expected values (the\n"
             "                 inputs are small integers); exit code 1 if any differs\n"
             "  --inplace      reduce in place (MPIAR_IN_PLACE / MPI_IN_PLACE)\n"
             "  --csv FILE     write one line per size and algorithm to FILE\n"
             "  --json FILE    write the whole run, with its summary, to FILE\n"
             "  -q, --quiet    no progress line on stderr\n"
             "  -h, --help     this text\n"
             "\n"
             "Output (rank 0, stdout): a table with each algorithm's median time in microseconds\n"
             "and its speedup vs MPI = time(MPI_Allreduce) / time(algorithm) (> 1: faster than\n"
             "MPI), the point-to-point limit, and the best mpiar bus bandwidth as a percentage of\n"
             "it (busbw = bytes / time * 2(p-1)/p, as in nccl-tests); then the median speedups\n"
             "over small (<= 4 KiB), medium and large (>= 4 MiB) sizes.\n"
             "\n"
             "Exit codes: 0 success, 1 a failed check or run-time error, 2 bad arguments.\n");
}

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

/* Write a message into err and return BENCH_PARSE_ERROR, so each check is one line. */
static int fail(char *err, size_t errlen, const char *fmt, ...) MPIAR__PRINTF(3, 4);
static int fail(char *err, size_t errlen, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
  return BENCH_PARSE_ERROR;
}

/* Parse a decimal integer in [lo, hi] with nothing after it. @return 0 or -1. */
static int parse_int(const char *text, long lo, long hi, long *out) {
  if (text == NULL || *text == '\0') {
    return -1;
  }
  errno = 0;
  char *end = NULL;
  long v = strtol(text, &end, 10);
  if (errno != 0 || *end != '\0' || v < lo || v > hi) {
    return -1;
  }
  *out = v;
  return 0;
}

/* @return 1 if name is a registry algorithm, `auto` or `mpi`. */
static int known_algorithm(const char *name) {
  if (strcmp(name, BENCH_ALG_AUTO) == 0 || strcmp(name, BENCH_ALG_MPI) == 0) {
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

/* The list of names, for error messages. */
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
 * argument that the caller keeps alive for the whole run.
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
      return fail(err, errlen, "-a: empty algorithm name in the list");
    }
    if (!known_algorithm(p)) {
      char names[256];
      list_algorithms(names, sizeof names);
      return fail(err, errlen, "-a: unknown algorithm '%s' (known: %s)", p, names);
    }
    for (int i = 0; i < o->nalgs; i++) {
      if (strcmp(o->algs[i], p) == 0) {
        return fail(err, errlen, "-a: algorithm '%s' is listed twice", p);
      }
    }
    if (o->nalgs == BENCH_MAX_ALGS) {
      return fail(err, errlen, "-a: more than %d algorithms", BENCH_MAX_ALGS);
    }
    o->algs[o->nalgs++] = p;
    if (comma == NULL) {
      return BENCH_PARSE_OK;
    }
    p = comma + 1;
  }
}

/* Every registry algorithm, then `auto`, then `mpi` when MPI has the datatype. */
static int default_algorithms(bench_opts_t *o, char *err, size_t errlen) {
  int n = mpiar_algorithm_count();
  if (n + 2 > BENCH_MAX_ALGS) {
    return fail(err, errlen, "the registry has %d algorithms; this build compares at most %d", n,
                BENCH_MAX_ALGS - 2);
  }
  o->nalgs = 0;
  for (int i = 0; i < n; i++) {
    o->algs[o->nalgs++] = mpiar_algorithm_name(i);
  }
  o->algs[o->nalgs++] = BENCH_ALG_AUTO;
  if (bench_mpi_has_dtype(o->dtype)) {
    o->algs[o->nalgs++] = BENCH_ALG_MPI;
  } else {
    o->mpi_dropped = 1;
  }
  return BENCH_PARSE_OK;
}

int bench_parse_args(int argc, char **argv, bench_opts_t *o, char *err, size_t errlen) {
  memset(o, 0, sizeof *o);
  o->min_bytes = BENCH_DEFAULT_MIN_BYTES;
  o->max_bytes = BENCH_DEFAULT_MAX_BYTES;
  o->factor = 2;
  o->iters = 0;
  o->warmup = -1;
  o->dtype = MPIAR_FLOAT32;
  o->op = MPIAR_SUM;
  const char *alg_arg = NULL;
  int min_given = 0;
  int max_given = 0;

  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i];
    /* Options that take no value. */
    if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
      return BENCH_PARSE_HELP;
    }
    if (strcmp(arg, "-c") == 0) {
      o->validate = 1;
      continue;
    }
    if (strcmp(arg, "--inplace") == 0) {
      o->inplace = 1;
      continue;
    }
    if (strcmp(arg, "-q") == 0 || strcmp(arg, "--quiet") == 0) {
      o->quiet = 1;
      continue;
    }

    /* Options with a value: "-b 4K", "-b4K", "--csv FILE" or "--csv=FILE". */
    char key = 0;
    const char *name = arg;
    const char *value = NULL;
    if (strncmp(arg, "--csv", 5) == 0 || strncmp(arg, "--json", 6) == 0) {
      size_t klen = strncmp(arg, "--csv", 5) == 0 ? 5 : 6;
      if (arg[klen] == '=') {
        value = arg + klen + 1;
      } else if (arg[klen] != '\0') {
        return fail(err, errlen, "unknown option '%s'", arg);
      }
      key = klen == 5 ? 'C' : 'J';
      name = klen == 5 ? "--csv" : "--json";
    } else if (arg[0] == '-' && arg[1] != '\0' && arg[1] != '-' && strchr("beifwdoa", arg[1])) {
      key = arg[1];
      if (arg[2] != '\0') {
        value = arg + 2;
      }
    } else {
      return fail(err, errlen, "unknown option '%s'", arg);
    }
    if (value == NULL) {
      if (i + 1 >= argc) {
        return fail(err, errlen, "option '%s' needs a value", arg);
      }
      value = argv[++i];
    }

    long v = 0;
    switch (key) {
    case 'b':
    case 'e': {
      size_t s = 0;
      if (mpiar__parse_size(value, &s) != 0 || s == 0) {
        return fail(err, errlen,
                    "-%c: '%s' is not a size in bytes (a positive integer, optionally with K, M "
                    "or G)",
                    key, value);
      }
      if (s > ((size_t)1 << 40)) {
        return fail(err, errlen, "-%c: %s is larger than 1 TiB", key, value);
      }
      if (key == 'b') {
        o->min_bytes = s;
        min_given = 1;
      } else {
        o->max_bytes = s;
        max_given = 1;
      }
      break;
    }
    case 'f':
      if (parse_int(value, 2, 1 << 20, &v) != 0) {
        return fail(err, errlen, "-f: '%s' is not an integer factor >= 2", value);
      }
      o->factor = (size_t)v;
      break;
    case 'i':
      if (parse_int(value, 1, 100000000L, &v) != 0) {
        return fail(err, errlen, "-i: '%s' is not a repetition count >= 1", value);
      }
      o->iters = (int)v;
      break;
    case 'w':
      if (parse_int(value, 0, 100000000L, &v) != 0) {
        return fail(err, errlen, "-w: '%s' is not a repetition count >= 0", value);
      }
      o->warmup = (int)v;
      break;
    case 'd':
      if (mpiar_dtype_from_name(value, &o->dtype) != MPIAR_SUCCESS) {
        return fail(err, errlen,
                    "-d: unknown datatype '%s' (int8 uint8 int32 uint32 int64 uint64 float16 "
                    "bfloat16 float32 float64)",
                    value);
      }
      break;
    case 'o':
      if (mpiar_op_from_name(value, &o->op) != MPIAR_SUCCESS) {
        return fail(err, errlen, "-o: unknown operation '%s' (sum prod min max band bor bxor avg)",
                    value);
      }
      break;
    case 'a':
      alg_arg = value;
      break;
    case 'C':
    case 'J':
      if (*value == '\0') {
        return fail(err, errlen, "%s: empty file name", name);
      }
      if (key == 'C') {
        o->csv_path = value;
      } else {
        o->json_path = value;
      }
      break;
    default:
      return fail(err, errlen, "unknown option '%s'", arg);
    }
  }

  /* A single -b or -e alone moves the other bound when needed, as in nccl-tests. */
  if (min_given && !max_given && o->max_bytes < o->min_bytes) {
    o->max_bytes = o->min_bytes;
  }
  if (max_given && !min_given && o->min_bytes > o->max_bytes) {
    o->min_bytes = o->max_bytes;
  }
  if (o->min_bytes > o->max_bytes) {
    return fail(err, errlen, "-b %zu is larger than -e %zu", o->min_bytes, o->max_bytes);
  }
  if (!mpiar_op_supported(o->dtype, o->op)) {
    return fail(err, errlen, "operation %s is not defined on %s", mpiar_op_name(o->op),
                mpiar_dtype_name(o->dtype));
  }
  if (alg_arg != NULL) {
    /* The copy lives until the process ends: o->algs points into it. */
    static char storage[1024];
    if (strlen(alg_arg) >= sizeof storage) {
      return fail(err, errlen, "-a: the list is too long");
    }
    strcpy(storage, alg_arg);
    int rc = parse_algorithms(storage, o, err, errlen);
    if (rc != BENCH_PARSE_OK) {
      return rc;
    }
    for (int i = 0; i < o->nalgs; i++) {
      if (strcmp(o->algs[i], BENCH_ALG_MPI) == 0 && !bench_mpi_has_dtype(o->dtype)) {
        return fail(err, errlen, "-a mpi: MPI has no predefined datatype for %s",
                    mpiar_dtype_name(o->dtype));
      }
    }
  } else {
    int rc = default_algorithms(o, err, errlen);
    if (rc != BENCH_PARSE_OK) {
      return rc;
    }
  }
  return BENCH_PARSE_OK;
}
