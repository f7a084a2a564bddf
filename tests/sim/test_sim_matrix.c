/*
 * The simulator matrix: one allreduce algorithm (argv[1]) x every p in 1..64 and 100, 127, 128
 * (argv[2] = small) or 1000, 1024 (large) x counts {0, 1, p-1, p, p+1, a prime, ~1 MiB} x
 * dtype/op pairs x in place and not; --one-count keeps the prime count only.
 * Every run must complete with no deadlock, unmatched message, hazard or uninitialised read, with
 * bitwise identical results on every rank and the reference result. Large p and the ~1 MiB
 * count use fewer dtype/op pairs (and the ring fewer counts at p >= 1000) so that the whole
 * matrix stays within its time budget.
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
    {MPIAR_INT8, MPIAR_BAND},    {MPIAR_FLOAT64, MPIAR_PROD}, {MPIAR_UINT32, MPIAR_MAX},
};
#define NPAIRS (int)(sizeof pairs / sizeof pairs[0])

static int runs;

static void run(const mpiar__algorithm_t *alg, int p, size_t count, pair_t pr, int in_place,
                size_t seg, int nan) {
  mpiar__sim_config_t cfg = MPIAR__SIM_CONFIG_INIT;
  cfg.algorithm = alg;
  cfg.nranks = p;
  cfg.count = count;
  cfg.dtype = pr.dtype;
  cfg.op = pr.op;
  cfg.in_place = in_place;
  cfg.segment_elems = seg;
  cfg.nan_inputs = nan;
  cfg.seed = (uint64_t)p * 1000003u + count;
  mpiar__sim_result_t res;
  int rc = mpiar__sim_run(&cfg, &res);
  runs++;
  if (rc != MPIAR_SUCCESS || !res.ok) {
    failures++;
    fprintf(stderr, "FAIL %s p=%d count=%zu %s %s in_place=%d seg=%zu nan=%d: %s\n", alg->name, p,
            count, mpiar_dtype_name(pr.dtype), mpiar_op_name(pr.op), in_place, seg, nan,
            rc != MPIAR_SUCCESS ? mpiar_last_error() : res.error);
  }
}

int main(int argc, char **argv) {
  if (argc < 3 || argc > 4 || (strcmp(argv[2], "small") != 0 && strcmp(argv[2], "large") != 0) ||
      (argc == 4 && strcmp(argv[3], "--one-count") != 0)) {
    fprintf(stderr, "usage: %s ALGORITHM small|large [--one-count]\n", argv[0]);
    return 2;
  }
  const int large = strcmp(argv[2], "large") == 0;
  const int one_count = argc == 4;
  const mpiar__algorithm_t *alg = mpiar__algorithm_find_any(argv[1]);
  if (alg == NULL) {
    fprintf(stderr, "unknown algorithm %s\n", argv[1]);
    return 2;
  }
  const int big[] = {100, 127, 128, 1000, 1024};
  int plist[64 + 5], np = 0;
  for (int p = 1; p <= 64; p++) {
    if (!large) {
      plist[np++] = p;
    }
  }
  for (int i = 0; i < 5; i++) {
    if ((big[i] >= 1000) == large) {
      plist[np++] = big[i];
    }
  }
  int rot = 0;
  for (int i = 0; i < np; i++) {
    const int p = plist[i];
    const size_t counts[] = {
        0, 1, (size_t)p - 1, (size_t)p, (size_t)p + 1, prime_above(3 * (size_t)p + 50)};
    const int ncounts = (int)(sizeof counts / sizeof counts[0]);
    for (int c = 0; c < ncounts; c++) {
      if (c == 2 && p == 1) {
        continue; /* p-1 = 0 is already covered */
      }
      /*
       * The ring sends 2(p-1) messages per rank whatever the count, so at p >= 1000 each run is
       * millions of steps; there it runs the counts whose blocks differ in length (1, p+1, the
       * prime), the others being covered by p = 100..128 with the same code paths.
       */
      if ((alg->flags & MPIAR__ALG_SEGMENTED) && p >= 1000 && (c == 0 || c == 2 || c == 3)) {
        continue;
      }
      /* --one-count (for slow builds, e.g. with sanitizers): the prime count only, whose blocks
       * differ in length. */
      if (one_count && c != ncounts - 1) {
        continue;
      }
      /* Small p: every pair, both modes. Larger p: pairs rotate, modes alternate. */
      const int npairs = p <= 12 ? NPAIRS : p <= 64 ? 2 : 1;
      for (int k = 0; k < npairs; k++) {
        const pair_t pr = pairs[(rot + k) % NPAIRS];
        if (p <= 12) {
          run(alg, p, counts[c], pr, 0, 0, 0);
          run(alg, p, counts[c], pr, 1, 0, 0);
        } else {
          run(alg, p, counts[c], pr, (rot + k + c) % 2, 0, 0);
        }
      }
      rot++;
    }
    /* Floats with NaN payloads: bitwise identity needs a fixed operand order on every rank. */
    if (p <= 64 || p == 127) {
      run(alg, p, (size_t)p + 5, (pair_t){MPIAR_FLOAT32, MPIAR_SUM}, p % 2, 0, 1);
      run(alg, p, (size_t)2 * p + 1, (pair_t){MPIAR_FLOAT16, MPIAR_MIN}, (p + 1) % 2, 0, 1);
    }
    /* Segmented ring: segments shorter than a block, and not dividing it. */
    if ((alg->flags & MPIAR__ALG_SEGMENTED) && p <= 64 && p % 3 != 0) {
      run(alg, p, (size_t)7 * p + 3, pairs[rot % NPAIRS], p % 2, 3, 0);
      run(alg, p, (size_t)16 * p, (pair_t){MPIAR_FLOAT64, MPIAR_SUM}, (p + 1) % 2, 4, 0);
    }
  }
  /* About 1 MiB (not a multiple of p): real volume through the kernels' threaded path. */
  const int mib_p[] = {1, 2, 3, 4, 5, 7, 8, 16, 31, 64};
  for (size_t i = 0; i < sizeof mib_p / sizeof mib_p[0] && !large; i++) {
    const size_t count = (1u << 20) / 4 + 3;
    run(alg, mib_p[i], count, (pair_t){MPIAR_FLOAT32, MPIAR_SUM}, (int)i % 2, 0, 0);
    if (mib_p[i] <= 8) {
      run(alg, mib_p[i], count / 2, (pair_t){MPIAR_INT64, MPIAR_SUM}, (int)(i + 1) % 2, 0, 0);
    }
    if ((alg->flags & MPIAR__ALG_SEGMENTED) && mib_p[i] <= 8) {
      run(alg, mib_p[i], count, (pair_t){MPIAR_FLOAT32, MPIAR_SUM}, (int)(i + 1) % 2, 16384, 0);
    }
  }
  printf("%s (%s p%s): %d runs, %d failures\n", alg->name, large ? "large" : "small",
         one_count ? ", one count" : "", runs, failures);
  return failures ? 1 : 0;
}
