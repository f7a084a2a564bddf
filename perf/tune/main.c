/*
 * mpiar-tune: run on the communicator to tune (mpiexec -n P mpiar-tune -o tuning.json), it
 * calibrates the cost model, measures every algorithm and segment size over a size sweep, picks
 * the winner per size range and writes a tuning file that the library loads through
 * MPIAR_TUNING_FILE (docs/tuning.md). The report goes to stdout (rank 0), progress to stderr.
 */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "algorithms/algorithms.h"
#include "common/tool.h"
#include "core/inspect.h"
#include "schedule/topology.h"
#include "tuning/tuning.h"
#include "tune.h"

/* ---- Options ------------------------------------------------------------------------------ */

static int parse_dtypes(const char *value, void *dest, char *err, size_t errlen) {
  tune_opts_t *o = dest;
  char buf[256];
  if (strlen(value) >= sizeof buf) {
    snprintf(err, errlen, "the list is too long");
    return -1;
  }
  strcpy(buf, value);
  o->ndtypes = 0;
  for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok != NULL;
       tok = strtok_r(NULL, ",", &save)) {
    mpiar_dtype_t d;
    if (mpiar_dtype_from_name(tok, &d) != MPIAR_SUCCESS) {
      snprintf(err, errlen, "unknown datatype '%s' (int8 ... float64, f32, bf16, ...)", tok);
      return -1;
    }
    for (int i = 0; i < o->ndtypes; i++) {
      if (o->dtypes[i] == d) {
        snprintf(err, errlen, "datatype '%s' is listed twice", tok);
        return -1;
      }
    }
    o->dtypes[o->ndtypes++] = d;
  }
  if (o->ndtypes == 0 || value[0] == ',' || value[strlen(value) - 1] == ',' ||
      strstr(value, ",,") != NULL) {
    snprintf(err, errlen, "empty item in '%s'", value);
    return -1;
  }
  return 0;
}

static int parse_named_only(const char *value, void *dest, char *err, size_t errlen) {
  tune_opts_t *o = dest;
  if (strcmp(value, "yes") == 0) {
    o->named_only = 1;
  } else if (strcmp(value, "no") == 0) {
    o->named_only = 0;
  } else if (strcmp(value, "auto") == 0) {
    o->named_only = -1;
  } else {
    snprintf(err, errlen, "'%s' is not yes, no or auto", value);
    return -1;
  }
  return 0;
}

static const char about[] =
    "Tunes mpiar's automatic choice for the communicator it runs on and writes a tuning\n"
    "file for MPIAR_TUNING_FILE. It calibrates the cost model (alpha and beta per level:\n"
    "pairs of ranks inside a node, and pairs of nodes where there are several; gamma per\n"
    "element type from the reduction kernels), printing each fit with its residuals; then\n"
    "it times every algorithm with every candidate segment size over a sweep of sizes\n"
    "(interleaved in shuffled orders, median of the slowest rank, as mpiar-bench times),\n"
    "picks the fastest per size and writes the size ranges, the fitted parameters, the\n"
    "communicator (ranks, nodes, ranks per node) and a fingerprint of the machine (MPI\n"
    "library, CPU, kernel level). The library applies the table on communicators like this one on this machine,\n"
    "and uses the fitted parameters in its cost model elsewhere.";

static const char epilogue[] =
    "Output: the report on stdout (rank 0), progress on stderr (-q: none). The file is\n"
    "written at the end (through a temporary file, then renamed); an -o that cannot be\n"
    "written (a directory, a missing or read-only directory) is refused before any\n"
    "measurement, with exit code 2. MPIAR_ALGORITHM,\n"
    "MPIAR_SEGMENT_BYTES and MPIAR_TUNING_FILE are ignored while tuning. The full sweep\n"
    "takes about a minute on two ranks; --quick takes seconds (a few sizes, few\n"
    "repetitions) and is meant for tests, not for tables to keep.";

