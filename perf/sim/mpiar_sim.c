/*
 * mpiar-sim: run one collective's schedules for P ranks in the simulator, print the modelled time,
 * bandwidths and traffic; print a rank's schedule; or sweep a grid of rank counts and sizes and
 * name the fastest algorithm for each. No MPI is needed.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algorithms/algorithms.h"
#include "common/tool.h"
#include "sim/sim.h"

typedef struct opts {
  const char *algorithm;
  int bcast;
  long ranks[16];
  int nranks_list;
  size_t bytes;
  int have_bytes;
  size_t segment_bytes;
  mpiar__cost_params_t cost;
  mpiar_dtype_t dtype;
  mpiar_op_t op;
  int in_place, data, print, sweep, json, reproducible;
  long root, print_rank;
  size_t sizes[32];
  int nsizes;
  long seed;
} opts_t;

static void json_string(const char *s) {
  putchar('"');
  for (; *s; s++) {
    if (*s == '"' || *s == '\\') {
      printf("\\%c", *s);
    } else if ((unsigned char)*s < 0x20) {
      printf("\\u%04x", *s);
    } else {
      putchar(*s);
    }
  }
  putchar('"');
}

/* Without --data or --no-data, data are moved and checked up to this many bytes over all ranks. */
#define DATA_DEFAULT_BYTES (256.0 * 1024 * 1024)

static double busbw_factor(int bcast, int p) {
  /* Allreduce moves 2(p-1)/p of the vector per rank at best; broadcast (p-1)/p... the vector. */
  return bcast ? 1.0 : 2.0 * (p - 1) / p;
}

