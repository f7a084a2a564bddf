/*
 * mpiar-sim: run one collective's schedules for P ranks in the simulator, print the modelled time,
 * bandwidths and traffic; print a rank's schedule; or sweep a grid of rank counts and sizes and
 * name the fastest algorithm for each. With a topology (--nodes/--ppn, --node-sizes or --map)
 * the model has two levels and, without --algorithm, it prints every algorithm's time per size,
 * the winner, and each algorithm's traffic on the node links. No MPI is needed.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algorithms/algorithms.h"
#include "core/common.h"
#include "sim/sim.h"

static void usage(FILE *out) {
  fprintf(out, "usage: mpiar-sim --algorithm A --ranks P --bytes N [options]\n"
               "       mpiar-sim --algorithm A --ranks P --bytes N --print-schedule --rank R\n"
               "       mpiar-sim --sweep [--ranks P1,P2,...] [--sizes N1,N2,...] [options]\n"
               "       mpiar-sim --nodes N --ppn K [--placement block|roundrobin|random]\n"
               "                 [--alpha-inter SEC] [--beta-inter SEC] [--sizes LIST] [options]\n"
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
          "  --nodes N          two levels: N nodes (with --ppn or --node-sizes)\n"
          "  --ppn K            ranks per node\n"
          "  --node-sizes LIST  ranks of each node, e.g. 4,4,2 (uneven nodes)\n"
          "  --placement PL     block (default), roundrobin, or random (shuffled by --seed)\n"
          "  --map LIST         the node of each rank, e.g. 0,0,1,1,0 (instead of the above)\n"
          "  --alpha-inter SEC  seconds per message between nodes (default: --alpha)\n"
          "  --beta-inter SEC   seconds per byte between nodes, per node port (default: --beta)\n"
          "  --dtype T          element type (default float32)\n"
          "  --op O             reduction (default sum)\n"
          "  --in-place         reduce in place\n"
          "  --root R           broadcast root (default 0)\n"
          "  --data / --no-data move and check real data (default: when ranks x bytes <= 256M)\n"
          "  --seed S           input seed (default 1)\n"
          "  --print-schedule   print the schedule of --rank R instead of simulating\n"
          "  --sweep            print the fastest algorithm per (ranks, bytes)\n"
          "  --sizes LIST       sizes for --sweep and the topology table (default 1K,4K,...,1G)\n"
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

/* Parse a comma-separated list of integers in [lo, hi] into a new array. @return count or -1. */
static int parse_int_list(const char *s, long lo, long hi, int **out) {
  char *buf = strdup(s);
  int n = 0, cap = 0, *v = NULL;
  if (buf == NULL) {
    return -1;
  }
  for (char *tok = strtok(buf, ","); tok != NULL; tok = strtok(NULL, ",")) {
    long l;
    if (parse_int(tok, lo, hi, &l) != 0) {
      n = -1;
      break;
    }
    if (n == cap) {
      cap = cap ? 2 * cap : 64;
      int *nv = realloc(v, (size_t)cap * sizeof *nv);
      if (nv == NULL) {
        n = -1;
        break;
      }
      v = nv;
    }
    v[n++] = (int)l;
  }
  free(buf);
  if (n <= 0) {
    free(v);
    return -1;
  }
  *out = v;
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
  int in_place, root, data, print, print_rank, sweep, json;
  size_t sizes[32];
  int nsizes;
  unsigned long long seed;
  /* Topology: --nodes with --ppn or --node-sizes, or --map. */
  int nodes, ppn, placement; /* placement: 0 block, 1 round-robin, 2 random */
  int *node_sizes, nnode_sizes;
  int *map, nmap;
  int have_alpha_inter, have_beta_inter;
  mpiar__topology_t topo;
  int have_topo;
} opts_t;

static const char *placement_names[] = {"block", "roundrobin", "random"};

/* Ranks shuffled over nodes of the given sizes (a random rank -> node map). */
static int random_topology(mpiar__topology_t *t, int nnodes, const int *sizes,
                           unsigned long long seed) {
  int p = 0;
  for (int i = 0; i < nnodes; i++) {
    p += sizes[i];
  }
  int *label = malloc((size_t)p * sizeof *label);
  if (label == NULL) {
    return MPIAR_ERR_NOMEM;
  }
  for (int i = 0, r = 0; i < nnodes; i++) {
    for (int j = 0; j < sizes[i]; j++) {
      label[r++] = i;
    }
  }
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (int r = p - 1; r > 0; r--) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    const int q = (int)(x % (uint64_t)(r + 1)), tmp = label[r];
    label[r] = label[q];
    label[q] = tmp;
  }
  int rc = mpiar__topology_from_map(t, p, label);
  free(label);
  return rc;
}

