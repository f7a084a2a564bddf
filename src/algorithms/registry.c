/* The one registry of allreduce algorithms (and the small one of broadcast algorithms). */
#include <string.h>

#include "algorithms/algorithms.h"
#include "base/settings.h"

const mpiar__algorithm_t mpiar__algorithms[] = {
    {"ring", mpiar__build_ring, mpiar__cost_ring, MPIAR__ALG_SEGMENTED,
     "reduce-scatter ring + allgather ring; bandwidth-optimal, 2(p-1) messages; large messages"},
    {"rabenseifner", mpiar__build_rabenseifner, mpiar__cost_rabenseifner, 0,
     "recursive-halving reduce-scatter + recursive-doubling allgather; medium and large"},
    {"recursive_doubling", mpiar__build_recursive_doubling, mpiar__cost_recursive_doubling, 0,
     "full-vector exchange in log2(p) steps; small messages"},
    {"hier_ring", mpiar__build_hier_ring, mpiar__cost_hier_ring,
     MPIAR__ALG_HIERARCHICAL | MPIAR__ALG_SEGMENTED,
     "reduce-scatter in each node, a ring between nodes per local rank, allgather in each node; "
     "large messages on several nodes"},
    {"hier_rabenseifner", mpiar__build_hier_rabenseifner, mpiar__cost_hier_rabenseifner,
     MPIAR__ALG_HIERARCHICAL | MPIAR__ALG_SEGMENTED,
     "reduce-scatter in each node, halving/doubling between nodes per local rank, allgather in "
     "each node; medium and large messages on several nodes"},
    {"hier_recursive_doubling", mpiar__build_hier_recursive_doubling,
     mpiar__cost_hier_recursive_doubling, MPIAR__ALG_HIERARCHICAL,
     "reduce to a leader per node, recursive doubling among leaders, broadcast in each node; "
     "small messages on several nodes"},
    {"swing", mpiar__build_swing, mpiar__cost_swing, MPIAR__ALG_MANUAL | MPIAR__ALG_NO_QUOTIENT,
     "Swing reduce-scatter + allgather (peers r +- rho(s), short hops on a torus); "
     "bandwidth-optimal; named only"},
    {"swing_latency", mpiar__build_swing_latency, mpiar__cost_swing_latency,
     MPIAR__ALG_MANUAL | MPIAR__ALG_NO_QUOTIENT,
     "Swing full-vector exchanges in log2(p) steps (short hops on a torus); small messages; "
     "named only"},
    {"double_binary_tree", mpiar__build_double_binary_tree, mpiar__cost_double_binary_tree,
     MPIAR__ALG_SEGMENTED | MPIAR__ALG_MANUAL,
     "two complementary binary trees, each reducing and broadcasting half, pipelined in segments; "
     "full bandwidth with log2(p) depth"},
    {"direct", mpiar__build_direct, mpiar__cost_direct, MPIAR__ALG_MANUAL,
     "every block straight to its owner, reduced there, straight back; p-1 messages out and in "
     "per phase; small p"},
    {"torus_2d", mpiar__build_torus_2d, mpiar__cost_torus_2d, MPIAR__ALG_MANUAL,
     "ring reduce-scatter along the rows of the most square grid, ring allreduce along its "
     "columns, ring allgather along the rows; 2(R+C-2) messages"},
};
const int mpiar__algorithm_count = (int)(sizeof mpiar__algorithms / sizeof mpiar__algorithms[0]);

const mpiar__algorithm_t mpiar__algorithm_variants[] = {
    {"rabenseifner_fold", mpiar__build_rabenseifner_fold, mpiar__cost_rabenseifner_fold, 0,
     "Rabenseifner with the whole-vector fold for non-power-of-two p (research variant)"},
    {"repro_direct", mpiar__build_repro_direct, mpiar__cost_repro_direct, MPIAR__ALG_SEGMENTED,
     "direct reduce-scatter in the canonical order + ring allgather (reproducible mode: ring)"},
    {"repro_rabenseifner", mpiar__build_repro_rabenseifner, mpiar__cost_rabenseifner, 0,
     "Rabenseifner halving at distance 1 first (reproducible mode: rabenseifner)"},
    {"repro_halving", mpiar__build_repro_halving, mpiar__cost_repro_halving, 0,
     "canonical tree as a weighted recursive halving + Bruck allgather (research variant)"},
};
const int mpiar__algorithm_variant_count =
    (int)(sizeof mpiar__algorithm_variants / sizeof mpiar__algorithm_variants[0]);

const mpiar__algorithm_t mpiar__bcast_algorithms[] = {
    {"binomial", mpiar__build_bcast_binomial, mpiar__cost_bcast_binomial, 0,
     "binomial tree from the root; small messages"},
    {"scatter_allgather", mpiar__build_bcast_scatter_allgather, mpiar__cost_bcast_scatter_allgather,
     0, "binomial scatter of blocks + ring allgather; large messages"},
};
const int mpiar__bcast_algorithm_count =
    (int)(sizeof mpiar__bcast_algorithms / sizeof mpiar__bcast_algorithms[0]);

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

const mpiar__algorithm_t *mpiar__algorithm_find(const char *name) {
  return find_in(mpiar__algorithms, mpiar__algorithm_count, name);
}

const mpiar__algorithm_t *mpiar__algorithm_find_any(const char *name) {
  const mpiar__algorithm_t *a = mpiar__algorithm_find(name);
  return a ? a : find_in(mpiar__algorithm_variants, mpiar__algorithm_variant_count, name);
}

const mpiar__algorithm_t *mpiar__bcast_algorithm_find(const char *name) {
  return find_in(mpiar__bcast_algorithms, mpiar__bcast_algorithm_count, name);
}

int mpiar_algorithm_count(void) {
  return mpiar__algorithm_count;
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