static int parse_args(int argc, char **argv, tune_opts_t *o) {
  memset(o, 0, sizeof *o);
  o->min_bytes = 4;
  o->max_bytes = (size_t)256 << 20;
  o->warmup = -1;
  o->named_only = -1;
  o->dtypes[0] = MPIAR_FLOAT32;
  o->ndtypes = 1;
  long factor = 2, iters = 0, warmup = -1, min_iters = 0;
  double tie_pct = 1.0;
  int min_given = 0, max_given = 0, factor_given = 0, seg_given = 0;
  const tool_arg_t args[] = {
      {.short_name = 'o',
       .long_name = "output",
       .kind = TOOL_ARG_STRING,
       .dest = &o->output,
       .metavar = "FILE",
       .help = "the tuning file to write (required)"},
      {.long_name = "quick",
       .kind = TOOL_ARG_FLAG,
       .dest = &o->quick,
       .help = "a short run: 4 B .. 1 MiB by 4, segments 64K and 256K, few\n"
               "repetitions"},
      {.short_name = 'b',
       .kind = TOOL_ARG_SIZE,
       .dest = &o->min_bytes,
       .lo = 1,
       .hi = TOOL_SIZE_MAX,
       .given = &min_given,
       .metavar = "SIZE",
       .help = "smallest message of the sweep; default 4"},
      {.short_name = 'e',
       .kind = TOOL_ARG_SIZE,
       .dest = &o->max_bytes,
       .lo = 1,
       .hi = TOOL_SIZE_MAX,
       .given = &max_given,
       .metavar = "SIZE",
       .help = "largest message of the sweep; default 256M"},
      {.short_name = 'f',
       .kind = TOOL_ARG_INT,
       .dest = &factor,
       .lo = 2,
       .hi = 1 << 20,
       .given = &factor_given,
       .metavar = "FACTOR",
       .help = "each size is the previous one times FACTOR; default 2"},
      {.short_name = 'i',
       .kind = TOOL_ARG_INT,
       .dest = &iters,
       .lo = 1,
       .hi = 100000000L,
       .metavar = "ITERS",
       .help = "timed repetitions per size; default: scaled with the size as in\nmpiar-bench"},
      {.long_name = "min-iters",
       .kind = TOOL_ARG_INT,
       .dest = &min_iters,
       .lo = 1,
       .hi = 100000000L,
       .metavar = "N",
       .help = "without -i: at least N repetitions per size (default 10)"},
      {.short_name = 'w',
       .kind = TOOL_ARG_INT,
       .dest = &warmup,
       .lo = 0,
       .hi = 100000000L,
       .metavar = "WARMUP",
       .help = "untimed repetitions per size; default a tenth, 1 to 20"},
      {.short_name = 'd',
       .long_name = "dtypes",
       .kind = TOOL_ARG_CUSTOM,
       .dest = o,
       .parse = parse_dtypes,
       .metavar = "LIST",
       .help = "element types to make tables for; default float32 (the\n"
               "others use the model with their own gamma)"},
      {.long_name = "segments",
       .kind = TOOL_ARG_SIZE_LIST,
       .dest = o->segments,
       .nitems = &o->nsegments,
       .max_items = TUNE_MAX_SEGMENTS,
       .lo = (long long)MPIAR__SEGMENT_MIN,
       .hi = TOOL_SIZE_MAX,
       .given = &seg_given,
       .metavar = "LIST",
       .help = "segment sizes tried for segmented algorithms (besides none);\n"
               "default 64K,256K,1M,4M,16M"},
      {.long_name = "tie",
       .kind = TOOL_ARG_DOUBLE,
       .dest = &tie_pct,
       .dlo = 0,
       .dhi = 50,
       .metavar = "PCT",
       .help = "keep the previous size's winner when it is within PCT percent\n"
               "of the fastest; default 1"},
      {.long_name = "schedules",
       .kind = TOOL_ARG_STRING,
       .dest = &o->schedules,
       .metavar = "LIST",
       .help = "schedule files to sweep beside the registry, comma-separated\n"
               "(docs/schedules.md); each runs at the sizes it serves"},
      {.long_name = "named-only",
       .kind = TOOL_ARG_CUSTOM,
       .dest = o,
       .parse = parse_named_only,
       .metavar = "yes|no|auto",
       .help = "also sweep the named-only entries (swing, trees, direct, ...);\n"
               "they enter the table only where they resolve a win; default\n"
               "auto: on more than 2 ranks"},
      {.short_name = 'q',
       .long_name = "quiet",
       .kind = TOOL_ARG_FLAG,
       .dest = &o->quiet,
       .help = "no progress on stderr"},
  };
  const tool_spec_t spec = {
      .prog = "mpiar-tune",
      .usage = "mpiexec -n P mpiar-tune -o FILE [options]",
      .about = about,
      .epilogue = epilogue,
      .args = args,
      .nargs = (int)(sizeof args / sizeof args[0]),
  };
  int ex = tool_args_run(&spec, argc, argv);
  if (ex >= 0) {
    return ex;
  }
  if (o->output == NULL) {
    return tool_usage_error(&spec, "-o FILE is required (the tuning file to write)");
  }
  if (o->quick) {
    o->min_bytes = min_given ? o->min_bytes : 4;
    o->max_bytes = max_given ? o->max_bytes : (size_t)1 << 20;
    factor = factor_given ? factor : 4;
  }
  if (min_given && !max_given && o->max_bytes < o->min_bytes) {
    o->max_bytes = o->min_bytes;
  }
  if (o->min_bytes > o->max_bytes) {
    return tool_usage_error(&spec, "-b %zu is larger than -e %zu", o->min_bytes, o->max_bytes);
  }
  if (!seg_given) {
    int n = o->quick ? 2 : mpiar__tuning_nsegments;
    for (int i = 0; i < n; i++) {
      o->segments[i] = mpiar__tuning_segments[i];
    }
    o->nsegments = n;
  }
  o->factor = (size_t)factor;
  o->iters = (int)iters;
  o->min_iters = (int)min_iters;
  o->warmup = (int)warmup;
  o->tie = tie_pct / 100.0;
  return -1;
}