static const char *topology_options[] = {"--alpha-inter", "--beta-inter", "--nodes",    "--ppn",
                                         "--node-sizes",  "--map",        "--placement"};

static int is_topology_option(const char *a) {
  for (size_t i = 0; i < sizeof topology_options / sizeof topology_options[0]; i++) {
    if (strcmp(a, topology_options[i]) == 0) {
      return 1;
    }
  }
  return 0;
}

/* One of topology_options with its value. @return 0, or 2 after a usage error. */
static int parse_topology_option(opts_t *o, const char *a, const char *v) {
  long l;
  if (strcmp(a, "--alpha-inter") == 0 || strcmp(a, "--beta-inter") == 0) {
    const int is_alpha = a[2] == 'a';
    if (parse_double(v, is_alpha ? &o->cost.alpha_inter : &o->cost.beta_inter) != 0) {
      return usage_error("'%s' is not a non-negative number of seconds", v);
    }
    *(is_alpha ? &o->have_alpha_inter : &o->have_beta_inter) = 1;
  } else if (strcmp(a, "--nodes") == 0 || strcmp(a, "--ppn") == 0) {
    if (parse_int(v, 1, 1 << 20, &l) != 0) {
      return usage_error("'%s' is not a count in 1..1048576", v);
    }
    *(a[2] == 'n' ? &o->nodes : &o->ppn) = (int)l;
  } else if (strcmp(a, "--node-sizes") == 0) {
    free(o->node_sizes);
    o->nnode_sizes = parse_int_list(v, 1, 1 << 20, &o->node_sizes);
    if (o->nnode_sizes <= 0) {
      o->node_sizes = NULL;
      return usage_error("--node-sizes '%s' is not a list of rank counts", v);
    }
  } else if (strcmp(a, "--map") == 0) {
    free(o->map);
    o->nmap = parse_int_list(v, 0, 1 << 30, &o->map);
    if (o->nmap <= 0) {
      o->map = NULL;
      return usage_error("--map '%s' is not a list of node numbers", v);
    }
  } else {
    o->placement = -1;
    for (int k = 0; k < 3; k++) {
      if (strcmp(v, placement_names[k]) == 0) {
        o->placement = k;
      }
    }
    if (o->placement < 0) {
      return usage_error("unknown placement '%s' (block, roundrobin or random)", v);
    }
  }
  return 0;
}

/* Build o->topo from the topology options, if any. @return 0, or 2 after a usage error. */
static int build_topology(opts_t *o) {
  int rc = MPIAR_SUCCESS;
  if (o->map != NULL) {
    if (o->nodes || o->ppn || o->node_sizes) {
      return usage_error("%s", "--map replaces --nodes, --ppn and --node-sizes");
    }
    rc = mpiar__topology_from_map(&o->topo, o->nmap, o->map);
  } else if (o->nodes || o->ppn || o->node_sizes) {
    if (o->node_sizes != NULL) {
      if ((o->nodes && o->nodes != o->nnode_sizes) || o->ppn) {
        return usage_error("%s", "--node-sizes gives the nodes: drop --ppn, and --nodes must "
                                 "match its length");
      }
      o->nodes = o->nnode_sizes;
    } else {
      if (!o->nodes || !o->ppn) {
        return usage_error("%s", "--nodes needs --ppn (or --node-sizes)");
      }
      o->node_sizes = malloc((size_t)o->nodes * sizeof *o->node_sizes);
      if (o->node_sizes == NULL) {
        return usage_error("%s", "out of memory");
      }
      for (int i = 0; i < o->nodes; i++) {
        o->node_sizes[i] = o->ppn;
      }
    }
    rc = o->placement == 2 ? random_topology(&o->topo, o->nodes, o->node_sizes, o->seed)
                           : mpiar__topology_uneven(&o->topo, o->nodes, o->node_sizes,
                                                    (mpiar__placement_t)o->placement);
  } else {
    return 0;
  }
  if (rc != MPIAR_SUCCESS) {
    return usage_error("topology: %s", mpiar_last_error());
  }
  o->have_topo = 1;
  if (o->nranks_list > 1 || (o->nranks_list == 1 && (int)o->ranks[0] != o->topo.nranks)) {
    return usage_error("%s", "--ranks must match the topology's ranks (or be left out)");
  }
  o->ranks[0] = (size_t)o->topo.nranks;
  o->nranks_list = 1;
  if (!o->have_alpha_inter) {
    o->cost.alpha_inter = o->cost.alpha;
  }
  if (!o->have_beta_inter) {
    o->cost.beta_inter = o->cost.beta;
  }
  return 0;
}

