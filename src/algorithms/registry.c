/* The one registry of allreduce algorithms (and the small one of broadcast algorithms). */
#include <stdio.h>
#include <string.h>

#include "algorithms/algorithms.h"
#include "base/common.h"
#include "base/settings.h"

/*
 * Parameterised algorithms: one builder and one cost function per value of k, bound here, so
 * that a registry entry keeps the builder and cost signatures every caller uses.
 */
#define K_BIND(alg, k)                                                                        \
  static int build_##alg##_##k(mpiar__schedule_t *s) {                                        \
    return mpiar__build_##alg##_k(s, k);                                                      \
  }                                                                                           \
  static double cost_##alg##_##k(int p, size_t b, size_t es, size_t sb,                       \
                                 const mpiar__cost_params_t *c, const mpiar__topology_t *t) { \
    return mpiar__cost_##alg##_k(k, p, b, es, sb, c, t);                                      \
  }
#define K_BIND_ALL(alg) \
  K_BIND(alg, 2)        \
  K_BIND(alg, 3) K_BIND(alg, 4) K_BIND(alg, 5) K_BIND(alg, 6) K_BIND(alg, 7) K_BIND(alg, 8)
K_BIND_ALL(recursive_multiplying)
K_BIND_ALL(radix_rabenseifner)
K_BIND_ALL(knomial_tree)
K_BIND_ALL(kary_tree)
K_BIND(swing_md, 1)
K_BIND(swing_md, 2)
K_BIND(swing_md, 3)
K_BIND(swing_md, 4)
K_BIND(swing_md_latency, 2)
K_BIND(swing_md_latency, 3)
K_BIND(swing_md_latency, 4)
K_BIND(bucket, 1)
K_BIND(bucket, 2)
K_BIND(bucket, 3)
K_BIND(bucket, 4)

#define RM_PARAM \
  { "k", 2, 8, 4 }
#define RADIX_RAB_PARAM \
  { "k", 2, 8, 4 }
#define KNOMIAL_PARAM \
  { "k", 2, 8, 4 }
#define KARY_PARAM \
  { "k", 2, 8, 2 }
#define SWING_MD_PARAM \
  { "d", 1, 4, 2 }
#define SWING_MD_LAT_PARAM \
  { "d", 2, 4, 2 }
#define BUCKET_PARAM \
  { "d", 1, 4, 2 }
#define BUCKET_FLAGS                                                    \
  (MPIAR__ALG_MANUAL | MPIAR__ALG_NO_QUOTIENT | MPIAR__ALG_PAIR_EXACT | \
   MPIAR__ALG_ORDER_BY_POSITION)
/* An entry for k = V of a parameterised algorithm. */
#define K_ENTRY(alg, k, flags, param, repro_name)                                    \
  {                                                                                  \
#alg "/k=" #k, build_##alg##_##k, cost_##alg##_##k, flags, NULL, param, k, #alg, \
        .index = __COUNTER__, .repro = repro_name                                    \
  }

/* The same for a grid's dimensions d. */
#define D_ENTRY(alg, d, flags, param, repro_name)                                    \
  {                                                                                  \
#alg "/d=" #d, build_##alg##_##d, cost_##alg##_##d, flags, NULL, param, d, #alg, \
        .index = __COUNTER__, .repro = repro_name                                    \
  }

/*
 * Entries without a parameter end at their summary: the parameter fields (param, value, base)
 * are zero for them, which is what "no parameter" means.
 */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