/* ---- Progress and a growing text buffer --------------------------------------------------- */

void tune_progress(const tune_env_t *env, const char *fmt, ...) {
  if (!env->progress) {
    return;
  }
  char line[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  fprintf(stderr, "mpiar-tune: %s [%.1f s]\n", line, MPI_Wtime() - env->start);
  fflush(stderr);
}

typedef struct text {
  char *s;
  size_t len, cap;
  int failed;
} text_t;

static void put(text_t *t, const char *fmt, ...) MPIAR__PRINTF(2, 3);

static void put(text_t *t, const char *fmt, ...) {
  for (int tries = 0; tries < 2 && !t->failed; tries++) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(t->s ? t->s + t->len : NULL, t->s ? t->cap - t->len : 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
      t->failed = 1;
      return;
    }
    if (t->s != NULL && t->len + (size_t)n < t->cap) {
      t->len += (size_t)n;
      return;
    }
    size_t cap = (t->cap + (size_t)n + 1) * 2;
    char *s = realloc(t->s, cap);
    if (s == NULL) {
      t->failed = 1;
      return;
    }
    t->s = s;
    t->cap = cap;
  }
}

static void put_seconds(text_t *t, double v) {
  if (isfinite(v)) {
    put(t, "%.6g", v);
  } else {
    put(t, "null");
  }
}

static void put_fit(text_t *t, const tune_fit_t *f) {
  put(t, "{\"bytes\": [");
  for (int i = 0; i < f->n; i++) {
    put(t, "%s%.0f", i ? ", " : "", f->x[i]);
  }
  put(t, "], \"seconds\": [");
  for (int i = 0; i < f->n; i++) {
    put(t, "%s", i ? ", " : "");
    put_seconds(t, f->t[i]);
  }
  put(t, "]}");
}

