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
#include "base/common.h"
#include "base/settings.h"
#include "sim/sim.h"

static void usage(FILE *out) {
  fprintf(out, "usage: mpiar-sim --algorithm A --ranks P --bytes N [options]\n"
               "       mpiar-sim --algorithm A --ranks P --bytes N --print-schedule --rank R\n"
               "       mpiar-sim --sweep [--ranks P1,P2,...] [--sizes N1,N2,...] [options]\n"
               "options:\n"
               "  --algorithm A      allreduce:");
  for (int i = 0; i < mpiar__algorithm_count; i++) {
    fprintf(out, " %s", mpiar__algorithms[i].name);
  }
  for (int i = 0; i < mpiar__algorithm_variant_count; i++) {
    fprintf(out, " %s", mpiar__algorithm_variants[i].name);
  }
  fprintf(out, "; bcast:");
  for (int i = 0; i < mpiar__bcast_algorithm_count; i++) {
    fprintf(out, " %s", mpiar__bcast_algorithms[i].name);
  }
  fprintf(out,
          "\n"
          "  --collective C     allreduce (default) or bcast\n"
          "  --ranks P          number of ranks (1..1048576); --sweep takes a list\n"
          "  --bytes N          message size in bytes (K, M, G suffixes: powers of 1024)\n"
          "  --segment S        ring segment size in bytes (default: no segmentation)\n"
          "  --alpha SEC        seconds per message (default 2e-6)\n"
          "  --beta SEC         seconds per byte sent (default 1e-10)\n"
          "  --gamma SEC        seconds per byte reduced (default 5e-11)\n"
          "  --dtype T          element type (default float32)\n"
          "  --op O             reduction (default sum)\n"
          "  --in-place         reduce in place\n"
          "  --root R           broadcast root (default 0)\n"
          "  --data / --no-data move and check real data (default: when ranks x bytes <= 256M)\n"
          "  --seed S           input seed (default 1)\n"
          "  --print-schedule   print the schedule of --rank R instead of simulating\n"
          "  --sweep            print the fastest algorithm per (ranks, bytes)\n"
          "  --reproducible     with --sweep: each algorithm beside its reproducible-mode\n"
          "                     replacement (for --dtype), and the best of each kind\n"
          "  --sizes LIST       sizes for --sweep (default 1K,4K,...,1G)\n"
          "  --json             print JSON instead of text\n"
          "  --help             this text\n");
}

static int usage_error(const char *fmt, const char *arg) {
  fprintf(stderr, "mpiar-sim: ");
  fprintf(stderr, fmt, arg);
  fprintf(stderr, "\n");
  usage(stderr);
  return 2;
}

static int parse_double(const char *s, double *out) {
  char *end = NULL;
  errno = 0;
  double v = strtod(s, &end);
  if (errno != 0 || end == s || *end != '\0' || !isfinite(v) || v < 0) {
    return -1;
  }
  *out = v;
  return 0;
}

static int parse_int(const char *s, long lo, long hi, long *out) {
  char *end = NULL;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi) {
    return -1;
  }
  *out = v;
  return 0;
}

/* Parse a comma-separated list; sizes use the K/M/G grammar. @return count or -1. */
static int parse_list(const char *s, size_t *vals, int max, int sizes) {
  char buf[1024];
  if (strlen(s) >= sizeof buf) {
    return -1;
  }
  strcpy(buf, s);
  int n = 0;
  for (char *tok = strtok(buf, ","); tok != NULL; tok = strtok(NULL, ",")) {
    size_t v;
    long l;
    if (n == max) {
      return -1;
    }
    if (sizes) {
      if (mpiar__parse_size(tok, &v) != 0) {
        return -1;
      }
    } else {
      if (parse_int(tok, 1, 1 << 20, &l) != 0) {
        return -1;
      }
      v = (size_t)l;
    }
    vals[n++] = v;
  }
  return n;
}

