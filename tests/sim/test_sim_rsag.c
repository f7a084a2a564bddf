/*
 * Reduce-scatter and allgather builders in the simulator: every entry of both registries for
 * p = 1..64 (counts 0, 1, a prime and 64 elements per rank, in place and not, rotating over
 * datatype/operation pairs, NaN payloads on some floating runs) and a few large p: matching,
 * hazards, output coverage and the data (reduce-scatter: each rank's block against the reference
 * over the ranks' inputs; allgather: every block on every rank, bit for bit). Reproducible mode:
 * every entry's replacement gives the bits of mpiar_reduce_canonical() for each block. The cost
 * functions equal the simulator's critical path where the files say they are exact.
 *
 * Usage: test_sim_rsag [quick] (quick: p = 1..24 and one large p, for sanitizer builds).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algorithms/algorithms.h"
#include "sim/sim.h"
#include "sim_test.h"

static const pair_t pairs[] = {
    {MPIAR_FLOAT32, MPIAR_SUM}, {MPIAR_INT32, MPIAR_SUM},   {MPIAR_FLOAT64, MPIAR_PROD},
    {MPIAR_FLOAT32, MPIAR_AVG}, {MPIAR_INT64, MPIAR_MAX},   {MPIAR_FLOAT16, MPIAR_SUM},
    {MPIAR_UINT8, MPIAR_MIN},   {MPIAR_BFLOAT16, MPIAR_SUM}};
#define NPAIRS (int)(sizeof pairs / sizeof pairs[0])

static int run_one(const mpiar__algorithm_t *alg, int coll, int p, size_t count, int in_place,
                   pair_t pr, int nan) {
  mpiar__sim_config_t cfg = MPIAR__SIM_CONFIG_INIT;
  mpiar__sim_result_t res;
  cfg.algorithm = alg;
  cfg.collective = coll;
  cfg.nranks = p;
  cfg.count = count;
  cfg.in_place = in_place;
  cfg.dtype = pr.dtype;
  cfg.op = pr.op;
  cfg.nan_inputs = nan;
  cfg.seed = (uint64_t)p * 1000003u + count;
  int rc = mpiar__sim_run(&cfg, &res);
  CHECK(rc == MPIAR_SUCCESS && res.ok, "%s %s p=%d count=%zu in_place=%d %s %s: rc %d %s",
             coll == MPIAR__SIM_REDUCE_SCATTER ? "reduce-scatter" : "allgather", alg->name, p,
             count, in_place, mpiar_dtype_name(pr.dtype), mpiar_op_name(pr.op), rc,
             rc == MPIAR_SUCCESS ? res.error : mpiar_last_error());
  return rc == MPIAR_SUCCESS && res.ok;
}

static void matrix(const mpiar__algorithm_t *alg, int coll, int pmax) {
  const size_t counts[] = {0, 1, 7, 64};
  int i = 0;
  for (int p = 1; p <= pmax; p++) {
    for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++) {
      for (int ip = 0; ip < 2; ip++, i++) {
        pair_t pr = pairs[i % NPAIRS];
        if (coll == MPIAR__SIM_ALLGATHER && pr.op == MPIAR_AVG) {
          pr.op = MPIAR_SUM; /* no operation applies; the dtype is what rotates */
        }
        if (!run_one(alg, coll, p, counts[ci], ip, pr, i % 5 == 0)) {
          return;
        }
      }
    }
  }
}

static void large(const mpiar__algorithm_t *alg, int coll, int quick) {
  const int ps[] = {100, 128, 257};
  for (int i = 0; i < (quick ? 1 : 3); i++) {
    run_one(alg, coll, ps[i], 3, i == 1, pairs[0], 0);
  }
}

/* Reproducible mode: the replacement of every entry reduces each block in the canonical order. */
static void repro(int pmax) {
  const mpiar_dtype_t dts[] = {MPIAR_FLOAT32, MPIAR_FLOAT64, MPIAR_BFLOAT16};
  for (int a = 0; a < mpiar__reduce_scatter_algorithm_count; a++) {
    for (int p = 1; p <= pmax; p += (p < 12 ? 1 : 7)) {
      const mpiar_dtype_t dt = dts[(a + p) % 3];
      const mpiar__algorithm_t *alg =
          mpiar__reduce_scatter_reproducible(&mpiar__reduce_scatter_algorithms[a], p, dt);
      CHECK(alg != NULL, "%s", "");
      const size_t c = 5, n = (size_t)p * c, es = mpiar_dtype_size(dt);
      mpiar__sim_config_t cfg = MPIAR__SIM_CONFIG_INIT;
      mpiar__sim_result_t res;
      unsigned char *buf = malloc((size_t)p * n * es + 1), *want = malloc(n * es + 1);
      const void **in = malloc((size_t)p * sizeof *in);
      CHECK(buf != NULL && want != NULL && in != NULL, "%s", "");
      uint64_t st = 0x1234 + (uint64_t)p;
      for (int r = 0; r < p; r++) {
        for (size_t i = 0; i < n; i++) {
          /* Values of mixed magnitude, so that the order of the sum shows in the bits. */
          double v = ((double)(test_xorshift64(&st) % 20001) - 10000.0) *
                     pow(2.0, (double)(test_xorshift64(&st) % 24) - 12.0);
          unsigned char *x = buf + ((size_t)r * n + i) * es;
          if (dt == MPIAR_FLOAT32) {
            float f = (float)v;
            memcpy(x, &f, 4);
          } else if (dt == MPIAR_FLOAT64) {
            memcpy(x, &v, 8);
          } else {
            float f = (float)v;
            uint32_t b;
            memcpy(&b, &f, 4);
            uint16_t h = (uint16_t)(b >> 16);
            memcpy(x, &h, 2);
          }
        }
        in[r] = buf + (size_t)r * n * es;
      }
      CHECK(mpiar_reduce_canonical(want, in, p, n, dt, MPIAR_SUM) == MPIAR_SUCCESS, "%s", "");
      for (int ip = 0; ip < 2; ip++) {
        cfg.algorithm = alg;
        cfg.collective = MPIAR__SIM_REDUCE_SCATTER;
        cfg.nranks = p;
        cfg.count = c;
        cfg.in_place = ip;
        cfg.dtype = dt;
        cfg.op = MPIAR_SUM;
        cfg.inputs = in;
        cfg.expect = want;
        int rc = mpiar__sim_run(&cfg, &res);
        CHECK(rc == MPIAR_SUCCESS && res.ok, "repro %s -> %s p=%d %s in_place=%d: %s",
                   mpiar__reduce_scatter_algorithms[a].name, alg->name, p, mpiar_dtype_name(dt),
                   ip, rc == MPIAR_SUCCESS ? res.error : mpiar_last_error());
      }
      free(buf);
      free(want);
      free(in);
    }
  }
}