/* What was measured, for research: the loader skips it. */
static void measurements(text_t *t, const char *load_start, const char *load_end,
                         const tune_calibration_t *cal, const tune_sweep_t *sw, int nsw) {
  put(t, "{\n    \"load_average\": {\"start\": \"%s\", \"end\": \"%s\"},\n", load_start, load_end);
  put(t, "    \"calibration\": {\"intra\": ");
  if (cal->have_intra) {
    put_fit(t, &cal->intra);
  } else {
    put(t, "null");
  }
  put(t, ", \"inter\": ");
  if (cal->have_inter) {
    put_fit(t, &cal->inter);
  } else {
    put(t, "null");
  }
  put(t, ",\n      \"gamma\": {");
  for (int d = 0; d < MPIAR__DTYPE_COUNT; d++) {
    put(t, "%s\"%s\": ", d ? ", " : "", mpiar_dtype_name((mpiar_dtype_t)d));
    put_fit(t, &cal->gamma[d]);
  }
  put(t, "}},\n    \"sweeps\": [");
  for (int w = 0; w < nsw; w++) {
    const tune_sweep_t *s = &sw[w];
    put(t, "%s\n      {\"dtype\": \"%s\", \"candidates\": [", w ? "," : "",
        mpiar_dtype_name(s->dtype));
    for (int c = 0; c < s->ncand; c++) {
      put(t, "%s\"%s\"", c ? ", " : "", s->cand[c].name);
    }
    put(t, "],\n       \"sizes\": [");
    for (int k = 0; k < s->nsizes; k++) {
      put(t, "%s%zu", k ? ", " : "", s->sizes[k]);
    }
    put(t, "],\n       \"median_seconds\": [");
    for (int k = 0; k < s->nsizes; k++) {
      put(t, "%s\n         [", k ? "," : "");
      for (int c = 0; c < s->ncand; c++) {
        put(t, "%s", c ? ", " : "");
        put_seconds(t, s->median[k][c]);
      }
      put(t, "]");
    }
    put(t, "],\n       \"q1_seconds\": [");
    for (int k = 0; k < s->nsizes; k++) {
      put(t, "%s\n         [", k ? "," : "");
      for (int c = 0; c < s->ncand; c++) {
        put(t, "%s", c ? ", " : "");
        put_seconds(t, s->q1[k][c]);
      }
      put(t, "]");
    }
    put(t, "],\n       \"q3_seconds\": [");
    for (int k = 0; k < s->nsizes; k++) {
      put(t, "%s\n         [", k ? "," : "");
      for (int c = 0; c < s->ncand; c++) {
        put(t, "%s", c ? ", " : "");
        put_seconds(t, s->q3[k][c]);
      }
      put(t, "]");
    }
    put(t, "]}");
  }
  put(t, "\n    ]\n  }");
}

/* ---- The report --------------------------------------------------------------------------- */

static void load_average(char *buf, size_t len) {
  snprintf(buf, len, "unknown");
  FILE *f = fopen("/proc/loadavg", "r");
  if (f != NULL) {
    if (fgets(buf, (int)len, f) != NULL) {
      buf[strcspn(buf, "\n")] = '\0';
    }
    fclose(f);
  }
}

/* The built-in model's choice on the tuned communicator (its topology: hierarchical entries
 * compete where the selector lets them). */
typedef struct model_ctx {
  int p;
  const mpiar__topology_t *topo;
} model_ctx_t;

static void builtin_choice(void *ctx, size_t bytes, mpiar_dtype_t dtype,
                           const mpiar__algorithm_t **alg, size_t *segment_bytes) {
  const model_ctx_t *mc = ctx;
  mpiar__inspect_model_choice(NULL, bytes, dtype, mc->p, mc->topo, alg, segment_bytes);
}

/*
 * Where the choices of the model fall among the measured candidates: per size, the time of what
 * the model (built-in or fitted parameters) would run over the fastest, as this run measured
 * them (in-sample regret: mpiar-bench measures it out of sample).
 */