const mpiar__algorithm_t mpiar__algorithms[] = {
    {"ring", mpiar__build_ring, mpiar__cost_ring,
     MPIAR__ALG_SEGMENTED | MPIAR__ALG_PAIR_EXACT | MPIAR__ALG_ORDER_BY_POSITION,
     "reduce-scatter ring + allgather ring; bandwidth-optimal, 2(p-1) messages; large messages",
     .index = __COUNTER__, .repro = "repro_direct"},
    {"rabenseifner", mpiar__build_rabenseifner, mpiar__cost_rabenseifner, MPIAR__ALG_PAIR_EXACT,
     "recursive-halving reduce-scatter + recursive-doubling allgather; medium and large",
     .index = __COUNTER__, .repro = "repro_rabenseifner"},
    {"recursive_doubling", mpiar__build_recursive_doubling, mpiar__cost_recursive_doubling,
     MPIAR__ALG_CANONICAL | MPIAR__ALG_PAIR_EXACT,
     "full-vector exchange in log2(p) steps; small messages", .index = __COUNTER__, .repro = NULL},
    {"hier_ring", mpiar__build_hier_ring, mpiar__cost_hier_ring,
     MPIAR__ALG_HIERARCHICAL | MPIAR__ALG_SEGMENTED | MPIAR__ALG_ORDER_BY_POSITION,
     "reduce-scatter in each node, a ring between nodes per local rank, allgather in each node; "
     "large messages on several nodes",
     .index = __COUNTER__, .repro = "repro_direct"},
    {"hier_rabenseifner", mpiar__build_hier_rabenseifner, mpiar__cost_hier_rabenseifner,
     MPIAR__ALG_HIERARCHICAL | MPIAR__ALG_SEGMENTED | MPIAR__ALG_ORDER_BY_POSITION,
     "reduce-scatter in each node, halving/doubling between nodes per local rank, allgather in "
     "each node; medium and large messages on several nodes",
     .index = __COUNTER__, .repro = "repro_direct"},
    {"hier_recursive_doubling", mpiar__build_hier_recursive_doubling,
     mpiar__cost_hier_recursive_doubling, MPIAR__ALG_HIERARCHICAL,
     "reduce to a leader per node, recursive doubling among leaders, broadcast in each node; "
     "small messages on several nodes",
     .index = __COUNTER__, .repro = "repro_rabenseifner"},
    {"swing", mpiar__build_swing, mpiar__cost_swing,
     MPIAR__ALG_MANUAL | MPIAR__ALG_NO_QUOTIENT | MPIAR__ALG_ORDER_BY_POSITION,
     "Swing reduce-scatter + allgather (peers r +- rho(s), short hops on a torus); "
     "bandwidth-optimal; named only",
     .index = __COUNTER__, .repro = "repro_rabenseifner"},
    {"swing_fold", mpiar__build_swing_fold, mpiar__cost_swing_fold,
     MPIAR__ALG_MANUAL | MPIAR__ALG_NO_QUOTIENT | MPIAR__ALG_ORDER_BY_POSITION,
     "Swing reduce-scatter + allgather with the whole-vector fold of non-powers of two (the "
     "paper's method's alternative); named only",
     .index = __COUNTER__, .repro = "repro_rabenseifner"},
    {"swing_latency", mpiar__build_swing_latency, mpiar__cost_swing_latency,
     MPIAR__ALG_MANUAL | MPIAR__ALG_NO_QUOTIENT,
     "Swing full-vector exchanges in log2(p) steps (short hops on a torus); small messages; "
     "named only",
     .index = __COUNTER__, .repro = "repro_rabenseifner"},
    {"recursive_multiplying", build_recursive_multiplying_4, cost_recursive_multiplying_4, 0,
     "full-vector exchange with k-1 partners in ceil(log_k p) rounds (k = 2..8, default 4); small "
     "messages",
     RM_PARAM, 4, NULL, .index = __COUNTER__, .repro = "repro_rabenseifner"},
    {"radix_rabenseifner", build_radix_rabenseifner_4, cost_radix_rabenseifner_4, MPIAR__ALG_MANUAL,
     "radix-k reduce-scatter + radix-k allgather, k-1 partners per round (k = 2..8, default 4); "
     "medium and large",
     RADIX_RAB_PARAM, 4, NULL, .index = __COUNTER__, .repro = "repro_rabenseifner"},
    {"knomial_tree", build_knomial_tree_4, cost_knomial_tree_4,
     MPIAR__ALG_SEGMENTED | MPIAR__ALG_MANUAL,
     "pipelined reduce to rank 0 then broadcast over a k-nomial tree (k = 2..8, default 4)",
     KNOMIAL_PARAM, 4, NULL, .index = __COUNTER__, .repro = "repro_direct"},
    {"kary_tree", build_kary_tree_2, cost_kary_tree_2, MPIAR__ALG_SEGMENTED | MPIAR__ALG_MANUAL,
     "pipelined reduce to rank 0 then broadcast over a k-ary tree (k = 2..8, default 2)",
     KARY_PARAM, 2, NULL, .index = __COUNTER__, .repro = "repro_direct"},
    {"double_binary_tree", mpiar__build_double_binary_tree, mpiar__cost_double_binary_tree,
     MPIAR__ALG_SEGMENTED | MPIAR__ALG_MANUAL | MPIAR__ALG_PAIR_EXACT |
         MPIAR__ALG_ORDER_BY_POSITION,
     "two complementary binary trees, each reducing and broadcasting half, pipelined in segments; "
     "full bandwidth with log2(p) depth",
     .index = __COUNTER__, .repro = "repro_direct"},
    {"direct", mpiar__build_direct, mpiar__cost_direct,
     MPIAR__ALG_MANUAL | MPIAR__ALG_PAIR_EXACT | MPIAR__ALG_ORDER_BY_POSITION,
     "every block straight to its owner, reduced there, straight back; p-1 messages out and in "
     "per phase; small p",
     .index = __COUNTER__, .repro = "repro_direct"},
    {"torus_2d", mpiar__build_torus_2d, mpiar__cost_torus_2d,
     MPIAR__ALG_PAIR_EXACT | MPIAR__ALG_ORDER_BY_POSITION,
     "ring reduce-scatter along the rows of the most square grid, ring allreduce along its "
     "columns, ring allgather along the rows; 2(R+C-2) messages",
     .index = __COUNTER__, .repro = "repro_rabenseifner"},
    {"double_binary_tree/colour", mpiar__build_double_binary_tree_colour,
     mpiar__cost_double_binary_tree_colour,
     MPIAR__ALG_SEGMENTED | MPIAR__ALG_MANUAL | MPIAR__ALG_PAIR_EXACT |
         MPIAR__ALG_ORDER_BY_POSITION,
     "double_binary_tree with Sanders, Speck and Traff's edge colouring: each rank's sends in "
     "fixed steps, about 5.7 t per segment instead of up to 14 t; segmented; named only",
     .index = __COUNTER__, .repro = "repro_direct"},
    {"swing_md", build_swing_md_2, cost_swing_md_2,
     MPIAR__ALG_MANUAL | MPIAR__ALG_NO_QUOTIENT | MPIAR__ALG_ORDER_BY_POSITION,
     "multi-dimensional Swing: 2d reduce-scatter + allgather collectives on parts of the vector, "
     "each swinging in one dimension of a d-dimensional grid per step (d = 1..4, default 2); "
     "every torus link busy; named only",
     SWING_MD_PARAM, 2, NULL, .index = __COUNTER__, .repro = "repro_rabenseifner"},
    {"swing_md_latency", build_swing_md_latency_2, cost_swing_md_latency_2,
     MPIAR__ALG_MANUAL | MPIAR__ALG_NO_QUOTIENT,
     "multi-dimensional Swing, full-vector exchanges swinging in one grid dimension per step "
     "(d = 2..4, default 2); small messages; named only",
     SWING_MD_LAT_PARAM, 2, NULL, .index = __COUNTER__, .repro = "repro_rabenseifner"},
    {"bucket", build_bucket_2, cost_bucket_2, BUCKET_FLAGS,
     "multi-port bucket: 2d multi-dimensional rings (reduce-scatter along each dimension in turn, "
     "allgather back) on parts of the vector, one per dimension and direction, on swing_md's grid "
     "(d = 1..4, default 2); every torus link busy; named only",
     BUCKET_PARAM, 2, NULL, .index = __COUNTER__, .repro = "repro_rabenseifner"},
};
const int mpiar__algorithm_count = (int)(sizeof mpiar__algorithms / sizeof mpiar__algorithms[0]);

