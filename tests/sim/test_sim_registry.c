/*
 * What the registry entries say of themselves.
 *
 * Numbers: every allreduce entry's index is unique and mpiar__algorithm_at() finds the entry by
 * it; broadcast entries are numbered by their position.
 *
 * Reproducible replacements: a canonical entry (MPIAR__ALG_CANONICAL) names none; every other
 * names one that exists and is canonical, and mpiar__algorithm_reproducible() returns it for
 * floating data on three ranks and the entry itself for integers (sim_repro_mapped checks the
 * bits).
 *
 * The MPIAR__ALG_ORDER_BY_POSITION flag, proven both ways on every allreduce entry
 * (registry, parameter instances, research variants): each rank holds one float64 value at every
 * position of its vector, with exponents spread so that the order of the additions shows in the
 * last bits. An entry without the flag must give the same bits at every position for every rank
 * count, count and segment below (every element is combined along one tree of ranks); an entry
 * with the flag must give different bits at two positions at least once (else the flag is not
 * needed and the kvstore avoids the entry for nothing). Hierarchical entries run on two-level
 * topologies too, where they build their hierarchical schedules.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algorithms/algorithms.h"
#include "schedule/topology.h"
#include "sim/sim.h"
#include "sim_test.h"

static uint64_t next(uint64_t *x) {
  uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* One run; @return 1 if the result differs between two positions, 0 if not, -1 on failure. */
static int varies(const mpiar__algorithm_t *alg, int p, size_t count, size_t seg,
                  const mpiar__topology_t *topo, uint64_t seed) {
  double *in = malloc((size_t)p * count * sizeof *in), *out = malloc(count * sizeof *out);
  const void **inputs = malloc((size_t)p * sizeof *inputs);
  if (in == NULL || out == NULL || inputs == NULL) {
    fprintf(stderr, "out of memory\n");
    exit(2);
  }
  for (int r = 0; r < p; r++) {
    uint64_t u = next(&seed);
    double v = ldexp(1.0 + (double)(u >> 11) * 0x1p-53, (int)(u % 41) - 20);
    v = (u >> 10) & 1 ? -v : v;
    for (size_t i = 0; i < count; i++) {
      in[(size_t)r * count + i] = v;
    }
    inputs[r] = in + (size_t)r * count;
  }
  mpiar__sim_config_t cfg = MPIAR__SIM_CONFIG_INIT;
  cfg.algorithm = alg;
  cfg.nranks = p;
  cfg.count = count;
  cfg.dtype = MPIAR_FLOAT64;
  cfg.op = MPIAR_SUM;
  cfg.segment_elems = seg;
  cfg.inputs = inputs;
  cfg.result = out;
  cfg.topology = topo;
  mpiar__sim_result_t res;
  int rc = mpiar__sim_run(&cfg, &res);
  int v = -1;
  if (rc != MPIAR_SUCCESS || !res.ok) {
    EXPECT(0, "%s p=%d count=%zu seg=%zu: %s", alg->name, p, count, seg,
           rc != MPIAR_SUCCESS ? mpiar_last_error() : res.error);
  } else {
    v = 0;
    for (size_t i = 1; i < count; i++) {
      v |= memcmp(&out[i], &out[0], sizeof out[0]) != 0;
    }
  }
  free(in);
  free(out);
  free(inputs);
  return v;
}