static void model_regrets(FILE *f, const tune_env_t *env, const tune_sweep_t *s,
                          const mpiar__tuning_t *fitted) {
  /* The nodes as the library sees them, so that hierarchical entries compete where they would. */
  mpiar__topology_t topo;
  memset(&topo, 0, sizeof topo);
  int have_topo = env->node_of != NULL &&
                  mpiar__topology_from_map(&topo, env->p, env->node_of) == MPIAR_SUCCESS;
  const char *label[2] = {"built-in model", "fitted model"};
  double reg[2][TUNE_MAX_SIZES];
  int nreg[2] = {0, 0};
  fprintf(f, "## What the model would choose (%s), in-sample: time / fastest - 1\n",
          mpiar_dtype_name(s->dtype));
  fprintf(f, "#%10s  %-28s %8s  %-28s %8s  %s\n", "size", label[0], "regret", label[1], "regret",
          "table");
  for (int k = 0; k < s->nsizes; k++) {
    char sz[32];
    fprintf(f, " %10s", tool_format_bytes((double)s->sizes[k], sz, sizeof sz));
    double best = s->median[k][s->winner[k]];
    for (int c = 0; c < s->ncand; c++) {
      best = !isnan(s->median[k][c]) && s->median[k][c] < best ? s->median[k][c] : best;
    }
    for (int m = 0; m < 2; m++) {
      const mpiar__algorithm_t *alg = NULL;
      size_t seg = 0;
      mpiar__inspect_model_choice(m ? fitted : NULL, s->sizes[k], s->dtype, env->p,
                                  have_topo ? &topo : NULL, &alg, &seg);
      int c = tune_candidate_at(s, k, alg, seg, env->p);
      char pick[64];
      snprintf(pick, sizeof pick, "%s%s", alg->name,
               (alg->flags & MPIAR__ALG_SEGMENTED) && seg ? "/seg" : "");
      if (c >= 0) {
        reg[m][nreg[m]] = s->median[k][c] / best - 1.0;
        fprintf(f, "  %-28s %+7.1f%%", c >= 0 ? s->cand[c].name : pick, 100 * reg[m][nreg[m]]);
        nreg[m]++;
      } else {
        fprintf(f, "  %-28s %8s", pick, "n/a");
      }
    }
    const int held = s->decision[k] >= 0 ? s->decision[k] : s->model[k];
    if (held >= 0) {
      fprintf(f, "  %s %+.1f%%\n", s->cand[held].name, 100 * (s->median[k][held] / best - 1.0));
    } else {
      fprintf(f, "  (model, not measured)\n");
    }
  }
  for (int m = 0; m < 2; m++) {
    double med = tool_median(reg[m], nreg[m]);
    double worst = nreg[m] ? reg[m][nreg[m] - 1] : NAN; /* sorted by the median */
    fprintf(f, "# %s: regret median %.1f%%, worst %.1f%% over %d sizes\n", label[m], 100 * med,
            100 * worst, nreg[m]);
  }
  if (have_topo) {
    mpiar__topology_destroy(&topo);
  }
}

static void print_table(FILE *f, const mpiar__tuning_table_t *t) {
  fprintf(f, "## Table (%s): %d range%s\n", mpiar_dtype_name(t->dtype), t->nranges,
          t->nranges == 1 ? "" : "s");
  for (int i = 0; i < t->nranges; i++) {
    const mpiar__tuning_range_t *g = &t->ranges[i];
    char lo[32], hi[32];
    tool_format_bytes((double)g->min_bytes, lo, sizeof lo);
    if (g->max_bytes == MPIAR__TUNING_UNBOUNDED) {
      snprintf(hi, sizeof hi, "and more");
    } else {
      tool_format_bytes((double)g->max_bytes, hi, sizeof hi);
    }
    fprintf(f, "#   %12s .. %-12s %s", lo, hi, g->alg->name);
    if (g->segment_bytes) {
      char sg[32];
      fprintf(f, ", segment %s", tool_format_bytes((double)g->segment_bytes, sg, sizeof sg));
    }
    fputc('\n', f);
  }
}

/* ---- The run ------------------------------------------------------------------------------ */

/* The nodes of the communicator, as the library's context sees them. */
static int learn_nodes(tune_env_t *env) {
  int rc = mpiar_comm_init(env->comm, NULL);
  mpiar__inspect_context_t info;
  if (rc == MPIAR_SUCCESS) {
    rc = mpiar__inspect_context(env->comm, &info);
  }
  if (rc == MPIAR_SUCCESS) {
    env->node_of = calloc((size_t)env->p, sizeof *env->node_of);
    if (env->node_of == NULL) {
      return -1;
    }
    rc = mpiar__inspect_node_of(env->comm, env->node_of, env->p);
  }
  if (rc != MPIAR_SUCCESS) {
    fprintf(stderr, "mpiar-tune: rank %d: %s: %s\n", env->rank, mpiar_strerror(rc),
            mpiar_last_error());
    return -1;
  }
  env->nodes = info.nnodes;
  env->largest = 0;
  for (int n = 0; n < env->nodes; n++) {
    int k = 0;
    for (int r = 0; r < env->p; r++) {
      k += env->node_of[r] == n;
    }
    env->largest = k > env->largest ? k : env->largest;
  }
  return 0;
}