static int run_one(const opts_t *o, const mpiar__algorithm_t *alg) {
  const size_t es = mpiar_dtype_size(o->dtype);
  const int p = (int)o->ranks[0];
  mpiar__sim_config_t cfg = MPIAR__SIM_CONFIG_INIT;
  cfg.algorithm = alg;
  cfg.collective = o->bcast ? MPIAR__SIM_BCAST : MPIAR__SIM_ALLREDUCE;
  cfg.nranks = p;
  cfg.count = o->bytes / es;
  cfg.dtype = o->dtype;
  cfg.op = o->op;
  cfg.in_place = o->in_place;
  cfg.root = (int)o->root;
  cfg.segment_elems = o->segment_bytes / es;
  cfg.cost = o->cost;
  cfg.seed = (uint64_t)o->seed;
  cfg.data = o->data >= 0 ? o->data : (double)p * (double)o->bytes <= DATA_DEFAULT_BYTES;
  if (o->print) {
    mpiar__schedule_t s;
    int rc = mpiar__sim_build(&cfg, (int)o->print_rank, &s);
    if (rc != MPIAR_SUCCESS) {
      fprintf(stderr, "mpiar-sim: %s: %s\n", mpiar_strerror(rc), mpiar_last_error());
      return 1;
    }
    mpiar__schedule_print(&s, stdout);
    mpiar__schedule_destroy(&s);
    return 0;
  }
  mpiar__sim_result_t res;
  int rc = mpiar__sim_run(&cfg, &res);
  if (rc != MPIAR_SUCCESS) {
    fprintf(stderr, "mpiar-sim: %s: %s\n", mpiar_strerror(rc), mpiar_last_error());
    return 1;
  }
  const double closed = alg->cost(p, cfg.count * es, es, cfg.segment_elems * es, &o->cost);
  const double bytes = (double)(cfg.count * es);
  const double algbw = res.time_s > 0 ? bytes / res.time_s / 1e9 : 0.0;
  const double busbw = algbw * busbw_factor(o->bcast, p);
  if (o->json) {
    printf("{\"algorithm\": ");
    json_string(alg->name);
    printf(", \"collective\": \"%s\", \"ranks\": %d, \"bytes\": %zu, \"count\": %zu, "
           "\"dtype\": \"%s\", \"op\": \"%s\", \"in_place\": %s, \"segment_bytes\": %zu, "
           "\"alpha\": %.17g, \"beta\": %.17g, \"gamma\": %.17g, "
           "\"time_s\": %.17g, \"closed_form_s\": %.17g, \"algbw_GBps\": %.6g, "
           "\"busbw_GBps\": %.6g, \"messages\": %zu, \"messages_max\": %zu, "
           "\"bytes_sent_max\": %zu, \"bytes_sent_total\": %zu, \"bytes_reduced_max\": %zu, "
           "\"scratch_bytes_max\": %zu, \"steps\": %zu, \"data_checked\": %s, "
           "\"hazards_checked\": %s, \"ok\": %s, \"error\": ",
           o->bcast ? "bcast" : "allreduce", p, cfg.count * es, cfg.count,
           mpiar_dtype_name(o->dtype), mpiar_op_name(o->op), o->in_place ? "true" : "false",
           cfg.segment_elems * es, o->cost.alpha, o->cost.beta, o->cost.gamma, res.time_s, closed,
           algbw, busbw, res.messages, res.messages_max, res.bytes_sent_max, res.bytes_sent_total,
           res.bytes_reduced_max, res.scratch_bytes_max, res.steps, cfg.data ? "true" : "false",
           res.hazards_checked ? "true" : "false", res.ok ? "true" : "false");
    json_string(res.ok ? "" : res.error);
    printf("}\n");
  } else {
    printf("algorithm      %s (%s)\n", alg->name, o->bcast ? "bcast" : "allreduce");
    printf("ranks          %d\n", p);
    printf("bytes          %zu (%zu x %s%s%s)\n", cfg.count * es, cfg.count,
           mpiar_dtype_name(o->dtype), o->bcast ? "" : ", ", o->bcast ? "" : mpiar_op_name(o->op));
    printf("segment        %zu bytes\n", cfg.segment_elems * es);
    printf("model          alpha %g s, beta %g s/B, gamma %g s/B\n", o->cost.alpha, o->cost.beta,
           o->cost.gamma);
    printf("time           %.6f us (closed form %.6f us)\n", res.time_s * 1e6, closed * 1e6);
    printf("algbw          %.3f GB/s\n", algbw);
    printf("busbw          %.3f GB/s\n", busbw);
    printf("messages       %zu total, %zu max per rank\n", res.messages, res.messages_max);
    printf("bytes sent     %zu max per rank, %zu total\n", res.bytes_sent_max,
           res.bytes_sent_total);
    printf("bytes reduced  %zu max per rank\n", res.bytes_reduced_max);
    printf("scratch        %zu bytes max per rank\n", res.scratch_bytes_max);
    printf("checks         %s%s%s\n", res.ok ? "ok" : "FAILED",
           cfg.data ? " (data" : " (matching only", res.hazards_checked ? ", hazards)" : ")");
    if (!res.ok) {
      printf("error          %s\n", res.error);
    }
  }
  return res.ok ? 0 : 1;
}

/* Segment sizes the sweep tries for the ring, in bytes. */
static const size_t sweep_segments[] = {64 << 10, 256 << 10, 1 << 20};
#define NSEG (sizeof sweep_segments / sizeof sweep_segments[0])
/* Skip candidates whose schedules would exceed this many steps in all (memory and time). */
#define SWEEP_MAX_STEPS 40e6

static void size_name(size_t b, char *buf, size_t len) {
  if (b >= (1u << 30) && b % (1u << 30) == 0) {
    snprintf(buf, len, "%zuG", b >> 30);
  } else if (b >= (1u << 20) && b % (1u << 20) == 0) {
    snprintf(buf, len, "%zuM", b >> 20);
  } else if (b >= 1024 && b % 1024 == 0) {
    snprintf(buf, len, "%zuK", b >> 10);
  } else {
    snprintf(buf, len, "%zu", b);
  }
}

/* Modelled time of one allreduce without data; NAN when skipped (too big, or a segmented ring
 * whose block fits one segment) or failed (counted in *failures). */