static void entry(const mpiar__algorithm_t *alg) {
  static const int ps[] = {3, 4, 5, 6, 7, 8, 11, 12, 16};
  const int flagged = (alg->flags & MPIAR__ALG_ORDER_BY_POSITION) != 0;
  int seen = 0, runs = 0;
  for (size_t pi = 0; pi < sizeof ps / sizeof ps[0]; pi++) {
    const int p = ps[pi];
    const size_t counts[] = {(size_t)p + 1, (size_t)p * 6 + 5};
    for (int ci = 0; ci < 2; ci++) {
      const size_t count = counts[ci];
      const size_t segs[] = {0, count / 5 + 1};
      for (int si = 0; si < ((alg->flags & MPIAR__ALG_SEGMENTED) ? 2 : 1); si++) {
        for (int level = 0; level < ((alg->flags & MPIAR__ALG_HIERARCHICAL) ? 2 : 1); level++) {
          mpiar__topology_t t, *topo = NULL;
          if (level == 1) {
            int sizes[2] = {p / 2, p - p / 2};
            if (mpiar__topology_uneven(&t, 2, sizes, MPIAR__PLACE_BLOCK) != MPIAR_SUCCESS) {
              EXPECT(0, "topology: %s", mpiar_last_error());
              continue;
            }
            topo = &t;
          }
          for (uint64_t seed = 1; seed <= 3; seed++) {
            int v = varies(alg, p, count, segs[si], topo, seed * 1000003u + (uint64_t)p);
            runs++;
            if (v == 1 && !flagged) {
              EXPECT(0,
                     "%s p=%d count=%zu seg=%zu%s: the result differs between positions, but "
                     "the entry lacks MPIAR__ALG_ORDER_BY_POSITION",
                     alg->name, p, count, segs[si], topo ? " (2 nodes)" : "");
            }
            seen |= v == 1;
          }
          if (topo != NULL) {
            mpiar__topology_destroy(topo);
          }
        }
      }
    }
  }
  EXPECT(!flagged || seen,
         "%s has MPIAR__ALG_ORDER_BY_POSITION but gave the same bits at every position in %d "
         "runs",
         alg->name, runs);
  printf("%-28s %s (%d runs)\n", alg->name, seen ? "order by position" : "one order", runs);
}

static void numbers_and_replacements(void) {
  const struct {
    const mpiar__algorithm_t *list;
    int n;
  } lists[3] = {{mpiar__algorithms, mpiar__algorithm_count},
                {mpiar__algorithm_instances, mpiar__algorithm_instance_count},
                {mpiar__algorithm_variants, mpiar__algorithm_variant_count}};
  int total = 0;
  for (int l = 0; l < 3; l++) {
    for (int i = 0; i < lists[l].n; i++) {
      const mpiar__algorithm_t *a = &lists[l].list[i];
      total++;
      EXPECT(mpiar__algorithm_at(a->index) == a, "%s: index %u names another entry", a->name,
             a->index);
      EXPECT(mpiar__algorithm_number(a) == a->index, "%s: number differs from its index", a->name);
      if (a->flags & MPIAR__ALG_CANONICAL) {
        EXPECT(a->repro == NULL, "%s is canonical but names a replacement", a->name);
        EXPECT(mpiar__algorithm_reproducible(a, 5, MPIAR_FLOAT32) == a,
               "%s is canonical but is replaced", a->name);
        continue;
      }
      const mpiar__algorithm_t *r = mpiar__algorithm_find_any(a->repro);
      EXPECT(r != NULL && (r->flags & MPIAR__ALG_CANONICAL),
             "%s: replacement '%s' is not a canonical entry", a->name, a->repro ? a->repro : "");
      EXPECT(mpiar__algorithm_reproducible(a, 3, MPIAR_FLOAT64) == r,
             "%s: reproducible mode does not run its replacement", a->name);
      EXPECT(mpiar__algorithm_reproducible(a, 3, MPIAR_INT32) == a,
             "%s: integers are replaced (any order gives their bits)", a->name);
      EXPECT(mpiar__algorithm_reproducible(a, 2, MPIAR_FLOAT16) ==
                 ((a->flags & MPIAR__ALG_PAIR_EXACT) ? a : r),
             "%s: two ranks", a->name);
    }
  }
  for (int i = 0; i < total; i++) {
    EXPECT(mpiar__algorithm_at((unsigned)i) != NULL, "number %d names nothing (not dense)", i);
  }
  EXPECT(mpiar__algorithm_at((unsigned)total) == NULL, "number %d is past the entries", total);
  for (int i = 0; i < mpiar__bcast_algorithm_count; i++) {
    EXPECT(mpiar__bcast_algorithms[i].index == (unsigned)i, "broadcast %s: index %u",
           mpiar__bcast_algorithms[i].name, mpiar__bcast_algorithms[i].index);
  }
}

int main(void) {
  numbers_and_replacements();
  for (int i = 0; i < mpiar__algorithm_count; i++) {
    entry(&mpiar__algorithms[i]);
  }
  for (int i = 0; i < mpiar__algorithm_instance_count; i++) {
    entry(&mpiar__algorithm_instances[i]);
  }
  for (int i = 0; i < mpiar__algorithm_variant_count; i++) {
    entry(&mpiar__algorithm_variants[i]);
  }
  printf("%s\n", failures ? "FAILED" : "ok");
  return failures ? 1 : 0;
}