/* The closed forms the files call exact, against the critical path. */
static void cost(void) {
  const struct {
    int coll;
    const char *name;
    int pof2_only;
  } exact[] = {{MPIAR__SIM_REDUCE_SCATTER, "ring", 0},
               {MPIAR__SIM_REDUCE_SCATTER, "recursive_halving", 1},
               {MPIAR__SIM_ALLGATHER, "ring", 0},
               {MPIAR__SIM_ALLGATHER, "recursive_doubling", 1},
               {MPIAR__SIM_ALLGATHER, "bruck", 0},
               {MPIAR__SIM_ALLGATHER, "direct", 0}};
  for (size_t e = 0; e < sizeof exact / sizeof exact[0]; e++) {
    const mpiar__algorithm_t *alg = exact[e].coll == MPIAR__SIM_REDUCE_SCATTER
                                        ? mpiar__reduce_scatter_algorithm_find(exact[e].name)
                                        : mpiar__allgather_algorithm_find(exact[e].name);
    CHECK(alg != NULL, "%s", "");
    for (int p = 2; p <= 64; p++) {
      if (exact[e].pof2_only && (p & (p - 1)) != 0) {
        continue;
      }
      for (size_t c = 1; c <= 4096; c *= 64) {
        mpiar__sim_config_t cfg = MPIAR__SIM_CONFIG_INIT;
        mpiar__sim_result_t res;
        cfg.algorithm = alg;
        cfg.collective = exact[e].coll;
        cfg.nranks = p;
        cfg.count = c;
        cfg.data = 0;
        CHECK(mpiar__sim_run(&cfg, &res) == MPIAR_SUCCESS && res.ok, "%s", "");
        const double model =
            alg->cost(p, (size_t)p * c * 4, 4, 0, &cfg.cost, NULL);
        CHECK(fabs(model - res.time_s) <= 1e-9 * res.time_s + 1e-15,
                   "%s p=%d count=%zu: model %.9g s, simulator %.9g s", alg->name, p, c, model,
                   res.time_s);
      }
    }
  }
}

/* Names: the registries' entries are found by name and numbered by position. */
static void names(void) {
  for (int i = 0; i < mpiar__reduce_scatter_algorithm_count; i++) {
    CHECK(mpiar__reduce_scatter_algorithm_find(mpiar__reduce_scatter_algorithms[i].name) ==
          &mpiar__reduce_scatter_algorithms[i], "%s", "");
    CHECK(mpiar__reduce_scatter_algorithms[i].index == (unsigned)i, "%s", "");
  }
  for (int i = 0; i < mpiar__allgather_algorithm_count; i++) {
    CHECK(mpiar__allgather_algorithm_find(mpiar__allgather_algorithms[i].name) ==
          &mpiar__allgather_algorithms[i], "%s", "");
    CHECK(mpiar__allgather_algorithms[i].index == (unsigned)i, "%s", "");
  }
  CHECK(mpiar__reduce_scatter_algorithm_find("bruck") == NULL, "%s", "");
  CHECK(mpiar__allgather_algorithm_find("recursive_halving") == NULL, "%s", "");
}

int main(int argc, char **argv) {
  const int quick = argc > 1 && strcmp(argv[1], "quick") == 0;
  const int pmax = quick ? 24 : 64;
  names();
  for (int i = 0; i < mpiar__reduce_scatter_algorithm_count; i++) {
    matrix(&mpiar__reduce_scatter_algorithms[i], MPIAR__SIM_REDUCE_SCATTER, pmax);
    large(&mpiar__reduce_scatter_algorithms[i], MPIAR__SIM_REDUCE_SCATTER, quick);
  }
  for (int i = 0; i < mpiar__allgather_algorithm_count; i++) {
    matrix(&mpiar__allgather_algorithms[i], MPIAR__SIM_ALLGATHER, pmax);
    large(&mpiar__allgather_algorithms[i], MPIAR__SIM_ALLGATHER, quick);
  }
  repro(pmax);
  cost();
  if (failures == 0) {
    printf("sim_rsag: every reduce-scatter and allgather entry passed\n");
  }
  return failures != 0;
}