static double sweep_time(const opts_t *o, const mpiar__algorithm_t *alg, int p, size_t bytes,
                         size_t seg, int *failures) {
  const size_t es = mpiar_dtype_size(o->dtype);
  const double blk = (double)bytes / p;
  const double m = seg ? ceil(blk / (double)seg) : 1;
  if (seg && m < 2) {
    return NAN; /* the block fits in one segment: same as the unsegmented ring */
  }
  const double steps = (double)p * 4.0 * (p > 1 ? p - 1 : 1) * m;
  if (steps > SWEEP_MAX_STEPS) {
    return NAN;
  }
  mpiar__sim_config_t cfg = MPIAR__SIM_CONFIG_INIT;
  cfg.algorithm = alg;
  cfg.nranks = p;
  cfg.count = bytes / es;
  cfg.dtype = o->dtype;
  cfg.op = o->op;
  cfg.segment_elems = seg / es;
  cfg.cost = o->cost;
  cfg.data = 0;
  cfg.check_hazards = 0;
  mpiar__sim_result_t res;
  if (mpiar__sim_run(&cfg, &res) != MPIAR_SUCCESS || !res.ok) {
    fprintf(stderr, "mpiar-sim: %s p=%d bytes=%zu: %s\n", alg->name, p, bytes,
            res.ok ? mpiar_last_error() : res.error);
    (*failures)++;
    return NAN;
  }
  return res.time_s;
}

static int run_sweep(const opts_t *o) {
  const size_t es = mpiar_dtype_size(o->dtype);
  int failures = 0;
  const int ncand = mpiar__algorithm_count + (int)NSEG;
  if (!o->json) {
    printf("# mpiar-sim --sweep: alpha %g s, beta %g s/B, gamma %g s/B, %s %s; modelled time in "
           "us\n",
           o->cost.alpha, o->cost.beta, o->cost.gamma, mpiar_dtype_name(o->dtype),
           mpiar_op_name(o->op));
    printf("%6s %6s", "ranks", "bytes");
    for (int a = 0; a < mpiar__algorithm_count; a++) {
      printf(" %18s", mpiar__algorithms[a].name);
    }
    for (size_t s = 0; s < NSEG; s++) {
      char nm[32], col[48];
      size_name(sweep_segments[s], nm, sizeof nm);
      snprintf(col, sizeof col, "ring/seg=%s", nm);
      printf(" %14s", col);
    }
    printf("  winner\n");
  } else {
    printf("[");
  }
  int first = 1;
  for (int pi = 0; pi < o->nranks_list; pi++) {
    const int p = (int)o->ranks[pi];
    for (int si = 0; si < o->nsizes; si++) {
      const size_t bytes = o->sizes[si] / es * es;
      double best = INFINITY;
      char winner[64] = "-";
      double times[32];
      for (int c = 0; c < ncand; c++) {
        const mpiar__algorithm_t *alg =
            c < mpiar__algorithm_count ? &mpiar__algorithms[c] : mpiar__algorithm_find("ring");
        size_t seg = c < mpiar__algorithm_count ? 0 : sweep_segments[c - mpiar__algorithm_count];
        times[c] = sweep_time(o, alg, p, bytes, seg, &failures);
        if (!isnan(times[c]) && times[c] < best) {
          best = times[c];
          if (seg) {
            char nm[32];
            size_name(seg, nm, sizeof nm);
            snprintf(winner, sizeof winner, "ring/seg=%s", nm);
          } else {
            snprintf(winner, sizeof winner, "%s", alg->name);
          }
        }
      }
      char bn[32];
      size_name(bytes, bn, sizeof bn);
      if (o->json) {
        printf("%s\n {\"ranks\": %d, \"bytes\": %zu, \"winner\": \"%s\", \"time_s\": {",
               first ? "" : ",", p, bytes, winner);
        int firstc = 1;
        for (int c = 0; c < ncand; c++) {
          if (isnan(times[c])) {
            continue;
          }
          if (c < mpiar__algorithm_count) {
            printf("%s\"%s\": %.9g", firstc ? "" : ", ", mpiar__algorithms[c].name, times[c]);
          } else {
            printf("%s\"ring/seg=%zu\": %.9g", firstc ? "" : ", ",
                   sweep_segments[c - mpiar__algorithm_count], times[c]);
          }
          firstc = 0;
        }
        printf("}, \"ok\": %s}", failures ? "false" : "true");
        first = 0;
      } else {
        printf("%6d %6s", p, bn);
        for (int c = 0; c < ncand; c++) {
          if (isnan(times[c])) {
            printf(" %*s", c < mpiar__algorithm_count ? 18 : 14, "-");
          } else {
            printf(" %*.2f", c < mpiar__algorithm_count ? 18 : 14, times[c] * 1e6);
          }
        }
        printf("  %s\n", winner);
      }
      fflush(stdout);
    }
  }
  if (o->json) {
    printf("\n]\n");
  }
  return failures ? 1 : 0;
}

