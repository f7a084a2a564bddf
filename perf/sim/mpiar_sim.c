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
#include "common/tool.h"
#include "sim/sim.h"
#include "schedule_cli.h"
#include "train_cli.h"
#include "tuning/tuning.h"

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
  int every_rank; /* --every-rank: no quotient simulation */
  long root, print_rank;
  size_t sizes[32];
  int nsizes;
  long seed;
  /* Two levels: --nodes with --ppn or --node-sizes, or --map (lists in node_size_list, map_list).
   */
  long nodes, ppn;
  int placement; /* 0 block, 1 round-robin, 2 random */
  int nnode_sizes, nmap;
  int have_nodes, have_ppn, have_alpha_inter, have_beta_inter, rank_given;
  mpiar__topology_t topo;
  int have_topo;
  /* --train: the training-step predictor (train_cli.h). */
  train_cli_t train;
  int have_train_opts; /* an option that only --train takes was given */
  int no_overlap;
  /* A routed network (--topology torus:... | fattree:...; sim.h, "Routed networks"). */
  const char *network_spec;
  mpiar__network_t net;
  int have_net, link_report;
  double hop_latency;
  /* --schedule FILE, --export ALGORITHM [--output FILE] (schedule_cli.h). */
  const char *schedule_file, *export_alg, *output;
} opts_t;

#define MAX_NODE_LIST 4096
#define MAX_MAP 65536
static long node_size_list[MAX_NODE_LIST];
static long map_list[MAX_MAP];

static const char *const placement_names[] = {"block", "roundrobin", "random"};

static int parse_placement(const char *value, void *dest, char *err, size_t errlen) {
  for (int k = 0; k < 3; k++) {
    if (strcmp(value, placement_names[k]) == 0) {
      *(int *)dest = k;
      return 0;
    }
  }
  snprintf(err, errlen, "unknown placement '%s' (block, roundrobin or random)", value);
  return -1;
}

/* Ranks shuffled over nodes of the given sizes (a random rank -> node map). */
static int random_topology(mpiar__topology_t *t, int nnodes, const int *sizes, long seed) {
  uint64_t x = (uint64_t)seed * 0x9E3779B97F4A7C15ull + 1;
  return mpiar__topology_shuffled(t, nnodes, sizes, &x);
}

/* The node sizes the options give: --node-sizes, or --nodes x --ppn. NULL after an error. */
static int *node_sizes(const opts_t *o, const tool_spec_t *spec, int *nnodes) {
  if (o->nnode_sizes > 0 && (o->have_ppn || (o->have_nodes && o->nodes != o->nnode_sizes))) {
    tool_usage_error(spec, "--node-sizes gives the nodes: drop --ppn, and --nodes must match "
                           "its length");
    return NULL;
  }
  if (o->nnode_sizes == 0 && !(o->have_nodes && o->have_ppn)) {
    tool_usage_error(spec, "--nodes needs --ppn (or --node-sizes)");
    return NULL;
  }
  *nnodes = o->nnode_sizes > 0 ? o->nnode_sizes : (int)o->nodes;
  int *sizes = malloc((size_t)*nnodes * sizeof *sizes);
  if (sizes == NULL) {
    tool_usage_error(spec, "no memory for %d nodes", *nnodes);
    return NULL;
  }
  for (int i = 0; i < *nnodes; i++) {
    sizes[i] = o->nnode_sizes > 0 ? (int)node_size_list[i] : (int)o->ppn;
  }
  return sizes;
}

/*
 * Build o->topo from the topology options, if any, and make --ranks agree with it.
 * @return -1 to go on, else the exit code (after a usage error).
 */
static int build_topology(opts_t *o, const tool_spec_t *spec) {
  int rc;
  const int wants = o->have_nodes || o->have_ppn || o->nnode_sizes > 0;
  if (o->nmap > 0) {
    if (wants) {
      return tool_usage_error(spec, "--map replaces --nodes, --ppn and --node-sizes");
    }
    int *label = malloc((size_t)o->nmap * sizeof *label);
    if (label == NULL) {
      return tool_usage_error(spec, "no memory for a map of %d ranks", o->nmap);
    }
    for (int r = 0; r < o->nmap; r++) {
      label[r] = (int)map_list[r];
    }
    rc = mpiar__topology_from_map(&o->topo, o->nmap, label);
    free(label);
  } else if (wants) {
    int nnodes = 0, *sizes = node_sizes(o, spec, &nnodes);
    if (sizes == NULL) {
      return TOOL_EXIT_USAGE;
    }
    rc = o->placement == 2
             ? random_topology(&o->topo, nnodes, sizes, o->seed)
             : mpiar__topology_uneven(&o->topo, nnodes, sizes, (mpiar__placement_t)o->placement);
    free(sizes);
  } else {
    return -1;
  }
  if (rc != MPIAR_SUCCESS) {
    return tool_usage_error(spec, "topology: %s", mpiar_last_error());
  }
  o->have_topo = 1;
  if (o->nranks_list > 1 || (o->nranks_list == 1 && o->ranks[0] != o->topo.nranks)) {
    const int p = o->topo.nranks;
    mpiar__topology_destroy(&o->topo);
    return tool_usage_error(spec, "--ranks must match the topology's %d ranks (or be left out)", p);
  }
  o->ranks[0] = o->topo.nranks;
  o->nranks_list = 1;
  if (!o->have_alpha_inter) {
    o->cost.alpha_inter = o->cost.alpha;
  }
  if (!o->have_beta_inter) {
    o->cost.beta_inter = o->cost.beta;
  }
  return -1;
}