typedef struct opts {
  const char *algorithm;
  int bcast;
  size_t ranks[16];
  int nranks_list;
  size_t bytes;
  int have_bytes;
  size_t segment_bytes;
  mpiar__cost_params_t cost;
  mpiar_dtype_t dtype;
  mpiar_op_t op;
  int in_place, root, data, print, print_rank, sweep, json, reproducible;
  size_t sizes[32];
  int nsizes;
  unsigned long long seed;
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
  cfg.root = o->root;
  cfg.segment_elems = o->segment_bytes / es;
  cfg.cost = o->cost;
  cfg.seed = o->seed;
  cfg.data = o->data >= 0 ? o->data : (double)p * (double)o->bytes <= 256.0 * 1024 * 1024;
  if (o->print) {
    mpiar__schedule_t s;
    int rc = mpiar__sim_build(&cfg, o->print_rank, &s);
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
        times[c] = NAN;
        const double blk = (double)bytes / p;
        const double m = seg ? ceil(blk / (double)seg) : 1;
        if (seg && m < 2) {
          continue; /* the block fits in one segment: same as the unsegmented ring */
        }
        const double steps = (double)p * 4.0 * (p > 1 ? p - 1 : 1) * m;
        if (steps > SWEEP_MAX_STEPS) {
          continue;
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
          failures++;
          continue;
        }
        times[c] = res.time_s;
        if (res.time_s < best) {
          best = res.time_s;
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

/* Modelled time of one allreduce without data; NAN when skipped or failed (counted). */
static double sweep_time(const opts_t *o, const mpiar__algorithm_t *alg, int p, size_t bytes,
                         size_t seg, int *failures) {
  const size_t es = mpiar_dtype_size(o->dtype);
  const double blk = (double)bytes / p, m = seg ? ceil(blk / (double)seg) : 1;
  if ((seg && m < 2) || (double)p * 4.0 * (p > 1 ? p - 1 : 1) * m > SWEEP_MAX_STEPS) {
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
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define NEED_VALUE()                                    \
  do {                                                  \
    if (v == NULL) {                                    \
      return usage_error("option %s needs a value", a); \
    }                                                   \
    i++;                                                \
  } while (0)
    long l;
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      usage(stdout);
      return 0;
    } else if (strcmp(a, "--algorithm") == 0) {
      NEED_VALUE();
      o.algorithm = v;
    } else if (strcmp(a, "--collective") == 0) {
      NEED_VALUE();
      if (strcmp(v, "allreduce") == 0) {
        o.bcast = 0;
      } else if (strcmp(v, "bcast") == 0) {
        o.bcast = 1;
      } else {
        return usage_error("unknown collective '%s' (allreduce or bcast)", v);
      }
    } else if (strcmp(a, "--ranks") == 0) {
      NEED_VALUE();
      o.nranks_list = parse_list(v, o.ranks, 16, 0);
      if (o.nranks_list <= 0) {
        return usage_error("--ranks '%s' is not a rank count (or list) in 1..1048576", v);
      }
    } else if (strcmp(a, "--bytes") == 0) {
      NEED_VALUE();
      if (mpiar__parse_size(v, &o.bytes) != 0) {
        return usage_error("--bytes '%s' is not a size (e.g. 4096, 64K, 1M)", v);
      }
      o.have_bytes = 1;
    } else if (strcmp(a, "--sizes") == 0) {
      NEED_VALUE();
      o.nsizes = parse_list(v, o.sizes, 32, 1);
      if (o.nsizes <= 0) {
        return usage_error("--sizes '%s' is not a list of sizes", v);
      }
    } else if (strcmp(a, "--segment") == 0) {
      NEED_VALUE();
      if (mpiar__parse_size(v, &o.segment_bytes) != 0) {
        return usage_error("--segment '%s' is not a size", v);
      }
    } else if (strcmp(a, "--alpha") == 0 || strcmp(a, "--beta") == 0 || strcmp(a, "--gamma") == 0) {
      NEED_VALUE();
      double *dst = a[2] == 'a' ? &o.cost.alpha : a[2] == 'b' ? &o.cost.beta : &o.cost.gamma;
      if (parse_double(v, dst) != 0) {
        return usage_error("'%s' is not a non-negative number of seconds", v);
      }
    } else if (strcmp(a, "--dtype") == 0) {
      NEED_VALUE();
      if (mpiar_dtype_from_name(v, &o.dtype) != MPIAR_SUCCESS) {
        return usage_error("unknown dtype '%s'", v);
      }
    } else if (strcmp(a, "--op") == 0) {
      NEED_VALUE();
      if (mpiar_op_from_name(v, &o.op) != MPIAR_SUCCESS) {
        return usage_error("unknown op '%s'", v);
      }
    } else if (strcmp(a, "--in-place") == 0) {
      o.in_place = 1;
    } else if (strcmp(a, "--root") == 0) {
      NEED_VALUE();
      if (parse_int(v, 0, 1 << 20, &l) != 0) {
        return usage_error("--root '%s' is not a rank", v);
      }
      o.root = (int)l;
    } else if (strcmp(a, "--data") == 0) {
      o.data = 1;
    } else if (strcmp(a, "--no-data") == 0) {
      o.data = 0;
    } else if (strcmp(a, "--seed") == 0) {
      NEED_VALUE();
      if (parse_int(v, 0, 1L << 30, &l) != 0) {
        return usage_error("--seed '%s' is not a number", v);
      }
      o.seed = (unsigned long long)l;
    } else if (strcmp(a, "--print-schedule") == 0) {
      o.print = 1;
    } else if (strcmp(a, "--rank") == 0) {
      NEED_VALUE();
      if (parse_int(v, 0, 1 << 20, &l) != 0) {
        return usage_error("--rank '%s' is not a rank", v);
      }
      o.print_rank = (int)l;
    } else if (strcmp(a, "--sweep") == 0) {
      o.sweep = 1;
    } else if (strcmp(a, "--json") == 0) {
      o.json = 1;
    } else if (strcmp(a, "--reproducible") == 0) {
      o.reproducible = 1;
    } else {
      return usage_error("unknown argument '%s'", a);
    }
#undef NEED_VALUE
  }
  const size_t es = mpiar_dtype_size(o.dtype);
  if (!o.bcast && !mpiar_op_supported(o.dtype, o.op)) {
    return usage_error("operation not defined on dtype %s", mpiar_dtype_name(o.dtype));
  }
  if (o.segment_bytes % es != 0) {
    return usage_error("--segment must be a multiple of the element size (%s)",
                       mpiar_dtype_name(o.dtype));
  }
  if (o.sweep) {
    if (o.bcast || o.print) {
      return usage_error("%s", "--sweep compares allreduce algorithms; drop --collective bcast "
                               "and --print-schedule");
    }
    if (o.nranks_list == 0) {
      const size_t dflt[] = {2, 8, 64, 1024};
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
    return usage_error("%s", "--reproducible goes with --sweep");
  }
  if (o.algorithm == NULL || o.nranks_list == 0 || !o.have_bytes) {
    return usage_error("%s", "--algorithm, --ranks and --bytes are required (or --sweep)");
  }
  if (o.nranks_list != 1) {
    return usage_error("--ranks '%s': a list is only accepted with --sweep", "...");
  }
  const mpiar__algorithm_t *alg =
      o.bcast ? mpiar__bcast_algorithm_find(o.algorithm) : mpiar__algorithm_find_any(o.algorithm);
  if (alg == NULL) {
    return usage_error("unknown algorithm '%s'", o.algorithm);
  }
  if (o.bytes % es != 0) {
    return usage_error("--bytes must be a multiple of the element size (%s)",
                       mpiar_dtype_name(o.dtype));
  }
  if (o.root >= (int)o.ranks[0]) {
    return usage_error("%s", "--root must be below --ranks");
  }
  if (o.print && (o.print_rank < 0 || o.print_rank >= (int)o.ranks[0])) {
    return usage_error("%s", "--print-schedule needs --rank R with 0 <= R < P");
  }
  if (!o.print && o.print_rank >= 0) {
    return usage_error("%s", "--rank is only meaningful with --print-schedule");
  }
  return run_one(&o, alg);
}