/* The tuning file's contents from the calibration and the tables. */
static void fill_tuning(mpiar__tuning_t *t, const tune_env_t *env, const tune_calibration_t *cal,
                        const tune_sweep_t *sw, int nsw, const tune_model_t *model) {
  mpiar__tuning_init(t);
  time_t now = time(NULL);
  struct tm tm;
  gmtime_r(&now, &tm);
  strftime(t->created, sizeof t->created, "%Y-%m-%dT%H:%M:%SZ", &tm);
  snprintf(t->mpiar_version, sizeof t->mpiar_version, "%s", mpiar_version());
  mpiar__inspect_fingerprint(&t->fingerprint);
  t->ranks = env->p;
  t->nodes = env->nodes;
  t->ranks_per_node = env->largest;
  /* One rank per node has no pair inside a node: its messages all cross nodes. */
  const tune_fit_t *one = cal->have_intra ? &cal->intra : (cal->have_inter ? &cal->inter : NULL);
  t->alpha = one ? one->a : 0;
  t->beta = one ? one->b : 1e-15;
  if (cal->have_inter) {
    t->alpha_inter = cal->inter.a;
    t->beta_inter = cal->inter.b;
  }
  for (int d = 0; d < MPIAR__DTYPE_COUNT; d++) {
    t->gamma[d] = cal->gamma[d].b;
  }
  for (int w = 0; w < nsw; w++) {
    tune_make_table(&sw[w], model, &t->tables[t->ntables++]);
  }
}

/* Rank 0 writes PATH.tmp and renames it over PATH. @return 0 or -1. */
static int write_file(const char *path, const mpiar__tuning_t *t, const char *meas) {
  char tmp[4096];
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  FILE *f = fopen(tmp, "w");
  if (f == NULL) {
    fprintf(stderr, "mpiar-tune: cannot write '%s'\n", tmp);
    return -1;
  }
  int bad = mpiar__tuning_write(t, meas, f) != 0;
  bad |= fclose(f) != 0;
  if (bad || rename(tmp, path) != 0) {
    fprintf(stderr, "mpiar-tune: cannot write '%s'\n", path);
    remove(tmp);
    return -1;
  }
  return 0;
}

/* The tuning file's own settings and forced choices would falsify the measurement. */
static void clear_settings(int print) {
  static const char *const vars[] = {"MPIAR_ALGORITHM", "MPIAR_SEGMENT_BYTES", "MPIAR_TUNING_FILE"};
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
    const char *v = getenv(vars[i]);
    if (v != NULL && *v != '\0') {
      if (print) {
        fprintf(stderr, "mpiar-tune: %s=%s is ignored while tuning\n", vars[i], v);
      }
      unsetenv(vars[i]);
    }
  }
}

static int agree(int ok, MPI_Comm comm) {
  MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, comm);
  return ok;
}

