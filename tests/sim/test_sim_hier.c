/*
 * The simulator matrix of a hierarchical algorithm (argv[1]) on two-level topologies: node counts
 * 1..64 x ranks-per-node 1..8 (see grid()), placed in blocks, round-robin or by a random map;
 * uneven nodes (random sizes, random maps); and a small exhaustive corner (every dtype/op pair,
 * counts {0, 1, p-1, p, p+1, prime}, in place and not, NaN payloads). Every run must complete
 * with no deadlock, unmatched message, hazard or uninitialised read, bitwise identical results
 * on every rank and the reference result. `--quick` (sanitizer builds) runs every third
 * (nodes, ranks-per-node) pair of the grid and fewer uneven mixes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/sim.h"
#include "sim_test.h"

static const pair_t pairs[] = {
    {MPIAR_INT32, MPIAR_SUM},    {MPIAR_FLOAT32, MPIAR_SUM},  {MPIAR_FLOAT64, MPIAR_AVG},
    {MPIAR_UINT8, MPIAR_PROD},   {MPIAR_INT64, MPIAR_BXOR},   {MPIAR_FLOAT16, MPIAR_SUM},
    {MPIAR_BFLOAT16, MPIAR_MAX}, {MPIAR_FLOAT32, MPIAR_MIN},  {MPIAR_UINT64, MPIAR_BOR},
    {MPIAR_INT8, MPIAR_BAND},    {MPIAR_FLOAT64, MPIAR_PROD}, {MPIAR_FLOAT32, MPIAR_AVG},
};
#define NPAIRS (int)(sizeof pairs / sizeof pairs[0])

static int runs;
static uint64_t rng = 0x243F6A8885A308D3ull;

static uint64_t next_random(void) {
  return test_xorshift64(&rng);
}

static const char *placement_name(int pl) {
  return pl == 0 ? "block" : pl == 1 ? "roundrobin" : "random";
}

static void run_seg(const mpiar__algorithm_t *alg, int nnodes, const int *sizes, int placement,
                    size_t count, pair_t pr, int in_place, int nan, size_t seg) {
  mpiar__topology_t t;
  if (make_topology(&t, nnodes, sizes, placement, &rng) != MPIAR_SUCCESS) {
    failures++;
    fprintf(stderr, "FAIL topology of %d nodes: %s\n", nnodes, mpiar_last_error());
    return;
  }
  mpiar__sim_config_t cfg = MPIAR__SIM_CONFIG_INIT;
  cfg.algorithm = alg;
  cfg.nranks = t.nranks;
  cfg.topology = &t;
  cfg.count = count;
  cfg.dtype = pr.dtype;
  cfg.op = pr.op;
  cfg.in_place = in_place;
  cfg.nan_inputs = nan;
  cfg.segment_elems = seg;
  cfg.seed = (uint64_t)t.nranks * 1000003u + count;
  mpiar__sim_result_t res;
  int rc = mpiar__sim_run(&cfg, &res);
  runs++;
  if (rc != MPIAR_SUCCESS || !res.ok) {
    failures++;
    fprintf(stderr, "FAIL %s nodes=%d sizes=%d", alg->name, nnodes, sizes[0]);
    for (int i = 1; i < nnodes && i < 8; i++) {
      fprintf(stderr, ",%d", sizes[i]);
    }
    fprintf(stderr, "%s %s count=%zu %s %s in_place=%d nan=%d seg=%zu: %s\n",
            nnodes > 8 ? ",..." : "", placement_name(placement), count, mpiar_dtype_name(pr.dtype),
            mpiar_op_name(pr.op), in_place, nan, seg,
            rc != MPIAR_SUCCESS ? mpiar_last_error() : res.error);
  }
  mpiar__topology_destroy(&t);
}

static void run(const mpiar__algorithm_t *alg, int nnodes, const int *sizes, int placement,
                size_t count, pair_t pr, int in_place, int nan) {
  run_seg(alg, nnodes, sizes, placement, count, pr, in_place, nan, 0);
}

/*
 * The grid, one run per point, rotating placement, count and type: every ranks-per-node 1..8
 * for 1..32 nodes; for 33..64 nodes (where a run costs the most) 1, 8 and one more that rotates
 * through 2..7.
 */
static void grid(const mpiar__algorithm_t *alg, int quick) {
  int sizes[64], rot = 0;
  for (int nn = 1; nn <= 64; nn++) {
    for (int k = 1; k <= 8; k++) {
      if (nn > 32 && k != 1 && k != 8 && k != 2 + nn % 6) {
        continue;
      }
      if (quick && (nn * 8 + k) % 3 != 0) {
        continue;
      }
      for (int i = 0; i < nn; i++) {
        sizes[i] = k;
      }
      const size_t p = (size_t)nn * (size_t)k;
      const size_t counts[] = {(size_t)k * nn * 3, p + 1, prime_above(2 * p + 20), (size_t)k - 1,
                               1};
      const size_t count = counts[rot % 5];
      run(alg, nn, sizes, rot % 3, count, pairs[rot % NPAIRS], (rot / 3) % 2, rot % 7 == 0);
      rot++;
    }
  }
}