/* The other values of the parameterised entries' k (the registry entry is the default). */
const mpiar__algorithm_t mpiar__algorithm_instances[] = {
    K_ENTRY(recursive_multiplying, 2, MPIAR__ALG_MANUAL, RM_PARAM, "repro_rabenseifner"),
    K_ENTRY(recursive_multiplying, 3, MPIAR__ALG_MANUAL, RM_PARAM, "repro_rabenseifner"),
    K_ENTRY(recursive_multiplying, 5, MPIAR__ALG_MANUAL, RM_PARAM, "repro_rabenseifner"),
    K_ENTRY(recursive_multiplying, 6, MPIAR__ALG_MANUAL, RM_PARAM, "repro_rabenseifner"),
    K_ENTRY(recursive_multiplying, 7, MPIAR__ALG_MANUAL, RM_PARAM, "repro_rabenseifner"),
    K_ENTRY(recursive_multiplying, 8, MPIAR__ALG_MANUAL, RM_PARAM, "repro_rabenseifner"),
    K_ENTRY(radix_rabenseifner, 2, MPIAR__ALG_MANUAL, RADIX_RAB_PARAM, "repro_rabenseifner"),
    K_ENTRY(radix_rabenseifner, 3, MPIAR__ALG_MANUAL, RADIX_RAB_PARAM, "repro_rabenseifner"),
    K_ENTRY(radix_rabenseifner, 5, MPIAR__ALG_MANUAL, RADIX_RAB_PARAM, "repro_rabenseifner"),
    K_ENTRY(radix_rabenseifner, 6, MPIAR__ALG_MANUAL, RADIX_RAB_PARAM, "repro_rabenseifner"),
    K_ENTRY(radix_rabenseifner, 7, MPIAR__ALG_MANUAL, RADIX_RAB_PARAM, "repro_rabenseifner"),
    K_ENTRY(radix_rabenseifner, 8, MPIAR__ALG_MANUAL, RADIX_RAB_PARAM, "repro_rabenseifner"),
    K_ENTRY(knomial_tree, 2, MPIAR__ALG_SEGMENTED | MPIAR__ALG_MANUAL, KNOMIAL_PARAM,
            "repro_direct"),
    K_ENTRY(knomial_tree, 3, MPIAR__ALG_SEGMENTED | MPIAR__ALG_MANUAL, KNOMIAL_PARAM,
            "repro_direct"),
    K_ENTRY(knomial_tree, 5, MPIAR__ALG_SEGMENTED | MPIAR__ALG_MANUAL, KNOMIAL_PARAM,
            "repro_direct"),
    K_ENTRY(knomial_tree, 6, MPIAR__ALG_SEGMENTED | MPIAR__ALG_MANUAL, KNOMIAL_PARAM,
            "repro_direct"),
    K_ENTRY(knomial_tree, 7, MPIAR__ALG_SEGMENTED | MPIAR__ALG_MANUAL, KNOMIAL_PARAM,
            "repro_direct"),
    K_ENTRY(knomial_tree, 8, MPIAR__ALG_SEGMENTED | MPIAR__ALG_MANUAL, KNOMIAL_PARAM,
            "repro_direct"),
    K_ENTRY(kary_tree, 3, MPIAR__ALG_SEGMENTED | MPIAR__ALG_MANUAL, KARY_PARAM, "repro_direct"),
    K_ENTRY(kary_tree, 4, MPIAR__ALG_SEGMENTED | MPIAR__ALG_MANUAL, KARY_PARAM, "repro_direct"),
    K_ENTRY(kary_tree, 5, MPIAR__ALG_SEGMENTED | MPIAR__ALG_MANUAL, KARY_PARAM, "repro_direct"),
    K_ENTRY(kary_tree, 6, MPIAR__ALG_SEGMENTED | MPIAR__ALG_MANUAL, KARY_PARAM, "repro_direct"),
    K_ENTRY(kary_tree, 7, MPIAR__ALG_SEGMENTED | MPIAR__ALG_MANUAL, KARY_PARAM, "repro_direct"),
    K_ENTRY(kary_tree, 8, MPIAR__ALG_SEGMENTED | MPIAR__ALG_MANUAL, KARY_PARAM, "repro_direct"),
#define SWING_MD_FLAGS (MPIAR__ALG_MANUAL | MPIAR__ALG_NO_QUOTIENT | MPIAR__ALG_ORDER_BY_POSITION)
    D_ENTRY(swing_md, 1, SWING_MD_FLAGS, SWING_MD_PARAM, "repro_rabenseifner"),
    D_ENTRY(swing_md, 3, SWING_MD_FLAGS, SWING_MD_PARAM, "repro_rabenseifner"),
    D_ENTRY(swing_md, 4, SWING_MD_FLAGS, SWING_MD_PARAM, "repro_rabenseifner"),
    D_ENTRY(swing_md_latency, 3, MPIAR__ALG_MANUAL | MPIAR__ALG_NO_QUOTIENT, SWING_MD_LAT_PARAM,
            "repro_rabenseifner"),
    D_ENTRY(swing_md_latency, 4, MPIAR__ALG_MANUAL | MPIAR__ALG_NO_QUOTIENT, SWING_MD_LAT_PARAM,
            "repro_rabenseifner"),
    D_ENTRY(bucket, 1, BUCKET_FLAGS, BUCKET_PARAM, "repro_rabenseifner"),
    D_ENTRY(bucket, 3, BUCKET_FLAGS, BUCKET_PARAM, "repro_rabenseifner"),
    D_ENTRY(bucket, 4, BUCKET_FLAGS, BUCKET_PARAM, "repro_rabenseifner"),
};
const int mpiar__algorithm_instance_count =
    (int)(sizeof mpiar__algorithm_instances / sizeof mpiar__algorithm_instances[0]);