static int run(const tune_opts_t *o, tune_env_t *env) {
  static tune_sweep_t sweeps[MPIAR__DTYPE_COUNT];
  static tune_calibration_t cal;
  static mpiar__tuning_t t;
  FILE *out = env->rank == 0 ? stdout : NULL;
  char load_start[128], load_end[128];
  char err[512];
  /* An output that cannot be written is a bad -o: it fails now, not after minutes of measuring.
   * Rank 0 writes the file, so rank 0 checks, and every rank ends with its answer. */
  int writable = env->rank != 0 || tool_check_output(o->output, err, sizeof err) == 0;
  if (!agree(writable, env->comm)) {
    if (env->rank == 0) {
      fprintf(stderr, "mpiar-tune: -o: %s\nTry 'mpiar-tune --help'.\n", err);
    }
    return TOOL_EXIT_USAGE;
  }
  load_average(load_start, sizeof load_start);
  if (learn_nodes(env) != 0 || !agree(1, env->comm)) {
    return TOOL_EXIT_FAIL;
  }
  /* The largest buffers: the sweep's two, or the calibration's three, per rank on a node. */
  double need = 2.0 * (double)o->max_bytes;
  need = need > 3.0 * (64 << 20) ? need : 3.0 * (64 << 20);
  int fits = tool_check_memory(need * env->largest, "-e (the buffers of every rank on a node)", err,
                               sizeof err) == 0;
  if (!agree(fits, env->comm)) {
    if (env->rank == 0) {
      fprintf(stderr, "mpiar-tune: %s\nTry 'mpiar-tune --help'.\n", err);
    }
    return TOOL_EXIT_USAGE;
  }
  if (out != NULL) {
    mpiar__fingerprint_t fp;
    mpiar__inspect_fingerprint(&fp);
    fprintf(out, "# mpiar-tune %s: %d ranks on %d node%s (at most %d per node)\n", mpiar_version(),
            env->p, env->nodes, env->nodes == 1 ? "" : "s", env->largest);
    fprintf(out, "# %s; %s; kernels %s\n# load average at the start: %s\n", fp.mpi_library, fp.cpu,
            fp.kernel_level, load_start);
    fflush(out);
  }
  if (tune_calibrate(o, env, &cal) != 0) {
    return TOOL_EXIT_FAIL;
  }
  if (out != NULL) {
    tune_print_calibration(out, env, &cal);
    fflush(out);
  }
  /* The table holds the built-in model's choices wherever the sweep did not resolve a faster
   * candidate (decide.c), on this communicator's topology, as the selector sees it. */
  mpiar__topology_t topo;
  memset(&topo, 0, sizeof topo);
  const int have_topo = mpiar__topology_from_map(&topo, env->p, env->node_of) == MPIAR_SUCCESS;
  model_ctx_t mc = {env->p, have_topo ? &topo : NULL};
  const tune_model_t model = {builtin_choice, &mc};
  for (int d = 0; d < o->ndtypes; d++) {
    if (tune_sweep(o, env, o->dtypes[d], &sweeps[d], out, &model) != 0) {
      if (env->rank == 0) {
        fprintf(stderr, "mpiar-tune: out of memory for buffers of %zu bytes\n", o->max_bytes);
      }
      if (have_topo) {
        mpiar__topology_destroy(&topo);
      }
      return TOOL_EXIT_FAIL;
    }
  }
  load_average(load_end, sizeof load_end);
  for (int d = 0; d < o->ndtypes; d++) {
    tune_decide(&sweeps[d], o->tie, &model);
  }
  fill_tuning(&t, env, &cal, sweeps, o->ndtypes, &model);
  if (have_topo) {
    mpiar__topology_destroy(&topo);
  }
  int ok = 1;
  if (env->rank == 0) {
    for (int d = 0; d < o->ndtypes; d++) {
      tune_print_decisions(out, &sweeps[d]);
      print_table(out, &t.tables[d]);
      model_regrets(out, env, &sweeps[d], &t);
    }
    text_t meas = {0};
    measurements(&meas, load_start, load_end, &cal, sweeps, o->ndtypes);
    ok = !meas.failed && write_file(o->output, &t, meas.s) == 0;
    free(meas.s);
    if (ok) {
      fprintf(out, "# load average at the end: %s\n# wrote %s\n", load_end, o->output);
    }
  }
  MPI_Bcast(&ok, 1, MPI_INT, 0, env->comm);
  return ok ? TOOL_EXIT_OK : TOOL_EXIT_FAIL;
}

int main(int argc, char **argv) {
  tune_opts_t o;
  int ex = parse_args(argc, argv, &o);
  if (ex >= 0) {
    return ex;
  }
  clear_settings(tool_launcher_rank0());
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  tune_env_t env;
  memset(&env, 0, sizeof env);
  MPI_Comm_dup(MPI_COMM_WORLD, &env.comm);
  MPI_Comm_dup(MPI_COMM_WORLD, &env.p2p);
  MPI_Comm_rank(env.comm, &env.rank);
  MPI_Comm_size(env.comm, &env.p);
  env.start = MPI_Wtime();
  env.progress = env.rank == 0 && !o.quiet;
  ex = run(&o, &env);
  free(env.node_of);
  MPI_Comm_free(&env.p2p);
  MPI_Comm_free(&env.comm);
  MPI_Finalize();
  return ex;
}