/* Uneven node sizes 1..8, every placement, counts that leave pieces of different lengths. */
static void uneven(const mpiar__algorithm_t *alg, int quick) {
  static const int fixed[][6] = {{1, 2},       {2, 1},    {3, 4},
                                 {4, 3, 2},    {1, 8, 1}, {5, 3, 7, 2},
                                 {8, 1, 1, 8}, {2, 2, 3}, {6, 4, 1, 5, 2, 3}};
  static const int nfixed[] = {2, 2, 2, 3, 3, 4, 4, 3, 6};
  int rot = 0;
  for (size_t f = 0; f < sizeof nfixed / sizeof nfixed[0]; f++) {
    for (int pl = 0; pl < 3; pl++) {
      int p = 0;
      for (int i = 0; i < nfixed[f]; i++) {
        p += fixed[f][i];
      }
      const size_t counts[] = {1, (size_t)p - 1, 840 + 1, prime_above(5 * (size_t)p)};
      for (int c = 0; c < 4; c++, rot++) {
        run(alg, nfixed[f], fixed[f], pl, counts[c], pairs[rot % NPAIRS], rot % 2, c == 3);
      }
    }
  }
  const int mixes = quick ? 12 : 60;
  for (int i = 0; i < mixes; i++, rot++) {
    int sizes[40];
    const int nn = 2 + (int)(next_random() % (i % 4 == 3 ? 39 : 12));
    for (int j = 0; j < nn; j++) {
      sizes[j] = 1 + (int)(next_random() % 8);
    }
    const size_t count = 1 + (size_t)(next_random() % 3000);
    run(alg, nn, sizes, i % 3, count, pairs[rot % NPAIRS], rot % 2, i % 5 == 0);
  }
}

/* Small topologies: every pair, every count of the flat matrix, both modes, NaN payloads. */
static void corner(const mpiar__algorithm_t *alg) {
  int sizes[8];
  for (int nn = 1; nn <= 5; nn++) {
    for (int k = 1; k <= 4; k++) {
      for (int i = 0; i < nn; i++) {
        sizes[i] = k;
      }
      const size_t p = (size_t)nn * (size_t)k;
      const size_t counts[] = {0, 1, p - 1, p, p + 1, prime_above(3 * p + 50)};
      for (int c = 0; c < 6; c++) {
        for (int pi = 0; pi < NPAIRS; pi++) {
          run(alg, nn, sizes, (c + pi) % 3, counts[c], pairs[pi], 0, 0);
          run(alg, nn, sizes, (c + pi + 1) % 3, counts[c], pairs[pi], 1, 0);
        }
      }
      run(alg, nn, sizes, nn % 3, p + 5, (pair_t){MPIAR_FLOAT32, MPIAR_SUM}, p % 2, 1);
      run(alg, nn, sizes, k % 3, 2 * p + 1, (pair_t){MPIAR_FLOAT16, MPIAR_MIN}, (p + 1) % 2, 1);
    }
  }
  /* About 1 MiB through the threaded kernels, with every rank's share of a node link used. */
  const int big[][2] = {{2, 4}, {3, 3}, {4, 2}, {8, 8}};
  for (int i = 0; i < 4; i++) {
    for (int j = 0; j < big[i][0]; j++) {
      sizes[j] = big[i][1];
    }
    run(alg, big[i][0], sizes, i % 3, (1u << 20) / 4 + 3, (pair_t){MPIAR_FLOAT32, MPIAR_SUM}, i % 2,
        0);
  }
}

/*
 * Segmented (pipelined) builders: chunks of segment x p elements, each a two-level allreduce of
 * its own, with segments that leave a short last chunk and pieces shorter than the nodes.
 */
static void segmented(const mpiar__algorithm_t *alg) {
  static const int shapes[][5] = {{2, 2},    {3, 3, 3},       {2, 2, 2, 2},
                                  {3, 1, 2}, {4, 4, 4, 4, 4}, {1, 5, 2, 8}};
  static const int nshape[] = {2, 3, 4, 3, 5, 4};
  int rot = 0;
  for (int i = 0; i < 6; i++) {
    int p = 0;
    for (int j = 0; j < nshape[i]; j++) {
      p += shapes[i][j];
    }
    const size_t segs[] = {1, 3, 7}, counts[] = {5 * (size_t)p + 3, 97, 64 * (size_t)p};
    for (int g = 0; g < 3; g++) {
      for (int c = 0; c < 3; c++, rot++) {
        run_seg(alg, nshape[i], shapes[i], rot % 3, counts[c], pairs[rot % NPAIRS], rot % 2,
                rot % 5 == 0, segs[g]);
      }
    }
  }
  /*
   * One-element segments on 2 x 2 ranks: 20480 chunks put 40960 messages on each pair, so tags
   * wrap past MPIAR__TAG_LIMIT (the reused ones depend on their predecessors) and every message
   * must still match its receive.
   */
  run_seg(alg, 2, shapes[0], 1, 81920, (pair_t){MPIAR_INT32, MPIAR_SUM}, 1, 0, 1);
}

int main(int argc, char **argv) {
  if (argc < 2 || argc > 3 || (argc == 3 && strcmp(argv[2], "--quick") != 0)) {
    fprintf(stderr, "usage: %s ALGORITHM [--quick]\n", argv[0]);
    return 2;
  }
  const int quick = argc == 3;
  const mpiar__algorithm_t *alg = mpiar__algorithm_find_any(argv[1]);
  if (alg == NULL) {
    fprintf(stderr, "unknown algorithm %s\n", argv[1]);
    return 2;
  }
  corner(alg);
  uneven(alg, quick);
  if (alg->flags & MPIAR__ALG_SEGMENTED) {
    segmented(alg);
  }
  grid(alg, quick);
  printf("%s: %d runs, %d failures\n", alg->name, runs, failures);
  return failures ? 1 : 0;
}