const mpiar__algorithm_t mpiar__algorithm_variants[] = {
    {"rabenseifner_fold", mpiar__build_rabenseifner_fold, mpiar__cost_rabenseifner_fold,
     MPIAR__ALG_PAIR_EXACT,
     "Rabenseifner with the whole-vector fold for non-power-of-two p (research variant)",
     .index = __COUNTER__, .repro = "repro_rabenseifner"},
    {"repro_direct", mpiar__build_repro_direct, mpiar__cost_repro_direct,
     MPIAR__ALG_SEGMENTED | MPIAR__ALG_CANONICAL,
     "direct reduce-scatter in the canonical order + ring allgather (reproducible mode: ring)",
     .index = __COUNTER__, .repro = NULL},
    {"repro_rabenseifner", mpiar__build_repro_rabenseifner, mpiar__cost_rabenseifner,
     MPIAR__ALG_CANONICAL,
     "Rabenseifner halving at distance 1 first (reproducible mode: rabenseifner)",
     .index = __COUNTER__, .repro = NULL},
    {"repro_halving", mpiar__build_repro_halving, mpiar__cost_repro_halving, MPIAR__ALG_CANONICAL,
     "canonical tree as a weighted recursive halving + Bruck allgather (research variant)",
     .index = __COUNTER__, .repro = NULL},
};
const int mpiar__algorithm_variant_count =
    (int)(sizeof mpiar__algorithm_variants / sizeof mpiar__algorithm_variants[0]);