/*
 * --sweep --reproducible: for every registry algorithm (and the ring with each sweep segment),
 * its time, its reproducible replacement's time and their ratio; then the best of the registry
 * against the best of the replacements, which is what `auto` costs in each mode.
 */
static int run_sweep_repro(const opts_t *o) {
  const size_t es = mpiar_dtype_size(o->dtype);
  const mpiar__algorithm_t *ring = mpiar__algorithm_find("ring");
  const int ncand = mpiar__algorithm_count + (int)NSEG;
  int failures = 0;
  printf("# mpiar-sim --sweep --reproducible: alpha %g s, beta %g s/B, gamma %g s/B, %s %s; "
         "modelled time in us; each algorithm, then its reproducible replacement / its time\n",
         o->cost.alpha, o->cost.beta, o->cost.gamma, mpiar_dtype_name(o->dtype),
         mpiar_op_name(o->op));
  printf("%6s %6s", "ranks", "bytes");
  for (int c = 0; c < ncand; c++) {
    char col[64], nm[32];
    if (c < mpiar__algorithm_count) {
      snprintf(col, sizeof col, "%s", mpiar__algorithms[c].name);
    } else {
      size_name(sweep_segments[c - mpiar__algorithm_count], nm, sizeof nm);
      snprintf(col, sizeof col, "ring/seg=%s", nm);
    }
    printf(" %28s", col);
  }
  printf(" %12s %12s %6s\n", "best", "best repro", "ratio");
  for (int pi = 0; pi < o->nranks_list; pi++) {
    const int p = (int)o->ranks[pi];
    for (int si = 0; si < o->nsizes; si++) {
      const size_t bytes = o->sizes[si] / es * es;
      double best = INFINITY, best_repro = INFINITY;
      char bn[32];
      size_name(bytes, bn, sizeof bn);
      printf("%6d %6s", p, bn);
      for (int c = 0; c < ncand; c++) {
        const mpiar__algorithm_t *alg = c < mpiar__algorithm_count ? &mpiar__algorithms[c] : ring;
        const size_t seg =
            c < mpiar__algorithm_count ? 0 : sweep_segments[c - mpiar__algorithm_count];
        const mpiar__algorithm_t *rep = mpiar__algorithm_reproducible(alg, p, o->dtype);
        const double t = sweep_time(o, alg, p, bytes, seg, &failures);
        const double tr = rep == alg ? t : sweep_time(o, rep, p, bytes, seg, &failures);
        char cell[64];
        if (isnan(t) || isnan(tr)) {
          snprintf(cell, sizeof cell, "-");
        } else {
          snprintf(cell, sizeof cell, "%.2f %s/%.3f", t * 1e6, rep == alg ? "=" : rep->name,
                   tr / t);
          best = t < best ? t : best;
          best_repro = tr < best_repro ? tr : best_repro;
        }
        printf(" %28s", cell);
      }
      printf(" %12.2f %12.2f %6.3f\n", best * 1e6, best_repro * 1e6, best_repro / best);
      fflush(stdout);
    }
  }
  return failures ? 1 : 0;
}