/* One line naming the topology, e.g. "8 nodes x 4 ranks (block)". */
static void describe_topology(const opts_t *o, char *buf, size_t len) {
  const mpiar__topology_t *t = &o->topo;
  if (o->nmap > 0) {
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

/* Without --data or --no-data, data are moved and checked up to this many bytes over all ranks. */
#define DATA_DEFAULT_BYTES (256.0 * 1024 * 1024)

/* The collectives of --collective (opts_t.bcast): 0 allreduce, 1 bcast, 2 reduce-scatter,
 * 3 allgather. The last two take --bytes as the whole vector, p blocks. */
static const char *const coll_names[] = {"allreduce", "bcast", "reduce_scatter", "allgather"};
static const int coll_sim[] = {MPIAR__SIM_ALLREDUCE, MPIAR__SIM_BCAST, MPIAR__SIM_REDUCE_SCATTER,
                               MPIAR__SIM_ALLGATHER};

static double busbw_factor(int bcast, int p) {
  /* Allreduce moves 2(p-1)/p of the vector per rank at best; broadcast (p-1)/p... the vector;
   * reduce-scatter and allgather (p-1)/p. */
  return bcast >= 2 ? (double)(p - 1) / p : bcast ? 1.0 : 2.0 * (p - 1) / p;
}

static int run_one(const opts_t *o, const mpiar__algorithm_t *alg) {
  const size_t es = mpiar_dtype_size(o->dtype);
  const int p = (int)o->ranks[0];
  mpiar__sim_config_t cfg = MPIAR__SIM_CONFIG_INIT;
  cfg.algorithm = alg;
  cfg.collective = coll_sim[o->bcast];
  cfg.nranks = p;
  const size_t blocks = o->bcast >= 2 ? (size_t)p : 1; /* --bytes is p blocks */
  cfg.count = o->bytes / es / blocks;
  cfg.dtype = o->dtype;
  cfg.op = o->op;
  cfg.in_place = o->in_place;
  cfg.root = (int)o->root;
  cfg.segment_elems = o->segment_bytes / es;
  cfg.cost = o->cost;
  cfg.topology = o->have_topo ? &o->topo : NULL;
  cfg.network = o->have_net ? &o->net : NULL;
  double *link_bytes = NULL;
  if (o->have_net && o->link_report) {
    link_bytes = calloc((size_t)mpiar__network_links(&o->net, p), sizeof *link_bytes);
    if (link_bytes == NULL) {
      fprintf(stderr, "mpiar-sim: no memory for the link report\n");
      return 1;
    }
  }
  cfg.link_bytes = link_bytes;
  cfg.seed = (uint64_t)o->seed;
  cfg.data = o->data >= 0 ? o->data : (double)p * (double)o->bytes <= DATA_DEFAULT_BYTES;
  /* Timing only: one representative per class of a symmetry, where the schedules have one. */
  cfg.quotient = !cfg.data && !o->every_rank;
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
    free(link_bytes);
    return 1;
  }
  char busiest[64] = "";
  if (o->have_net) {
    mpiar__network_link_name(&o->net, p, res.link_busiest, busiest, sizeof busiest);
  }
  const double closed =
      alg->cost(p, cfg.count * es * blocks, es, cfg.segment_elems * es, &o->cost, cfg.topology);
  const double bytes = (double)(cfg.count * es * blocks);
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
           coll_names[o->bcast], p, cfg.count * es * blocks, cfg.count,
           mpiar_dtype_name(o->dtype), mpiar_op_name(o->op), o->in_place ? "true" : "false",
           cfg.segment_elems * es, o->cost.alpha, o->cost.beta, o->cost.gamma, res.time_s, closed,
           algbw, busbw, res.messages, res.messages_max, res.bytes_sent_max, res.bytes_sent_total,
           res.bytes_reduced_max, res.scratch_bytes_max, res.steps, cfg.data ? "true" : "false",
           res.hazards_checked ? "true" : "false", res.ok ? "true" : "false");
    json_string(res.ok ? "" : res.error);
    printf(", \"ranks_simulated\": %d, \"symmetry\": ", res.reps);
    json_string(res.symmetry);
    if (o->have_topo) {
      printf(", \"nodes\": %d, \"max_node_size\": %d, \"alpha_inter\": %.17g, "
             "\"beta_inter\": %.17g, \"inter_messages\": %zu, \"inter_bytes_total\": %zu, "
             "\"node_bytes_sent_max\": %zu, \"node_bytes_received_max\": %zu",
             o->topo.nnodes, o->topo.max_node_size, o->cost.alpha_inter, o->cost.beta_inter,
             res.inter_messages, res.inter_bytes_total, res.node_bytes_sent_max,
             res.node_bytes_received_max);
    }
    if (o->have_net) {
      printf(", \"network\": ");
      json_string(o->network_spec);
      printf(", \"hop_latency\": %.17g, \"links\": %d, \"link_bytes_max\": %.17g, "
             "\"link_busiest\": ",
             o->net.hop_latency, res.links, res.link_bytes_max);
      json_string(busiest);
      printf(", \"link_bytes_total\": %.17g, \"hops_total\": %zu, \"hops_max\": %d",
             res.link_bytes_total, res.hops_total, res.hops_max);
      if (link_bytes != NULL) {
        printf(", \"link_bytes\": [");
        for (int l = 0; l < res.links; l++) {
          printf("%s%.17g", l ? ", " : "", link_bytes[l]);
        }
        printf("]");
      }
    }
    printf("}\n");
  } else {
    printf("algorithm      %s (%s)\n", alg->name, coll_names[o->bcast]);
    printf("ranks          %d\n", p);
    printf("bytes          %zu (%zu x %s%s%s%s)\n", cfg.count * es * blocks, cfg.count,
           mpiar_dtype_name(o->dtype), blocks > 1 ? " per rank" : "",
           o->bcast % 2 ? "" : ", ", o->bcast % 2 ? "" : mpiar_op_name(o->op));
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
    if (o->have_net) {
      char net[160];
      mpiar__network_describe(&o->net, net, sizeof net);
      printf("network        %s, %g s per hop, link beta %g s/B\n", net, o->net.hop_latency,
             o->cost.beta);
    }
    printf("time           %.6f us (closed form %.6f us%s)\n", res.time_s * 1e6, closed * 1e6,
           o->have_net ? ", flat model" : "");
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
    if (o->have_net) {
      printf("links          %d; busiest %s, %.0f bytes; %.0f bytes over all links\n", res.links,
             busiest, res.link_bytes_max, res.link_bytes_total);
      printf("hops           %zu in all, %.2f per message, %d max\n", res.hops_total,
             res.messages ? (double)res.hops_total / (double)res.messages : 0.0, res.hops_max);
      for (int l = 0; link_bytes != NULL && l < res.links; l++) {
        char name[64];
        mpiar__network_link_name(&o->net, p, l, name, sizeof name);
        printf("link %-9s %.0f bytes\n", name, link_bytes[l]);
      }
    }
    if (res.reps < p) {
      printf("simulated      %d of %d ranks (%s)\n", res.reps, p, res.symmetry);
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

/*
 * Modelled time of one allreduce without data; NAN when skipped (too big, or a segment that would
 * hold a whole ring block or hierarchical chunk) or failed (counted in *failures). With
 * @p node_bytes, the most bytes one node sends to the others.
 */
static double sweep_time(const opts_t *o, const mpiar__algorithm_t *alg, int p, size_t bytes,
                         size_t seg, int *failures, size_t *node_bytes) {
  const size_t es = mpiar_dtype_size(o->dtype);
  /* Ring blocks and hierarchical chunks alike hold bytes / p per segment. */
  const double blk = (double)bytes / p;
  const double m = seg ? ceil(blk / (double)seg) : 1;
  if (seg && m < 2) {
    return NAN; /* one segment would hold the block: same as unsegmented */
  }
  mpiar__sim_config_t cfg = MPIAR__SIM_CONFIG_INIT;
  /* Timing only, one representative per class of a symmetry where there is one; a run that
   * would still simulate more than SWEEP_MAX_STEPS steps is skipped. */
  cfg.quotient = !o->every_rank;
  cfg.max_steps = SWEEP_MAX_STEPS;
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
  mpiar__sim_result_t res;
  const int rc = mpiar__sim_run(&cfg, &res);
  if (rc == MPIAR_ERR_UNSUPPORTED) {
    return NAN; /* too many steps to simulate: not run */
  }
  if (rc != MPIAR_SUCCESS || !res.ok) {
    fprintf(stderr, "mpiar-sim: %s p=%d bytes=%zu segment=%zu: %s\n", alg->name, p, bytes, seg,
            res.ok ? mpiar_last_error() : res.error);
    (*failures)++;
    return NAN;
  }
  if (node_bytes != NULL) {
    *node_bytes = res.node_bytes_sent_max;
  }
  return res.time_s;
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
      size_t node_bytes = 0;
      const double t = sweep_time(o, alg, p, bytes, seg, &failures, &node_bytes);
      if (isnan(t) || t >= sw->times[c]) {
        continue; /* NAN compares false: the first time always lands */
      }
      sw->times[c] = t;
      sw->segs[c] = seg;
      if (c < sw->nalg) {
        sw->node_bytes[c] = node_bytes;
      }
      if (t < best) {
        best = t;
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

/*
 * --sweep --reproducible: for every registry algorithm (and the ring with each sweep segment),
 * its time, its reproducible replacement's time and their ratio; then the best of the registry
 * against the best of the replacements, which is what `auto` costs in each mode.
 */
static int run_sweep_repro(const opts_t *o) {
  const size_t es = mpiar_dtype_size(o->dtype);
  const mpiar__algorithm_t *ring = mpiar__algorithm_find("ring");
  /* The flat algorithms: without a topology a hierarchical one is its flat equivalent. */
  const mpiar__algorithm_t *flat[32];
  int nflat = 0;
  for (int a = 0; a < mpiar__algorithm_count && nflat < 32; a++) {
    if (!(mpiar__algorithms[a].flags & MPIAR__ALG_HIERARCHICAL)) {
      flat[nflat++] = &mpiar__algorithms[a];
    }
  }
  const int ncand = nflat + (int)NSEG;
  int failures = 0;
  printf("# mpiar-sim --sweep --reproducible: alpha %g s, beta %g s/B, gamma %g s/B, %s %s; "
         "modelled time in us; each algorithm, then its reproducible replacement / its time\n",
         o->cost.alpha, o->cost.beta, o->cost.gamma, mpiar_dtype_name(o->dtype),
         mpiar_op_name(o->op));
  printf("%6s %6s", "ranks", "bytes");
  for (int c = 0; c < ncand; c++) {
    char col[64], nm[32];
    if (c < nflat) {
      snprintf(col, sizeof col, "%s", flat[c]->name);
    } else {
      size_name(sweep_segments[c - nflat], nm, sizeof nm);
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
        const mpiar__algorithm_t *alg = c < nflat ? flat[c] : ring;
        const size_t seg = c < nflat ? 0 : sweep_segments[c - nflat];
        const mpiar__algorithm_t *rep = mpiar__algorithm_reproducible(alg, p, o->dtype);
        const double t = sweep_time(o, alg, p, bytes, seg, &failures, NULL);
        const double tr = rep == alg ? t : sweep_time(o, rep, p, bytes, seg, &failures, NULL);
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
  for (int i = 0; i < (int)(sizeof coll_names / sizeof coll_names[0]); i++) {
    if (strcmp(value, coll_names[i]) == 0) {
      *(int *)dest = i;
      return 0;
    }
  }
  snprintf(err, errlen,
           "unknown collective '%s' (allreduce, bcast, reduce_scatter or allgather)", value);
  return -1;
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
  for (int i = 0; i < mpiar__reduce_scatter_algorithm_count && w < len; i++) {
    w += (size_t)snprintf(buf + w, len - w, "%s%s", i ? " " : ";\nreduce_scatter: ",
                          mpiar__reduce_scatter_algorithms[i].name);
  }
  for (int i = 0; i < mpiar__allgather_algorithm_count && w < len; i++) {
    w += (size_t)snprintf(buf + w, len - w, "%s%s", i ? " " : ";\nallgather: ",
                          mpiar__allgather_algorithms[i].name);
  }
}

/*
 * The table on a routed network (--topology without --algorithm): every flat registry algorithm's
 * simulated time per size (timing only), the winner, and each one's busiest link at the largest
 * size as a multiple of the vector.
 */
static int run_net_table(const opts_t *o) {
  const int p = (int)o->ranks[0];
  const mpiar__algorithm_t *algs[64];
  int nalg = 0;
  for (int a = 0; a < mpiar__algorithm_count && nalg < 64; a++) {
    if (!(mpiar__algorithms[a].flags & MPIAR__ALG_HIERARCHICAL)) {
      algs[nalg++] = &mpiar__algorithms[a];
    }
  }
  char net[160];
  mpiar__network_describe(&o->net, net, sizeof net);
  printf("# mpiar-sim --topology %s: %d ranks on a %s; alpha %g s, link beta %g s/B, %g s per "
         "hop, gamma %g s/B; simulated time in us\n",
         o->network_spec, p, net, o->cost.alpha, o->cost.beta, o->net.hop_latency, o->cost.gamma);
  printf("%10s", "bytes");
  for (int a = 0; a < nalg; a++) {
    printf(" %*s", (int)(strlen(algs[a]->name) > 10 ? strlen(algs[a]->name) : 10), algs[a]->name);
  }
  printf("  winner\n");
  double busiest[64] = {0};
  int failures = 0;
  const size_t es = mpiar_dtype_size(o->dtype);
  for (int i = 0; i < o->nsizes; i++) {
    char bn[32];
    tool_format_bytes((double)o->sizes[i], bn, sizeof bn);
    printf("%10s", bn);
    double best = 0;
    const char *winner = "-";
    for (int a = 0; a < nalg; a++) {
      mpiar__sim_config_t cfg = MPIAR__SIM_CONFIG_INIT;
      cfg.algorithm = algs[a];
      cfg.nranks = p;
      cfg.count = o->sizes[i] / es;
      cfg.dtype = o->dtype;
      cfg.op = o->op;
      cfg.cost = o->cost;
      cfg.data = 0;
      cfg.check_hazards = 0;
      cfg.network = &o->net;
      mpiar__sim_result_t res;
      const int w = (int)(strlen(algs[a]->name) > 10 ? strlen(algs[a]->name) : 10);
      if (mpiar__sim_run(&cfg, &res) != MPIAR_SUCCESS || !res.ok) {
        failures++;
        printf(" %*s", w, "-");
        continue;
      }
      printf(" %*.2f", w, res.time_s * 1e6);
      if (winner[0] == '-' || res.time_s < best) {
        best = res.time_s;
        winner = algs[a]->name;
      }
      busiest[a] = res.link_bytes_max / (double)(cfg.count * es);
    }
    printf("  %s\n", winner);
  }
  printf("# busiest link at the largest size, in vectors:");
  for (int a = 0; a < nalg; a++) {
    printf(" %s %.3f%s", algs[a]->name, busiest[a], a + 1 < nalg ? "," : "\n");
  }
  return failures ? 1 : 0;
}

/*
 * --topology: parse the network and check it against the other options; without --algorithm,
 * print the table. @return the exit code, or -1 to go on with one simulation.
 */
static int run_network(opts_t *o, const tool_spec_t *spec) {
  char err[200];
  if (mpiar__network_parse(o->network_spec, &o->net, err, sizeof err) != 0) {
    return tool_usage_error(spec, "--topology %s", err);
  }
  o->net.hop_latency = o->hop_latency;
  o->have_net = 1;
  if (o->have_topo) {
    return tool_usage_error(spec, "--topology replaces --nodes, --ppn, --node-sizes and --map");
  }
  if (o->sweep || o->reproducible || o->bcast) {
    return tool_usage_error(spec, "--topology runs allreduce: drop --sweep, --reproducible and "
                                  "--collective bcast");
  }
  const int nodes = mpiar__network_nodes(&o->net);
  if (o->nranks_list > 1 || (nodes > 0 && o->nranks_list == 1 && o->ranks[0] != nodes)) {
    return tool_usage_error(spec, "--ranks must be the torus's %d nodes (or be left out)", nodes);
  }
  if (nodes == 0 && o->nranks_list == 0) {
    return tool_usage_error(spec, "a fat tree needs --ranks");
  }
  if (nodes > 0) {
    o->ranks[0] = nodes;
    o->nranks_list = 1;
  }
  if (o->algorithm == NULL && !o->print) {
    if (o->nsizes == 0) {
      if (o->have_bytes) {
        o->sizes[o->nsizes++] = o->bytes;
      } else {
        for (size_t b = 32; b <= ((size_t)128 << 20); b *= 8) {
          o->sizes[o->nsizes++] = b;
        }
      }
    }
    const size_t es = mpiar_dtype_size(o->dtype);
    for (int i = 0; i < o->nsizes; i++) {
      if (o->sizes[i] % es != 0) {
        return tool_usage_error(spec, "--sizes must be multiples of the element size (%s)",
                                mpiar_dtype_name(o->dtype));
      }
    }
    return run_net_table(o);
  }
  return -1;
}

/* Bytes the data checks of one simulation allocate at least: per rank the input copy, the
 * output and its init map, plus the reference result. */
static double data_memory(int p, size_t bytes, size_t es) {
  return (double)p * (2.0 * (double)bytes + (double)(bytes / es)) + (double)bytes;
}

/* After parsing and the topology: check the combination of options, then run. */
static int dispatch(opts_t *o, const tool_spec_t *spec) {
  const size_t es = mpiar_dtype_size(o->dtype);
  /* With a topology and no algorithm: the per-algorithm table on it. */
  if (o->have_topo && o->algorithm == NULL && !o->print && !o->sweep) {
    o->sweep = 1;
    if (o->nsizes == 0 && o->have_bytes) {
      o->sizes[o->nsizes++] = o->bytes;
    }
  }
  if (o->have_topo && o->reproducible) {
    return tool_usage_error(spec, "--reproducible compares flat algorithms: drop the topology");
  }
  if (o->sweep) {
    if (o->bcast || o->print) {
      return tool_usage_error(spec, "--sweep compares allreduce algorithms; drop --collective "
                                    "bcast and --print-schedule");
    }
    if (o->nranks_list == 0) {
      const long dflt[] = {2, 8, 64, 1024};
      memcpy(o->ranks, dflt, sizeof dflt);
      o->nranks_list = 4;
    }
    if (o->nsizes == 0) {
      for (size_t b = 1024; b <= ((size_t)1 << 30); b *= 4) {
        o->sizes[o->nsizes++] = b;
      }
    }
    return o->reproducible ? run_sweep_repro(o) : run_sweep(o);
  }
  if (o->reproducible) {
    return tool_usage_error(spec, "--reproducible goes with --sweep");
  }
  if (o->algorithm == NULL || o->nranks_list == 0 || !o->have_bytes) {
    return tool_usage_error(spec, "--algorithm, --ranks and --bytes are required (or --sweep)");
  }
  if (o->nranks_list != 1) {
    return tool_usage_error(spec, "--ranks: a list is only accepted with --sweep");
  }
  const mpiar__algorithm_t *alg = o->bcast == 1   ? mpiar__bcast_algorithm_find(o->algorithm)
                                  : o->bcast == 2 ? mpiar__reduce_scatter_algorithm_find(o->algorithm)
                                  : o->bcast == 3 ? mpiar__allgather_algorithm_find(o->algorithm)
                                                  : mpiar__algorithm_find_any(o->algorithm);
  if (alg == NULL && !o->bcast && strchr(o->algorithm, '/') != NULL) {
    char why[512]; /* NAME/k=N: a value out of range, or a parameter the algorithm lacks */
    mpiar__algorithm_explain(o->algorithm, why, sizeof why);
    return tool_usage_error(spec, "--algorithm: %s", why);
  }
  if (alg == NULL) {
    return tool_usage_error(spec, "--algorithm: unknown algorithm '%s'", o->algorithm);
  }
  if (o->bytes % es != 0) {
    return tool_usage_error(spec, "--bytes must be a multiple of the element size (%s)",
                            mpiar_dtype_name(o->dtype));
  }
  if (o->bcast >= 2 && o->bytes % (es * (size_t)o->ranks[0]) != 0) {
    return tool_usage_error(spec, "--bytes of a %s is p equal blocks: a multiple of %ld elements",
                            coll_names[o->bcast], o->ranks[0]);
  }
  if (o->root >= o->ranks[0]) {
    return tool_usage_error(spec, "--root must be below --ranks");
  }
  if (o->print && !o->rank_given) {
    return tool_usage_error(spec, "--print-schedule needs --rank R with 0 <= R < P");
  }
  if (o->print && o->print_rank >= o->ranks[0]) {
    return tool_usage_error(spec, "--rank %ld is not below --ranks %ld", o->print_rank,
                            o->ranks[0]);
  }
  if (!o->print && o->rank_given) {
    return tool_usage_error(spec, "--rank is only meaningful with --print-schedule");
  }
  /* The data checks hold every rank's buffers at once: refuse what cannot fit before trying. */
  const int p = (int)o->ranks[0];
  if (!o->print && o->data != 0 &&
      (o->data == 1 || (double)p * (double)o->bytes <= DATA_DEFAULT_BYTES)) {
    char err[256];
    char what[96];
    char sz[32];
    snprintf(what, sizeof what, "--data on %d ranks x --bytes %s", p,
             tool_format_bytes((double)o->bytes, sz, sizeof sz));
    if (tool_check_memory(data_memory(p, o->bytes, es), what, err, sizeof err) != 0) {
      return tool_usage_error(spec, "%s (try --no-data)", err);
    }
  }
  return run_one(o, alg);
}

/* --train: check what the predictor cannot take, fill in its defaults, print the table. */
static int run_train(opts_t *o, const tool_spec_t *spec) {
  if (o->sweep || o->print || o->have_bytes || o->nranks_list > 0 || o->have_nodes ||
      o->nnode_sizes > 0 || o->nmap > 0 || o->bcast || o->reproducible) {
    return tool_usage_error(spec, "--train takes --node-counts and --ppn for the ranks; drop "
                                  "--sweep, --print-schedule, --bytes, --ranks, --nodes, "
                                  "--node-sizes, --map, --collective and --reproducible");
  }
  train_cli_t *t = &o->train;
  if (o->algorithm != NULL && (t->algorithm = mpiar__algorithm_find(o->algorithm)) == NULL) {
    return tool_usage_error(spec, "--algorithm: '%s' is not a registry algorithm", o->algorithm);
  }
  if (t->nps > 0 && t->algorithm != NULL) {
    return tool_usage_error(spec, "--ps-servers compares with the model's choice: drop "
                                  "--algorithm");
  }
  if (t->links.n > 0 && o->have_beta_inter) {
    return tool_usage_error(spec, "--link-gbps and --beta-inter both set the link");
  }
  if (t->tuning_file != NULL && !mpiar__tuning_supported()) {
    return tool_usage_error(spec, "--tuning-file: this build reads no tuning file (no "
                                  "libjansson)");
  }
  if (t->nnodes == 0) {
    for (long n = 1; n <= 1024; n *= 2) {
      t->node_counts[t->nnodes++] = n;
    }
  }
  if (t->nfusion == 0) {
    t->fusion[t->nfusion++] = (size_t)64 << 20;
  }
  if (t->flops.n == 0) {
    t->flops.v[t->flops.n++] = 1.0;
  }
  if (t->links.n == 0 && !o->have_beta_inter) {
    t->links.v[t->links.n++] = 25.0;
  }
  t->ppn = o->have_ppn ? (int)o->ppn : 1;
  t->overlap = !o->no_overlap;
  t->cost = o->cost;
  if (!o->have_alpha_inter) {
    t->cost.alpha_inter = o->cost.alpha;
  }
  t->have_alpha_inter = o->have_alpha_inter;
  t->have_beta_inter = o->have_beta_inter;
  t->segment_bytes = o->segment_bytes;
  t->json = o->json;
  return train_run(t, spec);
}

/* --schedule FILE or --export ALGORITHM (schedule_cli.c). */
static int run_schedule(opts_t *o, const tool_spec_t *spec) {
  if (o->sweep || o->print || o->bcast || o->reproducible || o->algorithm != NULL ||
      o->nranks_list > 1) {
    return tool_usage_error(spec, "--schedule and --export take --ranks P, --bytes N and the "
                                  "topology options: drop --sweep, --print-schedule, --algorithm, "
                                  "--collective and --reproducible");
  }
  schedule_cli_t c = {.schedule = o->schedule_file,
                      .export_alg = o->export_alg,
                      .output = o->output,
                      .nranks = o->nranks_list == 1 ? (int)o->ranks[0] : 0,
                      .bytes = o->bytes,
                      .have_bytes = o->have_bytes,
                      .segment_bytes = o->segment_bytes,
                      .dtype = o->dtype,
                      .op = o->op,
                      .in_place = o->in_place,
                      .data = o->data,
                      .cost = o->cost,
                      .topo = o->have_topo ? &o->topo : NULL};
  if (o->network_spec != NULL) {
    char err[200];
    if (mpiar__network_parse(o->network_spec, &o->net, err, sizeof err) != 0) {
      return tool_usage_error(spec, "--topology %s", err);
    }
    if (o->have_topo) {
      return tool_usage_error(spec, "--topology replaces --nodes, --ppn, --node-sizes and --map");
    }
    o->net.hop_latency = o->hop_latency;
    c.net = &o->net;
  }
  return schedule_cli_run(&c);
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
  o.train.batch = 32;
  o.train.backward_factor = 2;
  char algs[512];
  algorithm_names(algs, sizeof algs);
  const tool_arg_t args[] = {
      {.long_name = "algorithm",
       .kind = TOOL_ARG_STRING,
       .dest = &o.algorithm,
       .metavar = "A",
       .help = algs},
      {.long_name = "schedule",
       .kind = TOOL_ARG_STRING,
       .dest = &o.schedule_file,
       .metavar = "FILE",
       .help = "a schedule file (docs/schedules.md): verify it, simulate it\n"
               "at --bytes (default 1 MiB) beside every built-in algorithm"},
      {.long_name = "export",
       .kind = TOOL_ARG_STRING,
       .dest = &o.export_alg,
       .metavar = "A",
       .help = "write algorithm A's schedules for --ranks P (at --bytes,\n"
               "default 4096 elements per rank) as a schedule file"},
      {.long_name = "output",
       .kind = TOOL_ARG_STRING,
       .dest = &o.output,
       .metavar = "FILE",
       .help = "--export: the file to write (default: standard output)"},
      {.long_name = "collective",
       .kind = TOOL_ARG_CUSTOM,
       .dest = &o.bcast,
       .parse = parse_collective,
       .metavar = "C",
       .help = "allreduce (default), bcast, reduce_scatter or allgather\n"
               "(the last two: --bytes is the whole vector, p blocks)"},
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
      {.long_name = "nodes",
       .kind = TOOL_ARG_INT,
       .dest = &o.nodes,
       .lo = 1,
       .hi = 1 << 20,
       .given = &o.have_nodes,
       .metavar = "N",
       .help = "two levels: N nodes (with --ppn, or --node-sizes)"},
      {.long_name = "ppn",
       .kind = TOOL_ARG_INT,
       .dest = &o.ppn,
       .lo = 1,
       .hi = 1 << 20,
       .given = &o.have_ppn,
       .metavar = "K",
       .help = "ranks per node"},
      {.long_name = "node-sizes",
       .kind = TOOL_ARG_INT_LIST,
       .dest = node_size_list,
       .nitems = &o.nnode_sizes,
       .max_items = MAX_NODE_LIST,
       .lo = 1,
       .hi = 1 << 20,
       .metavar = "LIST",
       .help = "ranks of each node, e.g. 4,4,2 (uneven nodes)"},
      {.long_name = "placement",
       .kind = TOOL_ARG_CUSTOM,
       .dest = &o.placement,
       .parse = parse_placement,
       .metavar = "PL",
       .help = "block (default), roundrobin, or random (shuffled by --seed)"},
      {.long_name = "map",
       .kind = TOOL_ARG_INT_LIST,
       .dest = map_list,
       .nitems = &o.nmap,
       .max_items = MAX_MAP,
       .lo = 0,
       .hi = 1 << 30,
       .metavar = "LIST",
       .help = "the node of each rank, e.g. 0,0,1,1,0 (instead of the three above)"},
      {.long_name = "topology",
       .kind = TOOL_ARG_STRING,
       .dest = &o.network_spec,
       .metavar = "NET",
       .help = "a routed network, one rank per node: torus:8x8, torus:4x4x4\n"
               "(dimension-order routing) or fattree:k=16,over=2 (16 hosts\n"
               "per leaf, uplink oversubscribed 2:1); links of --beta, shared\n"
               "max-min fair; without --algorithm, every algorithm per size"},
      {.long_name = "hop-latency",
       .kind = TOOL_ARG_DOUBLE,
       .dest = &o.hop_latency,
       .dlo = 0,
       .dhi = 1,
       .metavar = "SEC",
       .help = "--topology: seconds per link crossed (default 0)"},
      {.long_name = "link-report",
       .kind = TOOL_ARG_FLAG,
       .dest = &o.link_report,
       .help = "--topology: print the bytes of every link"},
      {.long_name = "alpha-inter",
       .kind = TOOL_ARG_DOUBLE,
       .dest = &o.cost.alpha_inter,
       .dlo = 0,
       .dhi = 1e6,
       .given = &o.have_alpha_inter,
       .metavar = "SEC",
       .help = "seconds per message between nodes (default: --alpha)"},
      {.long_name = "beta-inter",
       .kind = TOOL_ARG_DOUBLE,
       .dest = &o.cost.beta_inter,
       .dlo = 0,
       .dhi = 1e6,
       .given = &o.have_beta_inter,
       .metavar = "SEC",
       .help = "seconds per byte between nodes, through the node's one port (default: --beta)"},
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
      {.long_name = "every-rank",
       .kind = TOOL_ARG_FLAG,
       .dest = &o.every_rank,
       .help = "timing runs simulate every rank (default: one representative\n"
               "per class of a symmetry of the schedules, where there is one)"},
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
       .given = &o.rank_given,
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
       .help = "sizes for --sweep and the topology table (default 1K,4K,...,1G)"},
      {.long_name = "json",
       .kind = TOOL_ARG_FLAG,
       .dest = &o.json,
       .help = "print JSON instead of text"},
      {.long_name = "train",
       .kind = TOOL_ARG_STRING,
       .dest = &o.train.model,
       .metavar = "MODEL",
       .help = "predict a data-parallel training step of MODEL (vgg16,\n"
               "resnet50, or a model file) on --node-counts nodes of --ppn\n"
               "ranks; --algorithm forces one, else the cost model chooses"},
      {.long_name = "node-counts",
       .kind = TOOL_ARG_INT_LIST,
       .dest = o.train.node_counts,
       .nitems = &o.train.nnodes,
       .max_items = TRAIN_LIST_MAX,
       .lo = 1,
       .hi = 1 << 16,
       .given = &o.have_train_opts,
       .metavar = "LIST",
       .help = "--train: node counts (default 1,2,4,...,1024)"},
      {.long_name = "batch",
       .kind = TOOL_ARG_DOUBLE,
       .dest = &o.train.batch,
       .dlo = 0,
       .dlo_open = 1,
       .dhi = 1e9,
       .given = &o.have_train_opts,
       .metavar = "B",
       .help = "--train: samples per rank (default 32)"},
      {.long_name = "node-tflops",
       .kind = TOOL_ARG_CUSTOM,
       .dest = &o.train.flops,
       .parse = train_parse_doubles,
       .given = &o.have_train_opts,
       .metavar = "LIST",
       .help = "--train: FLOP rate of a node in TFLOP/s, shared by its\n"
               "ranks (default 1)"},
      {.long_name = "link-gbps",
       .kind = TOOL_ARG_CUSTOM,
       .dest = &o.train.links,
       .parse = train_parse_doubles,
       .given = &o.have_train_opts,
       .metavar = "LIST",
       .help = "--train: node link bit rates, Gb/s: beta between nodes is\n"
               "8 / rate (default 25, or --beta-inter)"},
      {.long_name = "fusion",
       .kind = TOOL_ARG_SIZE_LIST,
       .dest = o.train.fusion,
       .nitems = &o.train.nfusion,
       .max_items = TRAIN_LIST_MAX,
       .lo = 0,
       .hi = TOOL_SIZE_MAX,
       .given = &o.have_train_opts,
       .metavar = "LIST",
       .help = "--train: fusion buffer sizes (0: a message per tensor;\n"
               "default 64M)"},
      {.long_name = "ps-servers",
       .kind = TOOL_ARG_INT_LIST,
       .dest = o.train.ps,
       .nitems = &o.train.nps,
       .max_items = TRAIN_LIST_MAX,
       .lo = 1,
       .hi = 1 << 16,
       .given = &o.have_train_opts,
       .metavar = "LIST",
       .help = "--train: also a parameter server of each of these server\n"
               "counts, beside the allreduce"},
      {.long_name = "backward-factor",
       .kind = TOOL_ARG_DOUBLE,
       .dest = &o.train.backward_factor,
       .dlo = 0,
       .dhi = 100,
       .given = &o.have_train_opts,
       .metavar = "X",
       .help = "--train: backward FLOPs per forward FLOP (default 2)"},
      {.long_name = "no-overlap",
       .kind = TOOL_ARG_FLAG,
       .dest = &o.no_overlap,
       .given = &o.have_train_opts,
       .help = "--train: communication starts after the backward pass"},
      {.long_name = "tuning-file",
       .kind = TOOL_ARG_STRING,
       .dest = &o.train.tuning_file,
       .given = &o.have_train_opts,
       .metavar = "FILE",
       .help = "--train: alpha, beta, gamma (float32) and the inter-node\n"
               "terms fitted by mpiar-tune, instead of --alpha/--beta/--gamma"},
      {.long_name = "reproducible",
       .kind = TOOL_ARG_FLAG,
       .dest = &o.reproducible,
       .help = "with --sweep: each algorithm beside its reproducible-mode replacement"},
  };
  const tool_spec_t spec = {
      .prog = "mpiar-sim",
      .usage = "mpiar-sim --algorithm A --ranks P --bytes N [options]\n"
               "       mpiar-sim --algorithm A --ranks P --bytes N --print-schedule --rank R\n"
               "       mpiar-sim --sweep [--ranks P1,P2,...] [--sizes N1,N2,...] [options]\n"
               "       mpiar-sim --nodes N --ppn K [--placement block|roundrobin|random]\n"
               "                 [--alpha-inter SEC] [--beta-inter SEC] [--sizes LIST] [options]\n"
               "       mpiar-sim --topology torus:8x8|torus:4x4x4|fattree:k=K,over=O [--ranks P]\n"
               "                 [--algorithm A --bytes N | --sizes LIST] [--hop-latency SEC]\n"
               "       mpiar-sim --train MODEL [--node-counts LIST] [--ppn K] [--batch B]\n"
               "                 [--node-tflops LIST] [--link-gbps LIST] [--fusion LIST]\n"
               "                 [--ps-servers LIST] [options]",
      .about = "Runs one collective's schedules for P ranks in the simulator (no MPI) and prints\n"
               "the modelled time, bandwidths and traffic; prints a rank's schedule; or sweeps a\n"
               "grid of rank counts and sizes and names the fastest algorithm for each. With a\n"
               "topology (--nodes and --ppn, --node-sizes, or --map) the model has two levels:\n"
               "without --algorithm it prints every algorithm's time per size on it, the winner\n"
               "and each one's traffic on the node links. With --train it predicts one\n"
               "data-parallel training step per configuration (perf/sim/train.h): step time,\n"
               "communication not hidden by the backward pass, and scaling efficiency against\n"
               "one node.",
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
  if ((o.bcast == 0 || o.bcast == 2) && !mpiar_op_supported(o.dtype, o.op)) {
    return tool_usage_error(&spec, "--op %s is not defined on --dtype %s", mpiar_op_name(o.op),
                            mpiar_dtype_name(o.dtype));
  }
  if (o.segment_bytes % es != 0) {
    return tool_usage_error(&spec, "--segment must be a multiple of the element size (%s)",
                            mpiar_dtype_name(o.dtype));
  }
  if (o.train.model != NULL) {
    return run_train(&o, &spec);
  }
  if (o.have_train_opts) {
    return tool_usage_error(&spec, "--node-counts, --batch, --node-tflops, --link-gbps, --fusion, "
                                   "--ps-servers, --backward-factor, --no-overlap and "
                                   "--tuning-file go with --train");
  }
  int tex = build_topology(&o, &spec);
  if (tex >= 0) {
    return tex;
  }
  if (o.schedule_file != NULL || o.export_alg != NULL) {
    tex = run_schedule(&o, &spec);
    mpiar__topology_destroy(&o.topo);
    return tex;
  }
  if (o.network_spec != NULL) {
    tex = run_network(&o, &spec);
    if (tex >= 0) {
      mpiar__topology_destroy(&o.topo);
      return tex;
    }
  } else if (o.hop_latency > 0 || o.link_report) {
    return tool_usage_error(&spec, "--hop-latency and --link-report go with --topology");
  }
  int rc = dispatch(&o, &spec);
  mpiar__topology_destroy(&o.topo);
  return rc;
}