const mpiar__algorithm_t mpiar__bcast_algorithms[] = {
    {"binomial", mpiar__build_bcast_binomial, mpiar__cost_bcast_binomial, 0,
     "binomial tree from the root; small messages", .index = 0},
    {"scatter_allgather", mpiar__build_bcast_scatter_allgather, mpiar__cost_bcast_scatter_allgather,
     0, "binomial scatter of blocks + ring allgather; large messages", .index = 1},
};
const int mpiar__bcast_algorithm_count =
    (int)(sizeof mpiar__bcast_algorithms / sizeof mpiar__bcast_algorithms[0]);

const mpiar__algorithm_t mpiar__reduce_scatter_algorithms[] = {
    {"ring", mpiar__build_rs_ring, mpiar__cost_rs_ring, MPIAR__ALG_PAIR_EXACT,
     "the ring's reduce-scatter half; p-1 messages, bandwidth-optimal; large messages",
     .index = 0},
    {"recursive_halving", mpiar__build_rs_recursive_halving, mpiar__cost_rs_recursive_halving,
     MPIAR__ALG_PAIR_EXACT, "Rabenseifner's reduce-scatter half; log2(p) messages", .index = 1},
    {"direct", mpiar__build_rs_direct, mpiar__cost_rs_direct,
     MPIAR__ALG_PAIR_EXACT | MPIAR__ALG_MANUAL,
     "every block straight to its owner, reduced in rank order; small p; named only", .index = 2},
    {"repro_direct", mpiar__build_repro_direct_rs, mpiar__cost_rs_repro_direct,
     MPIAR__ALG_CANONICAL | MPIAR__ALG_MANUAL,
     "direct reduce-scatter in the canonical order (reproducible mode)", .index = 3},
};
const int mpiar__reduce_scatter_algorithm_count =
    (int)(sizeof mpiar__reduce_scatter_algorithms / sizeof mpiar__reduce_scatter_algorithms[0]);