/* One line naming the topology, e.g. "8 nodes x 4 ranks (block)". */
static void describe_topology(const opts_t *o, char *buf, size_t len) {
  const mpiar__topology_t *t = &o->topo;
  if (o->map != NULL) {
    snprintf(buf, len, "%d ranks mapped on %d nodes (largest %d)", t->nranks, t->nnodes,
             t->max_node_size);
  } else if (mpiar__topology_is_regular(t)) {
    snprintf(buf, len, "%d nodes x %d ranks (%s)", t->nnodes, t->max_node_size,
             placement_names[o->placement]);
  } else {
    int lo = t->max_node_size;
    for (int i = 0; i < t->nnodes; i++) {
      lo = t->node_size[i] < lo ? t->node_size[i] : lo;
    }
    snprintf(buf, len, "%d nodes of %d..%d ranks, %d in all (%s)", t->nnodes, lo, t->max_node_size,
             t->nranks, placement_names[o->placement]);
  }
}

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
  cfg.topology = o->have_topo ? &o->topo : NULL;
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
  const double closed =
      alg->cost(p, cfg.count * es, es, cfg.segment_elems * es, &o->cost, cfg.topology);
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
    if (o->have_topo) {
      printf(", \"nodes\": %d, \"max_node_size\": %d, \"alpha_inter\": %.17g, "
             "\"beta_inter\": %.17g, \"inter_messages\": %zu, \"inter_bytes_total\": %zu, "
             "\"node_bytes_sent_max\": %zu, \"node_bytes_received_max\": %zu",
             o->topo.nnodes, o->topo.max_node_size, o->cost.alpha_inter, o->cost.beta_inter,
             res.inter_messages, res.inter_bytes_total, res.node_bytes_sent_max,
             res.node_bytes_received_max);
    }
    printf("}\n");
  } else {
    printf("algorithm      %s (%s)\n", alg->name, o->bcast ? "bcast" : "allreduce");
    printf("ranks          %d\n", p);
    printf("bytes          %zu (%zu x %s%s%s)\n", cfg.count * es, cfg.count,
           mpiar_dtype_name(o->dtype), o->bcast ? "" : ", ", o->bcast ? "" : mpiar_op_name(o->op));
    printf("segment        %zu bytes\n", cfg.segment_elems * es);
    printf("model          alpha %g s, beta %g s/B, gamma %g s/B\n", o->cost.alpha, o->cost.beta,
           o->cost.gamma);
    if (o->have_topo) {
      char topo[160];
      describe_topology(o, topo, sizeof topo);
      printf("topology       %s\n", topo);
      printf("between nodes  alpha %g s, beta %g s/B per node port\n", o->cost.alpha_inter,
             o->cost.beta_inter);
    }
    printf("time           %.6f us (closed form %.6f us)\n", res.time_s * 1e6, closed * 1e6);
    printf("algbw          %.3f GB/s\n", algbw);
    printf("busbw          %.3f GB/s\n", busbw);
    printf("messages       %zu total, %zu max per rank\n", res.messages, res.messages_max);
    printf("bytes sent     %zu max per rank, %zu total\n", res.bytes_sent_max,
           res.bytes_sent_total);
    printf("bytes reduced  %zu max per rank\n", res.bytes_reduced_max);
    printf("scratch        %zu bytes max per rank\n", res.scratch_bytes_max);
    if (o->have_topo) {
      printf("node links     %zu bytes max sent per node, %zu received; %zu messages, %zu bytes "
             "in all\n",
             res.node_bytes_sent_max, res.node_bytes_received_max, res.inter_messages,
             res.inter_bytes_total);
    }
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

/* Width of an algorithm's column in the sweep table. */
static int col_width(const mpiar__algorithm_t *a) {
  const int len = (int)strlen(a->name);
  return len > 18 ? len : 18;
}

/*
 * Sweep: every algorithm's modelled time per (ranks, bytes) and the winner. Without a topology
 * the flat algorithms (a hierarchical one is its flat equivalent there), then the ring with each
 * segment size in columns of their own; with one, every registry algorithm on it, a segmented one
 * with its best segment size (none or one of sweep_segments), then each algorithm's traffic on
 * the node links.
 */
typedef struct sweep {
  const mpiar__algorithm_t *algs[32]; /* the registry candidates; then the segmented rings */
  int nalg, ncand, topo_mode;
  double times[32];      /* per candidate at the current point; NAN: not run */
  size_t segs[32];       /* topology mode: the segment size of each candidate's best time */
  size_t node_bytes[32]; /* per registry candidate: the most bytes a node sends to others */
  char winner[64];
} sweep_t;

static void sweep_header(const opts_t *o, const sweep_t *sw) {
  printf("# mpiar-sim --sweep: alpha %g s, beta %g s/B, gamma %g s/B, %s %s; modelled time in "
         "us\n",
         o->cost.alpha, o->cost.beta, o->cost.gamma, mpiar_dtype_name(o->dtype),
         mpiar_op_name(o->op));
  if (o->have_topo) {
    char topo[160];
    describe_topology(o, topo, sizeof topo);
    printf("# topology %s; between nodes alpha %g s, beta %g s/B per node port\n", topo,
           o->cost.alpha_inter, o->cost.beta_inter);
    printf("# segmented algorithms:");
    for (int a = 0; a < sw->nalg; a++) {
      if (sw->algs[a]->flags & MPIAR__ALG_SEGMENTED) {
        printf(" %s", sw->algs[a]->name);
      }
    }
    printf(" (their best of no segments and 64K, 256K, 1M)\n");
  }
  printf("%6s %6s", "ranks", "bytes");
  for (int a = 0; a < sw->nalg; a++) {
    printf(" %*s", col_width(sw->algs[a]), sw->algs[a]->name);
  }
  for (size_t s = 0; s < NSEG && !sw->topo_mode; s++) {
    char nm[32], col[48];
    size_name(sweep_segments[s], nm, sizeof nm);
    snprintf(col, sizeof col, "ring/seg=%s", nm);
    printf(" %14s", col);
  }
  printf("  winner\n");
}

/*
 * Simulate one algorithm at (p, bytes) with segment @p seg into @p res. @return 1 when it ran,
 * 0 when skipped (one segment would hold the whole block or chunk, or too many steps), -1 when
 * the simulation failed (reported).
 */
static int sweep_sim(const opts_t *o, const mpiar__algorithm_t *alg, int p, size_t bytes,
                     size_t seg, mpiar__sim_result_t *res) {
  const size_t es = mpiar_dtype_size(o->dtype);
  /* Blocks of the ring, or chunks of a hierarchical build: bytes / p per segment either way. */
  const double m = seg ? ceil((double)bytes / p / (double)seg) : 1;
  if ((seg && m < 2) || (double)p * 4.0 * (p > 1 ? p - 1 : 1) * m > SWEEP_MAX_STEPS) {
    return 0;
  }
  mpiar__sim_config_t cfg = MPIAR__SIM_CONFIG_INIT;
  cfg.algorithm = alg;
  cfg.nranks = p;
  cfg.count = bytes / es;
  cfg.dtype = o->dtype;
  cfg.op = o->op;
  cfg.segment_elems = seg / es;
  cfg.cost = o->cost;
  cfg.topology = o->have_topo ? &o->topo : NULL;
  cfg.data = 0;
  cfg.check_hazards = 0;
  if (mpiar__sim_run(&cfg, res) != MPIAR_SUCCESS || !res->ok) {
    fprintf(stderr, "mpiar-sim: %s p=%d bytes=%zu segment=%zu: %s\n", alg->name, p, bytes, seg,
            res->ok ? mpiar_last_error() : res->error);
    return -1;
  }
  return 1;
}

/* Simulate every candidate at (p, bytes); @return the number of failed simulations. */
static int sweep_point(const opts_t *o, sweep_t *sw, int p, size_t bytes) {
  double best = INFINITY;
  int failures = 0;
  snprintf(sw->winner, sizeof sw->winner, "-");
  for (int c = 0; c < sw->ncand; c++) {
    const mpiar__algorithm_t *alg = c < sw->nalg ? sw->algs[c] : mpiar__algorithm_find("ring");
    const int nseg = sw->topo_mode && (alg->flags & MPIAR__ALG_SEGMENTED) ? 1 + (int)NSEG : 1;
    sw->times[c] = NAN;
    for (int g = 0; g < nseg; g++) {
      const size_t seg = c >= sw->nalg ? sweep_segments[c - sw->nalg]
                         : g == 0      ? 0
                                       : sweep_segments[g - 1];
      mpiar__sim_result_t res;
      const int ran = sweep_sim(o, alg, p, bytes, seg, &res);
      failures += ran < 0;
      if (ran <= 0 || res.time_s >= sw->times[c]) {
        continue; /* NAN compares false: the first run always lands */
      }
      sw->times[c] = res.time_s;
      sw->segs[c] = seg;
      if (c < sw->nalg) {
        sw->node_bytes[c] = res.node_bytes_sent_max;
      }
      if (res.time_s < best) {
        best = res.time_s;
        char nm[32];
        size_name(seg, nm, sizeof nm);
        snprintf(sw->winner, sizeof sw->winner, "%s%s%s", alg->name, seg ? "/seg=" : "",
                 seg ? nm : "");
      }
    }
  }
  return failures;
}

static void sweep_row_json(const opts_t *o, const sweep_t *sw, int p, size_t bytes, int first,
                           int failures) {
  printf("%s\n {\"ranks\": %d, \"bytes\": %zu, \"winner\": \"%s\", \"time_s\": {", first ? "" : ",",
         p, bytes, sw->winner);
  int firstc = 1;
  for (int c = 0; c < sw->ncand; c++) {
    if (isnan(sw->times[c])) {
      continue;
    }
    if (c < sw->nalg) {
      printf("%s\"%s\": %.9g", firstc ? "" : ", ", sw->algs[c]->name, sw->times[c]);
    } else {
      printf("%s\"ring/seg=%zu\": %.9g", firstc ? "" : ", ", sweep_segments[c - sw->nalg],
             sw->times[c]);
    }
    firstc = 0;
  }
  printf("}");
  if (o->have_topo) {
    printf(", \"segment_bytes\": {");
    for (int c = 0; c < sw->nalg; c++) {
      printf("%s\"%s\": %zu", c ? ", " : "", sw->algs[c]->name, sw->segs[c]);
    }
    printf("}, \"node_bytes_sent_max\": {");
    for (int c = 0; c < sw->nalg; c++) {
      printf("%s\"%s\": %zu", c ? ", " : "", sw->algs[c]->name,
             isnan(sw->times[c]) ? 0 : sw->node_bytes[c]);
    }
    printf("}");
  }
  printf(", \"ok\": %s}", failures ? "false" : "true");
}

static void sweep_row_text(const sweep_t *sw, int p, size_t bytes) {
  char bn[32];
  size_name(bytes, bn, sizeof bn);
  printf("%6d %6s", p, bn);
  for (int c = 0; c < sw->ncand; c++) {
    const int w = c < sw->nalg ? col_width(sw->algs[c]) : 14;
    if (isnan(sw->times[c])) {
      printf(" %*s", w, "-");
    } else {
      printf(" %*.2f", w, sw->times[c] * 1e6);
    }
  }
  printf("  %s\n", sw->winner);
}

/* Traffic on the node links at the last size, as a multiple of the vector. */
static void sweep_traffic(const sweep_t *sw, size_t bytes) {
  char bn[32];
  size_name(bytes, bn, sizeof bn);
  printf("# bytes one node sends to other nodes at %s, as a multiple of the vector (max over "
         "nodes):\n",
         bn);
  for (int c = 0; c < sw->nalg; c++) {
    printf("#   %-24s %.3f\n", sw->algs[c]->name,
           bytes ? (double)sw->node_bytes[c] / (double)bytes : 0);
  }
}

static int run_sweep(const opts_t *o) {
  const size_t es = mpiar_dtype_size(o->dtype);
  int failures = 0, first = 1;
  sweep_t sw;
  memset(&sw, 0, sizeof sw);
  for (int a = 0; a < mpiar__algorithm_count && sw.nalg < 32 - (int)NSEG; a++) {
    if (o->have_topo || !(mpiar__algorithms[a].flags & MPIAR__ALG_HIERARCHICAL)) {
      sw.algs[sw.nalg++] = &mpiar__algorithms[a];
    }
  }
  sw.topo_mode = o->have_topo;
  sw.ncand = sw.nalg + (sw.topo_mode ? 0 : (int)NSEG);
  if (o->json) {
    printf("[");
  } else {
    sweep_header(o, &sw);
  }
  for (int pi = 0; pi < o->nranks_list; pi++) {
    for (int si = 0; si < o->nsizes; si++) {
      const int p = (int)o->ranks[pi];
      const size_t bytes = o->sizes[si] / es * es;
      failures += sweep_point(o, &sw, p, bytes);
      if (o->json) {
        sweep_row_json(o, &sw, p, bytes, first, failures);
        first = 0;
      } else {
        sweep_row_text(&sw, p, bytes);
      }
      fflush(stdout);
    }
  }
  if (o->json) {
    printf("\n]\n");
  } else if (o->have_topo && o->nsizes > 0) {
    sweep_traffic(&sw, o->sizes[o->nsizes - 1] / es * es);
  }
  return failures ? 1 : 0;
}

/* Everything after parsing: check the combination of options, then run. */
static int dispatch(opts_t *o) {
  const size_t es = mpiar_dtype_size(o->dtype);
  if (!o->bcast && !mpiar_op_supported(o->dtype, o->op)) {
    return usage_error("operation not defined on dtype %s", mpiar_dtype_name(o->dtype));
  }
  if (o->segment_bytes % es != 0) {
    return usage_error("--segment must be a multiple of the element size (%s)",
                       mpiar_dtype_name(o->dtype));
  }
  int urc = build_topology(o);
  if (urc != 0) {
    return urc;
  }
  /* With a topology and no algorithm: the per-algorithm table on it. */
  if (o->sweep || (o->have_topo && o->algorithm == NULL && !o->print)) {
    if (o->have_topo && o->nsizes == 0 && o->have_bytes) {
      o->sizes[o->nsizes++] = o->bytes;
    }
    if (o->bcast || o->print) {
      return usage_error("%s", "--sweep compares allreduce algorithms; drop --collective bcast "
                               "and --print-schedule");
    }
    if (o->nranks_list == 0) {
      const size_t dflt[] = {2, 8, 64, 1024};
      memcpy(o->ranks, dflt, sizeof dflt);
      o->nranks_list = 4;
    }
    if (o->nsizes == 0) {
      for (size_t b = 1024; b <= ((size_t)1 << 30); b *= 4) {
        o->sizes[o->nsizes++] = b;
      }
    }
    return run_sweep(o);
  }
  if (o->algorithm == NULL || o->nranks_list == 0 || !o->have_bytes) {
    return usage_error("%s", "--algorithm, --ranks and --bytes are required (or --sweep)");
  }
  if (o->nranks_list != 1) {
    return usage_error("--ranks '%s': a list is only accepted with --sweep", "...");
  }
  const mpiar__algorithm_t *alg = o->bcast ? mpiar__bcast_algorithm_find(o->algorithm)
                                           : mpiar__algorithm_find_any(o->algorithm);
  if (alg == NULL) {
    return usage_error("unknown algorithm '%s'", o->algorithm);
  }
  if (o->bytes % es != 0) {
    return usage_error("--bytes must be a multiple of the element size (%s)",
                       mpiar_dtype_name(o->dtype));
  }
  if (o->root >= (int)o->ranks[0]) {
    return usage_error("%s", "--root must be below --ranks");
  }
  if (o->print && (o->print_rank < 0 || o->print_rank >= (int)o->ranks[0])) {
    return usage_error("%s", "--print-schedule needs --rank R with 0 <= R < P");
  }
  if (!o->print && o->print_rank >= 0) {
    return usage_error("%s", "--rank is only meaningful with --print-schedule");
  }
  return run_one(o, alg);
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
    } else if (is_topology_option(a)) {
      NEED_VALUE();
      const int urc = parse_topology_option(&o, a, v);
      if (urc != 0) {
        return urc;
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
    } else {
      return usage_error("unknown argument '%s'", a);
    }
#undef NEED_VALUE
  }
  int rc = dispatch(&o);
  mpiar__topology_destroy(&o.topo);
  free(o.node_sizes);
  free(o.map);
  return rc;
}