static int parse_collective(const char *value, void *dest, char *err, size_t errlen) {
  if (strcmp(value, "allreduce") != 0 && strcmp(value, "bcast") != 0) {
    snprintf(err, errlen, "unknown collective '%s' (allreduce or bcast)", value);
    return -1;
  }
  *(int *)dest = strcmp(value, "bcast") == 0;
  return 0;
}

static int parse_dtype(const char *value, void *dest, char *err, size_t errlen) {
  if (mpiar_dtype_from_name(value, dest) != MPIAR_SUCCESS) {
    snprintf(err, errlen, "unknown dtype '%s'", value);
    return -1;
  }
  return 0;
}

static int parse_op(const char *value, void *dest, char *err, size_t errlen) {
  if (mpiar_op_from_name(value, dest) != MPIAR_SUCCESS) {
    snprintf(err, errlen, "unknown op '%s'", value);
    return -1;
  }
  return 0;
}

/* "ring rabenseifner ...; bcast: binomial ..." for --help. */
static void algorithm_names(char *buf, size_t len) {
  size_t w = 0;
  buf[0] = '\0';
  for (int i = 0; i < mpiar__algorithm_count + mpiar__algorithm_variant_count && w < len; i++) {
    const char *name = i < mpiar__algorithm_count
                           ? mpiar__algorithms[i].name
                           : mpiar__algorithm_variants[i - mpiar__algorithm_count].name;
    w += (size_t)snprintf(buf + w, len - w, "%s%s", i ? " " : "allreduce: ", name);
  }
  for (int i = 0; i < mpiar__bcast_algorithm_count && w < len; i++) {
    w += (size_t)snprintf(buf + w, len - w, "%s%s",
                          i ? " " : ";\nbcast: ", mpiar__bcast_algorithms[i].name);
  }
}

/* Bytes the data checks of one simulation allocate at least: per rank the input copy, the
 * output and its init map, plus the reference result. */
static double data_memory(int p, size_t bytes, size_t es) {
  return (double)p * (2.0 * (double)bytes + (double)(bytes / es)) + (double)bytes;
}