const mpiar__algorithm_t mpiar__allgather_algorithms[] = {
    {"ring", mpiar__build_ag_ring, mpiar__cost_ag_ring, 0,
     "the ring's allgather half; p-1 messages, bandwidth-optimal; large messages", .index = 0},
    {"recursive_doubling", mpiar__build_ag_recursive_doubling, mpiar__cost_ag_recursive_doubling,
     0, "Rabenseifner's allgather half; log2(p) messages at powers of two", .index = 1},
    {"bruck", mpiar__build_ag_bruck, mpiar__cost_ag_bruck, 0,
     "Bruck's allgather: ceil(log2 p) messages at any p; small messages", .index = 2},
    {"direct", mpiar__build_ag_direct, mpiar__cost_ag_direct, 0,
     "every block straight to every rank; small p", .index = 3},
};
const int mpiar__allgather_algorithm_count =
    (int)(sizeof mpiar__allgather_algorithms / sizeof mpiar__allgather_algorithms[0]);

static const mpiar__algorithm_t *find_in(const mpiar__algorithm_t *list, int n, const char *name) {
  if (name == NULL) {
    return NULL;
  }
  for (int i = 0; i < n; i++) {
    if (strcmp(list[i].name, name) == 0) {
      return &list[i];
    }
  }
  return NULL;
}

/*
 * Split "BASE/P=V" into BASE's registry entry, the parameter and its value. @return 1 with
 * *entry set when BASE is a parameterised entry and P its parameter; *value is V, or -1 when V
 * is not a decimal of at most 3 digits without a leading zero. 0 for anything else.
 */
static int split_param(const char *name, const mpiar__algorithm_t **entry, int *value) {
  const char *slash = name != NULL ? strchr(name, '/') : NULL;
  if (slash == NULL) {
    return 0;
  }
  const size_t blen = (size_t)(slash - name);
  for (int i = 0; i < mpiar__algorithm_count; i++) {
    const mpiar__algorithm_t *a = &mpiar__algorithms[i];
    const size_t plen = a->param.name != NULL ? strlen(a->param.name) : 0;
    if (plen == 0 || strlen(a->name) != blen || strncmp(a->name, name, blen) != 0 ||
        strncmp(slash + 1, a->param.name, plen) != 0 || slash[1 + plen] != '=') {
      continue;
    }
    const char *d = slash + 2 + plen;
    const size_t ndig = strspn(d, "0123456789");
    *entry = a;
    *value = -1;
    if (ndig >= 1 && ndig <= 3 && d[ndig] == '\0' && !(d[0] == '0')) {
      int v = 0;
      for (size_t j = 0; j < ndig; j++) {
        v = 10 * v + (d[j] - '0');
      }
      *value = v;
    }
    return 1;
  }
  return 0;
}

const mpiar__algorithm_t *(*mpiar__algorithm_file_hook)(const char *path);

const mpiar__algorithm_t *mpiar__algorithm_find(const char *name) {
  if (strncmp(name, MPIAR__ALG_FILE_PREFIX, sizeof MPIAR__ALG_FILE_PREFIX - 1) == 0) {
    const mpiar__algorithm_t *(*hook)(const char *) =
        __atomic_load_n(&mpiar__algorithm_file_hook, __ATOMIC_ACQUIRE);
    return hook != NULL ? hook(name + sizeof MPIAR__ALG_FILE_PREFIX - 1) : NULL;
  }
  const mpiar__algorithm_t *a = find_in(mpiar__algorithms, mpiar__algorithm_count, name);
  if (a != NULL) {
    return a;
  }
  int value = 0;
  if (!split_param(name, &a, &value) || value < a->param.min || value > a->param.max) {
    return NULL;
  }
  if (value == a->value) {
    return a;
  }
  for (int i = 0; i < mpiar__algorithm_instance_count; i++) {
    const mpiar__algorithm_t *x = &mpiar__algorithm_instances[i];
    if (strcmp(x->base, a->name) == 0 && x->value == value) {
      return x;
    }
  }
  return NULL;
}