int main(int argc, char **argv) {
  opts_t o;
  memset(&o, 0, sizeof o);
  o.cost.alpha = 2e-6;
  o.cost.beta = 1e-10;
  o.cost.gamma = 5e-11;
  o.dtype = MPIAR_FLOAT32;
  o.op = MPIAR_SUM;
  o.data = -1;
  o.print_rank = -1;
  o.seed = 1;
  int rank_given = 0;
  char algs[512];
  algorithm_names(algs, sizeof algs);
  const tool_arg_t args[] = {
      {.long_name = "algorithm",
       .kind = TOOL_ARG_STRING,
       .dest = &o.algorithm,
       .metavar = "A",
       .help = algs},
      {.long_name = "collective",
       .kind = TOOL_ARG_CUSTOM,
       .dest = &o.bcast,
       .parse = parse_collective,
       .metavar = "C",
       .help = "allreduce (default) or bcast"},
      {.long_name = "ranks",
       .kind = TOOL_ARG_INT_LIST,
       .dest = o.ranks,
       .nitems = &o.nranks_list,
       .max_items = 16,
       .lo = 1,
       .hi = 1 << 20,
       .metavar = "P",
       .help = "number of ranks (1..1048576); --sweep takes a list"},
      {.long_name = "bytes",
       .kind = TOOL_ARG_SIZE,
       .dest = &o.bytes,
       .lo = 0,
       .hi = TOOL_SIZE_MAX,
       .given = &o.have_bytes,
       .metavar = "N",
       .help = "message size in bytes (K, M, G suffixes: powers of 1024)"},
      {.long_name = "segment",
       .kind = TOOL_ARG_SIZE,
       .dest = &o.segment_bytes,
       .lo = 0,
       .hi = TOOL_SIZE_MAX,
       .metavar = "S",
       .help = "ring segment size in bytes (default: no segmentation)"},
      {.long_name = "alpha",
       .kind = TOOL_ARG_DOUBLE,
       .dest = &o.cost.alpha,
       .dlo = 0,
       .dhi = 1e6,
       .metavar = "SEC",
       .help = "seconds per message (default 2e-6)"},
      {.long_name = "beta",
       .kind = TOOL_ARG_DOUBLE,
       .dest = &o.cost.beta,
       .dlo = 0,
       .dhi = 1e6,
       .metavar = "SEC",
       .help = "seconds per byte sent (default 1e-10)"},
      {.long_name = "gamma",
       .kind = TOOL_ARG_DOUBLE,
       .dest = &o.cost.gamma,
       .dlo = 0,
       .dhi = 1e6,
       .metavar = "SEC",
       .help = "seconds per byte reduced (default 5e-11)"},
      {.long_name = "dtype",
       .kind = TOOL_ARG_CUSTOM,
       .dest = &o.dtype,
       .parse = parse_dtype,
       .metavar = "T",
       .help = "element type (default float32)"},
      {.long_name = "op",
       .kind = TOOL_ARG_CUSTOM,
       .dest = &o.op,
       .parse = parse_op,
       .metavar = "O",
       .help = "reduction (default sum)"},
      {.long_name = "in-place",
       .kind = TOOL_ARG_FLAG,
       .dest = &o.in_place,
       .help = "reduce in place"},
      {.long_name = "root",
       .kind = TOOL_ARG_INT,
       .dest = &o.root,
       .lo = 0,
       .hi = 1 << 20,
       .metavar = "R",
       .help = "broadcast root (default 0)"},
      {.long_name = "data",
       .kind = TOOL_ARG_FLAG,
       .dest = &o.data,
       .help = "move and check real data (default: when ranks x bytes <= 256M;\n"
               "refused when its buffers do not fit in the available memory)"},
      {.long_name = "no-data",
       .kind = TOOL_ARG_FLAG,
       .dest = &o.data,
       .off = 1,
       .help = "matching and timing only"},
      {.long_name = "seed",
       .kind = TOOL_ARG_INT,
       .dest = &o.seed,
       .lo = 0,
       .hi = 1L << 30,
       .metavar = "S",
       .help = "input seed (default 1)"},
      {.long_name = "print-schedule",
       .kind = TOOL_ARG_FLAG,
       .dest = &o.print,
       .help = "print the schedule of --rank R instead of simulating"},
      {.long_name = "rank",
       .kind = TOOL_ARG_INT,
       .dest = &o.print_rank,
       .lo = 0,
       .hi = 1 << 20,
       .given = &rank_given,
       .metavar = "R",
       .help = "the rank --print-schedule prints"},
      {.long_name = "sweep",
       .kind = TOOL_ARG_FLAG,
       .dest = &o.sweep,
       .help = "print the fastest algorithm per (ranks, bytes)"},
      {.long_name = "sizes",
       .kind = TOOL_ARG_SIZE_LIST,
       .dest = o.sizes,
       .nitems = &o.nsizes,
       .max_items = 32,
       .lo = 1,
       .hi = TOOL_SIZE_MAX,
       .metavar = "LIST",
       .help = "sizes for --sweep (default 1K,4K,...,1G)"},
      {.long_name = "json",
       .kind = TOOL_ARG_FLAG,
       .dest = &o.json,
       .help = "print JSON instead of text"},
      {.long_name = "reproducible",
       .kind = TOOL_ARG_FLAG,
       .dest = &o.reproducible,
       .help = "with --sweep: each algorithm beside its reproducible-mode replacement"},
  };
  const tool_spec_t spec = {
      .prog = "mpiar-sim",
      .usage = "mpiar-sim --algorithm A --ranks P --bytes N [options]\n"
               "       mpiar-sim --algorithm A --ranks P --bytes N --print-schedule --rank R\n"
               "       mpiar-sim --sweep [--ranks P1,P2,...] [--sizes N1,N2,...] [options]",
      .about = "Runs one collective's schedules for P ranks in the simulator (no MPI) and prints\n"
               "the modelled time, bandwidths and traffic; prints a rank's schedule; or sweeps a\n"
               "grid of rank counts and sizes and names the fastest algorithm for each.",
      .epilogue = "A simulation whose checks fail (deadlock, unmatched message, hazard, wrong\n"
                  "result) prints them and ends with exit code 1.",
      .args = args,
      .nargs = (int)(sizeof args / sizeof args[0]),
  };
  int ex = tool_args_run(&spec, argc, argv);
  if (ex >= 0) {
    return ex;
  }
  const size_t es = mpiar_dtype_size(o.dtype);
  if (!o.bcast && !mpiar_op_supported(o.dtype, o.op)) {
    return tool_usage_error(&spec, "--op %s is not defined on --dtype %s", mpiar_op_name(o.op),
                            mpiar_dtype_name(o.dtype));
  }
  if (o.segment_bytes % es != 0) {
    return tool_usage_error(&spec, "--segment must be a multiple of the element size (%s)",
                            mpiar_dtype_name(o.dtype));
  }
  if (o.sweep) {
    if (o.bcast || o.print) {
      return tool_usage_error(&spec, "--sweep compares allreduce algorithms; drop --collective "
                                     "bcast and --print-schedule");
    }
    if (o.nranks_list == 0) {
      const long dflt[] = {2, 8, 64, 1024};
      memcpy(o.ranks, dflt, sizeof dflt);
      o.nranks_list = 4;
    }
    if (o.nsizes == 0) {
      for (size_t b = 1024; b <= ((size_t)1 << 30); b *= 4) {
        o.sizes[o.nsizes++] = b;
      }
    }
    return o.reproducible ? run_sweep_repro(&o) : run_sweep(&o);
  }
  if (o.reproducible) {
    return tool_usage_error(&spec, "--reproducible goes with --sweep");
  }
  if (o.algorithm == NULL || o.nranks_list == 0 || !o.have_bytes) {
    return tool_usage_error(&spec, "--algorithm, --ranks and --bytes are required (or --sweep)");
  }
  if (o.nranks_list != 1) {
    return tool_usage_error(&spec, "--ranks: a list is only accepted with --sweep");
  }
  const mpiar__algorithm_t *alg =
      o.bcast ? mpiar__bcast_algorithm_find(o.algorithm) : mpiar__algorithm_find_any(o.algorithm);
  if (alg == NULL) {
    return tool_usage_error(&spec, "--algorithm: unknown algorithm '%s'", o.algorithm);
  }
  if (o.bytes % es != 0) {
    return tool_usage_error(&spec, "--bytes must be a multiple of the element size (%s)",
                            mpiar_dtype_name(o.dtype));
  }
  if (o.root >= o.ranks[0]) {
    return tool_usage_error(&spec, "--root must be below --ranks");
  }
  if (o.print && !rank_given) {
    return tool_usage_error(&spec, "--print-schedule needs --rank R with 0 <= R < P");
  }
  if (o.print && o.print_rank >= o.ranks[0]) {
    return tool_usage_error(&spec, "--rank %ld is not below --ranks %ld", o.print_rank, o.ranks[0]);
  }
  if (!o.print && rank_given) {
    return tool_usage_error(&spec, "--rank is only meaningful with --print-schedule");
  }
  /* The data checks hold every rank's buffers at once: refuse what cannot fit before trying. */
  const int p = (int)o.ranks[0];
  if (!o.print && o.data != 0 &&
      (o.data == 1 || (double)p * (double)o.bytes <= DATA_DEFAULT_BYTES)) {
    char err[256];
    char what[96];
    char sz[32];
    snprintf(what, sizeof what, "--data on %d ranks x --bytes %s", p,
             tool_format_bytes((double)o.bytes, sz, sizeof sz));
    if (tool_check_memory(data_memory(p, o.bytes, es), what, err, sizeof err) != 0) {
      return tool_usage_error(&spec, "%s (try --no-data)", err);
    }
  }
  return run_one(&o, alg);
}