void mpiar__algorithm_explain(const char *name, char *buf, size_t len) {
  const mpiar__algorithm_t *a = NULL;
  int value = 0;
  if (strncmp(name, MPIAR__ALG_FILE_PREFIX, sizeof MPIAR__ALG_FILE_PREFIX - 1) == 0) {
    snprintf(buf, len, "algorithm '%.300s': %s", name,
             name[sizeof MPIAR__ALG_FILE_PREFIX - 1] == '\0'
                 ? "no path after 'file:'"
                 : "the path is too long, or this program reads no schedule files");
    return;
  }
  if (split_param(name, &a, &value)) {
    snprintf(buf, len, "algorithm '%s': %s=%s is not an integer in %d..%d for %s (default %d)",
             name, a->param.name, strchr(name, '=') + 1, a->param.min, a->param.max, a->name,
             a->param.def);
    return;
  }
  size_t used = (size_t)snprintf(buf, len, "unknown algorithm '%s' (", name);
  for (int i = 0; i < mpiar__algorithm_count && used < len; i++) {
    const mpiar__algorithm_t *e = &mpiar__algorithms[i];
    int w = e->param.name != NULL ? snprintf(buf + used, len - used, "%s[/%s=%d..%d], ", e->name,
                                             e->param.name, e->param.min, e->param.max)
                                  : snprintf(buf + used, len - used, "%s, ", e->name);
    used += w > 0 ? (size_t)w : 0;
  }
  if (used < len) {
    snprintf(buf + used, len - used, "or auto)");
  }
}

unsigned mpiar__algorithm_number(const mpiar__algorithm_t *alg) {
  return alg->index;
}

const mpiar__algorithm_t *mpiar__algorithm_at(unsigned number) {
  const struct {
    const mpiar__algorithm_t *list;
    int n;
  } lists[3] = {{mpiar__algorithms, mpiar__algorithm_count},
                {mpiar__algorithm_instances, mpiar__algorithm_instance_count},
                {mpiar__algorithm_variants, mpiar__algorithm_variant_count}};
  for (int l = 0; l < 3; l++) {
    for (int i = 0; i < lists[l].n; i++) {
      if (lists[l].list[i].index == number) {
        return &lists[l].list[i];
      }
    }
  }
  return NULL;
}

const mpiar__algorithm_t *mpiar__algorithm_find_any(const char *name) {
  const mpiar__algorithm_t *a = mpiar__algorithm_find(name);
  return a ? a : find_in(mpiar__algorithm_variants, mpiar__algorithm_variant_count, name);
}

const mpiar__algorithm_t *mpiar__bcast_algorithm_find(const char *name) {
  return find_in(mpiar__bcast_algorithms, mpiar__bcast_algorithm_count, name);
}

const mpiar__algorithm_t *mpiar__reduce_scatter_algorithm_find(const char *name) {
  return find_in(mpiar__reduce_scatter_algorithms, mpiar__reduce_scatter_algorithm_count, name);
}

const mpiar__algorithm_t *mpiar__allgather_algorithm_find(const char *name) {
  return find_in(mpiar__allgather_algorithms, mpiar__allgather_algorithm_count, name);
}

const mpiar__algorithm_t *mpiar__reduce_scatter_reproducible(const mpiar__algorithm_t *alg,
                                                             int nranks, mpiar_dtype_t dtype) {
  if (alg == NULL || !mpiar__dtype_is_float(dtype) || (alg->flags & MPIAR__ALG_CANONICAL) ||
      (nranks <= 2 && (alg->flags & MPIAR__ALG_PAIR_EXACT))) {
    return alg;
  }
  return mpiar__reduce_scatter_algorithm_find("repro_direct");
}

int mpiar_algorithm_count(void) {
  return mpiar__algorithm_count;
}

int mpiar_algorithm_check(const char *name) {
  mpiar__error_clear();
  if (name == NULL || strcmp(name, "auto") == 0 || mpiar__algorithm_find(name) != NULL) {
    return MPIAR_SUCCESS;
  }
  char why[512];
  mpiar__algorithm_explain(name, why, sizeof why);
  return mpiar__error(MPIAR_ERR_UNKNOWN_ALGORITHM, "%s", why);
}

const char *mpiar_algorithm_name(int index) {
  if (index < 0 || index >= mpiar__algorithm_count) {
    return NULL;
  }
  return mpiar__algorithms[index].name;
}

/* The segment rule of every run (library, tools, simulator): see algorithms.h. */
size_t mpiar__segment_elems(size_t seg_bytes, size_t count, size_t es, int nranks) {
  if (seg_bytes == 0) {
    return 0;
  }
  if (seg_bytes < MPIAR__SEGMENT_MIN) {
    seg_bytes = MPIAR__SEGMENT_MIN;
  }
  size_t seg = (seg_bytes + es - 1) / es;
  size_t block = (count + (size_t)nranks - 1) / (size_t)nranks;
  size_t floor = (block + MPIAR__SEGMENTS_MAX - 1) / MPIAR__SEGMENTS_MAX;
  return seg > floor ? seg : floor;
}
