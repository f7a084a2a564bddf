/*
 * Reproducible mode in the simulator: the builders that reproducible mode runs give, on every
 * rank, exactly the bits of the serial canonical reduction (mpiar_reduce_canonical()) for every
 * rank count in 1..64 and 1000, counts {0, 1, p-1, p, p+1, a prime, large}, in place or not,
 * segment sizes, f32/f64/f16/bf16 with random data over a wide exponent range and with NaN
 * (rank-specific payloads), infinities, subnormals and signed zeros, and integer types. A
 * sub-range of a vector (what fusion and pieces hand to the allreduce) gives the bits of the same
 * elements of the whole vector. Since every builder equals the one reference, they equal each
 * other, whatever the segment size and offset.
 *
 * Modes (argv[1]):
 *   BUILDER   the matrix above for one builder (repro_direct, repro_rabenseifner,
 *             recursive_doubling, and the research variant repro_halving)
 *   mapped    every registry algorithm and variant through mpiar__algorithm_reproducible(),
 *             for every p (each replacement once per p)
 *   cost      bytes sent per rank (2 (p-1)/p n for repro_direct, any p) and the closed forms
 * A second argument "quick" shrinks the matrix (sanitizer builds).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "algorithms/util.h"
#include "sim/sim.h"
#include "sim_test.h"

static int runs, quick;

/* ---- inputs ---- */

enum { DATA_WIDE = 0, DATA_SPECIAL = 1 };

static int is_float(mpiar_dtype_t d) {
  return mpiar__dtype_is_float(d);
}

/* Bit layout of a floating type: exponent bits, mantissa bits. */
static void layout(mpiar_dtype_t d, int *ebits, int *mbits) {
  switch (d) {
  case MPIAR_FLOAT16:
    *ebits = 5, *mbits = 10;
    break;
  case MPIAR_BFLOAT16:
    *ebits = 8, *mbits = 7;
    break;
  case MPIAR_FLOAT32:
    *ebits = 8, *mbits = 23;
    break;
  default:
    *ebits = 11, *mbits = 52;
    break;
  }
}

/*
 * One value's bits. Wide: random sign and mantissa, exponent uniform over most of the type's
 * range (so that sums round differently in every order), and now and then a subnormal. Special:
 * also quiet and signalling NaNs whose payload names the rank, infinities, signed zeros, the
 * largest finite values and subnormals.
 */
static uint64_t float_bits(mpiar_dtype_t d, int mode, int r, uint64_t *st) {
  int eb, mb;
  layout(d, &eb, &mb);
  const uint64_t x = test_splitmix64(st), emax = ((uint64_t)1 << eb) - 1;
  const uint64_t sign = (x >> 63) << (eb + mb), mant = x & (((uint64_t)1 << mb) - 1);
  const uint64_t payload = ((uint64_t)r + 1) & (((uint64_t)1 << (mb - 1)) - 1);
  const unsigned kind = mode == DATA_SPECIAL ? (unsigned)(x >> 40) % 16 : 9 + (x >> 40) % 32;
  switch (kind) {
  case 0: /* quiet NaN, payload r + 1 */
    return sign | emax << mb | (uint64_t)1 << (mb - 1) | payload;
  case 1: /* signalling NaN (payload non-zero) */
    return sign | emax << mb | (payload ? payload : 1);
  case 2:
    return sign | emax << mb; /* +-infinity */
  case 3:
  case 9:
    return sign | (mant ? mant : 1); /* subnormal */
  case 4:
    return sign; /* +-0 */
  case 5:
    return sign | (emax - 1) << mb | (((uint64_t)1 << mb) - 1); /* largest finite */
  default: {
    /* Exponents over the middle 7/8 of the range: wide, yet most sums of p values stay finite. */
    const uint64_t span = emax - emax / 8 - 1;
    const uint64_t e = 1 + emax / 16 + (x >> 20) % span;
    return sign | e << mb | mant;
  }
  }
}

static void fill(mpiar_dtype_t d, int mode, int r, uint64_t seed, size_t count,
                 unsigned char *buf) {
  const size_t es = mpiar_dtype_size(d);
  uint64_t st = seed * 0x100000001B3ull + (uint64_t)r * 0xD1B54A32D192ED03ull;
  for (size_t i = 0; i < count; i++) {
    uint64_t v = is_float(d) ? float_bits(d, mode, r, &st) : test_splitmix64(&st);
    memcpy(buf + i * es, &v, es); /* little-endian: the low bytes hold the value */
  }
}

/* ---- one simulated allreduce against the serial canonical reduction ---- */

typedef struct job {
  const mpiar__algorithm_t *alg;
  int p;
  size_t count;
  mpiar_dtype_t dtype;
  mpiar_op_t op;
  int in_place;
  size_t seg;
  int mode;
  size_t off; /* > 0: also run the sub-range [off, off + count) of a longer vector */
} job_t;

static const char *job_text(const job_t *j, char *buf, size_t len) {
  snprintf(buf, len, "%s p=%d count=%zu %s %s in_place=%d seg=%zu data=%s off=%zu", j->alg->name,
           j->p, j->count, mpiar_dtype_name(j->dtype), mpiar_op_name(j->op), j->in_place, j->seg,
           j->mode == DATA_SPECIAL ? "special" : "wide", j->off);
  return buf;
}

static mpiar__sim_result_t simulate(const job_t *j, const void *const *inputs, const void *expect,
                                    size_t count) {
  mpiar__sim_config_t cfg = MPIAR__SIM_CONFIG_INIT;
  cfg.algorithm = j->alg;
  cfg.nranks = j->p;
  cfg.count = count;
  cfg.dtype = j->dtype;
  cfg.op = j->op;
  cfg.in_place = j->in_place;
  cfg.segment_elems = j->seg;
  cfg.inputs = inputs;
  cfg.expect = expect;
  mpiar__sim_result_t res;
  const int rc = mpiar__sim_run(&cfg, &res);
  runs++;
  if (rc != MPIAR_SUCCESS || !res.ok) {
    char b[256];
    job_t k = *j;
    k.count = count;
    failures++;
    fprintf(stderr, "FAIL %s: %s\n", job_text(&k, b, sizeof b),
            rc != MPIAR_SUCCESS ? mpiar_last_error() : res.error);
  }
  return res;
}

/*
 * The vector has off + count + off elements; the reference is the canonical reduction of all of
 * it. The allreduce of the whole vector, and (off > 0) of its middle [off, off + count), must each
 * give the reference's bits for their elements.
 */
static mpiar__sim_result_t run(const job_t *j) {
  const size_t es = mpiar_dtype_size(j->dtype), total = j->count + 2 * j->off;
  const int p = j->p;
  unsigned char *mem = malloc((size_t)p * total * es + 1);
  unsigned char *expect = malloc(total * es + 1);
  const void **in = malloc((size_t)p * sizeof *in), **sub = malloc((size_t)p * sizeof *sub);
  if (!mem || !expect || !in || !sub) {
    fprintf(stderr, "out of memory\n");
    exit(2);
  }
  const uint64_t seed = (uint64_t)p * 7919u + j->count * 31u + (uint64_t)j->dtype * 5u + j->off;
  for (int r = 0; r < p; r++) {
    in[r] = mem + (size_t)r * total * es;
    sub[r] = (const unsigned char *)in[r] + j->off * es;
    fill(j->dtype, j->mode, r, seed, total, mem + (size_t)r * total * es);
  }
  const int rc = mpiar_reduce_canonical(expect, in, p, total, j->dtype, j->op);
  EXPECT(rc == MPIAR_SUCCESS, "mpiar_reduce_canonical: %s", mpiar_last_error());
  const mpiar__sim_result_t res = simulate(j, in, expect, total);
  if (j->off > 0) {
    simulate(j, sub, expect + j->off * es, j->count);
  }
  free(mem);
  free(expect);
  free(in);
  free(sub);
  return res;
}

/* ---- the matrix for one builder ---- */

/* Floating pairs, then integer ones (order never matters there, they must still be right). */
static const pair_t float_pairs[] = {
    {MPIAR_FLOAT32, MPIAR_SUM},  {MPIAR_FLOAT64, MPIAR_SUM},  {MPIAR_FLOAT16, MPIAR_SUM},
    {MPIAR_BFLOAT16, MPIAR_SUM}, {MPIAR_FLOAT32, MPIAR_AVG},  {MPIAR_FLOAT16, MPIAR_AVG},
    {MPIAR_BFLOAT16, MPIAR_AVG}, {MPIAR_FLOAT64, MPIAR_PROD}, {MPIAR_FLOAT32, MPIAR_MAX},
    {MPIAR_BFLOAT16, MPIAR_MIN}, {MPIAR_FLOAT64, MPIAR_AVG},  {MPIAR_FLOAT16, MPIAR_PROD},
};
static const pair_t int_pairs[] = {
    {MPIAR_INT32, MPIAR_SUM},  {MPIAR_UINT8, MPIAR_PROD}, {MPIAR_INT64, MPIAR_BXOR},
    {MPIAR_UINT64, MPIAR_SUM}, {MPIAR_INT8, MPIAR_MIN},   {MPIAR_UINT32, MPIAR_BOR},
};
#define NFLOAT (int)(sizeof float_pairs / sizeof float_pairs[0])
#define NINT (int)(sizeof int_pairs / sizeof int_pairs[0])

/* Segment sizes tried by a segmented builder (0: none), in elements. */
static size_t seg_choice(const mpiar__algorithm_t *alg, int i) {
  static const size_t segs[] = {0, 3, 1, 5, 16};
  return (alg->flags & MPIAR__ALG_SEGMENTED) ? segs[i % 5] : 0;
}

static void one_rank_count(const mpiar__algorithm_t *alg, int p, int *rot) {
  const size_t counts[] = {
      0, 1, (size_t)p - 1, (size_t)p, (size_t)p + 1, prime_above(3 * (size_t)p + 50)};
  for (int c = 0; c < 6; c++) {
    if (c == 2 && p == 1) {
      continue; /* p - 1 = 0 */
    }
    /* Up to 8 ranks every float pair runs, in place and not; above, fewer rotate. */
    const int nf = p <= 8 && !quick ? NFLOAT : (quick || p > 32 ? 1 : 2);
    for (int k = 0; k < nf; k++, (*rot)++) {
      const pair_t pr = float_pairs[(*rot) % NFLOAT];
      for (int ip = 0; ip < 2; ip++) {
        if (p > 8 && ip != (*rot + c) % 2) {
          continue;
        }
        job_t j = {alg,       p, counts[c], pr.dtype, pr.op, ip, seg_choice(alg, *rot + ip),
                   DATA_WIDE, 0};
        run(&j);
      }
    }
    const pair_t ipr = int_pairs[(*rot + c) % NINT];
    job_t j = {alg, p, counts[c], ipr.dtype, ipr.op, c % 2, seg_choice(alg, c), DATA_WIDE, 0};
    run(&j);
  }
}

static void matrix(const mpiar__algorithm_t *alg) {
  int rot = 0;
  for (int p = 1; p <= 64; p++) {
    if (quick && p > 16 && p % 8 != 1 && p != 64) {
      continue;
    }
    one_rank_count(alg, p, &rot);
    /* NaN payloads, infinities, subnormals, zeros: every float type, sum-like and min/max. */
    const mpiar_op_t ops[] = {MPIAR_SUM, MPIAR_MAX, MPIAR_AVG, MPIAR_MIN, MPIAR_PROD};
    const mpiar_dtype_t fl[] = {MPIAR_FLOAT32, MPIAR_FLOAT64, MPIAR_FLOAT16, MPIAR_BFLOAT16};
    for (int d = 0; d < 4; d++) {
      if (p > 32 && (d + p) % 2) {
        continue; /* two of the four types, alternating with p */
      }
      job_t j = {alg,
                 p,
                 2 * (size_t)p + 5,
                 fl[d],
                 ops[(p + d) % 5],
                 (p + d) % 2,
                 seg_choice(alg, p + d),
                 DATA_SPECIAL,
                 0};
      run(&j);
    }
    /* Fusion and pieces: a sub-range gives the bits of the same elements of the whole. */
    job_t f = {alg,
               p,
               3 * (size_t)p + 7,
               p % 2 ? MPIAR_FLOAT16 : MPIAR_FLOAT32,
               MPIAR_SUM,
               p % 3 == 0,
               seg_choice(alg, p + 1),
               DATA_WIDE,
               1 + (size_t)p % 5};
    run(&f);
    f.seg = seg_choice(alg, p + 2);
    f.dtype = MPIAR_BFLOAT16;
    f.mode = DATA_SPECIAL;
    run(&f);
  }
  /* Large vectors (real volume, the kernels' threaded path), segmented where the builder is. */
  const int big_p[] = {2, 3, 5, 8, 64};
  for (int i = 0; i < (quick ? 2 : 5); i++) {
    const size_t count = quick ? 20000 + 3 : big_p[i] <= 8 ? (size_t)(1 << 18) + 3 : 65536 + 3;
    job_t j = {alg, big_p[i], count, MPIAR_FLOAT32, MPIAR_SUM, i % 2, 0, DATA_WIDE, 0};
    run(&j);
    j.dtype = MPIAR_BFLOAT16;
    j.op = MPIAR_AVG;
    j.in_place = !j.in_place;
    j.seg = (alg->flags & MPIAR__ALG_SEGMENTED) ? 4096 + 7 : 0;
    j.off = 13;
    run(&j);
  }
  /*
   * 1000 ranks. An expensive builder (the direct reduce-scatter: two million messages per run,
   * seconds each) runs once, the others three times; not under sanitizers, where the smaller
   * rank counts run the same code.
   */
  const job_t k[] = {
      {alg, 1000, 2000, MPIAR_FLOAT16, MPIAR_AVG, 1, 0, DATA_SPECIAL, 0},
      {alg, 1000, 2503, MPIAR_FLOAT32, MPIAR_SUM, 0, seg_choice(alg, 2), DATA_WIDE, 0},
      {alg, 1000, 1500, MPIAR_FLOAT64, MPIAR_SUM, 0, 0, DATA_WIDE, 7},
  };
  /* Expensive at 1000 ranks: p-1 messages per rank, or an O(p log p) layout built per rank. */
  const int linear =
      (alg->flags & MPIAR__ALG_SEGMENTED) != 0 || alg->build == mpiar__build_repro_halving;
  const int optimal =
      alg->build == mpiar__build_repro_direct || alg->build == mpiar__build_repro_halving;
  for (int i = 0; i < (quick ? 0 : linear ? 1 : 3); i++) {
    const mpiar__sim_result_t r = run(&k[i]);
    /* Bytes sent per rank at 1000 ranks (1000 | count): 2 (p-1)/p n where the builder claims it. */
    const size_t n = k[i].count * mpiar_dtype_size(k[i].dtype), opt = 2 * 999 * (n / 1000);
    EXPECT(i > 0 || !optimal || (r.bytes_sent_max == opt && r.bytes_sent_total == 1000 * opt),
           "%s p=1000 sends %zu max, %zu total; optimum %zu per rank", alg->name, r.bytes_sent_max,
           r.bytes_sent_total, opt);
  }
}

/* Every registry algorithm and variant, replaced as the core replaces it, for every p. */
static void mapped(void) {
  const int nall = mpiar__algorithm_count + mpiar__algorithm_variant_count;
  for (int p = 1; p <= (quick ? 64 : 65); p++) {
    const int q = p == 65 ? 1000 : p;
    if ((quick && q > 12 && q % 7 != 0) || (q > 16 && q % 3 != 0 && q < 64)) {
      continue;
    }
    const mpiar__algorithm_t *done[64];
    int ndone = 0;
    for (int i = 0; i < nall; i++) {
      const mpiar__algorithm_t *a = i < mpiar__algorithm_count
                                        ? &mpiar__algorithms[i]
                                        : &mpiar__algorithm_variants[i - mpiar__algorithm_count];
      const mpiar__algorithm_t *f32 = mpiar__algorithm_reproducible(a, q, MPIAR_FLOAT32);
      EXPECT(f32 != NULL && mpiar__algorithm_reproducible(a, q, MPIAR_INT32) == a,
             "%s p=%d: mapping", a->name, q);
      /* Each replacement once per p; repro_direct at 1000 ranks is its own matrix's. */
      int seen = f32 == NULL || (q == 1000 && f32->build == mpiar__build_repro_direct);
      for (int k = 0; k < ndone && !seen; k++) {
        seen = done[k] == f32;
      }
      if (seen) {
        continue;
      }
      done[ndone++] = f32;
      job_t j = {f32,       q,     2 * (size_t)q + 3,  MPIAR_FLOAT32,
                 MPIAR_SUM, q % 2, seg_choice(f32, q), DATA_SPECIAL,
                 0};
      run(&j);
      j.dtype = MPIAR_FLOAT16;
      j.mode = DATA_WIDE;
      j.in_place = !j.in_place;
      j.off = 2;
      run(&j);
    }
  }
  /* The table itself. */
  const mpiar__algorithm_t *ring = mpiar__algorithm_find("ring");
  const mpiar__algorithm_t *rab = mpiar__algorithm_find("rabenseifner");
  const mpiar__algorithm_t *rd = mpiar__algorithm_find("recursive_doubling");
  const mpiar__algorithm_t *direct = mpiar__algorithm_find_any("repro_direct");
  const mpiar__algorithm_t *rrab = mpiar__algorithm_find_any("repro_rabenseifner");
  EXPECT(direct && rrab && mpiar__algorithm_find("repro_direct") == NULL,
         "reproducible builders are variants, not registry entries");
  EXPECT(mpiar__algorithm_reproducible(ring, 3, MPIAR_FLOAT32) == direct &&
             mpiar__algorithm_reproducible(ring, 2, MPIAR_FLOAT32) == ring &&
             mpiar__algorithm_reproducible(rab, 4, MPIAR_BFLOAT16) == rrab &&
             mpiar__algorithm_reproducible(rab, 2, MPIAR_FLOAT64) == rab &&
             mpiar__algorithm_reproducible(rd, 1000, MPIAR_FLOAT16) == rd &&
             mpiar__algorithm_reproducible(direct, 7, MPIAR_FLOAT16) == direct &&
             mpiar__algorithm_reproducible(NULL, 7, MPIAR_FLOAT16) == NULL,
         "replacement table");
  /* An algorithm the table does not know (e.g. a hierarchical one): by its flags. */
  const mpiar__algorithm_t seg_alg = {.name = "x",
                                      .build = mpiar__build_bcast_binomial,
                                      .flags = MPIAR__ALG_SEGMENTED,
                                      .summary = ""};
  const mpiar__algorithm_t plain_alg = {
      .name = "y", .build = mpiar__build_bcast_binomial, .summary = ""};
  EXPECT(mpiar__algorithm_reproducible(&seg_alg, 2, MPIAR_FLOAT32) == direct &&
             mpiar__algorithm_reproducible(&plain_alg, 8, MPIAR_FLOAT32) == rrab,
         "unknown algorithms");
}

/* ---- cost: bytes sent and closed forms ---- */

static const mpiar__cost_params_t model = {2e-6, 1e-10, 5e-11, 2e-6, 1e-10, 0, 0};

static mpiar__sim_result_t timing(const mpiar__algorithm_t *alg, int p, size_t count, size_t seg,
                                  int in_place) {
  mpiar__sim_config_t cfg = MPIAR__SIM_CONFIG_INIT;
  cfg.algorithm = alg;
  cfg.nranks = p;
  cfg.count = count;
  cfg.segment_elems = seg;
  cfg.in_place = in_place;
  cfg.data = 0;
  cfg.check_hazards = 0;
  cfg.cost = model;
  mpiar__sim_result_t res;
  int rc = mpiar__sim_run(&cfg, &res);
  EXPECT(rc == MPIAR_SUCCESS && res.ok, "%s p=%d count=%zu seg=%zu: %s", alg->name, p, count, seg,
         rc ? mpiar_last_error() : res.error);
  return res;
}

static void expect_closed_form(const mpiar__algorithm_t *alg, int p, size_t count, size_t seg,
                               int in_place) {
  const mpiar__sim_result_t r = timing(alg, p, count, seg, in_place);
  const double f = alg->cost(p, count * 4, 4, seg * 4, &model, NULL);
  EXPECT(fabs(r.time_s - f) <= 1e-9 * f,
         "%s p=%d count=%zu seg=%zu: sim %.12g s, closed form %.12g s", alg->name, p, count, seg,
         r.time_s, f);
}

static void cost(void) {
  const mpiar__algorithm_t *direct = mpiar__algorithm_find_any("repro_direct");
  const mpiar__algorithm_t *rrab = mpiar__algorithm_find_any("repro_rabenseifner");
  const mpiar__algorithm_t *halving = mpiar__algorithm_find_any("repro_halving");
  const mpiar__algorithm_t *ring = mpiar__algorithm_find("ring");
  const mpiar__algorithm_t *rab = mpiar__algorithm_find("rabenseifner");
  /*
   * Bandwidth optimality for every p: each rank sends exactly 2 (p-1)/p n bytes (p | count);
   * p = 1000 is checked by the builder's own matrix, on its data run.
   */
  for (int q = 1; q <= 64; q++) {
    const size_t count = (size_t)q * 8, n = count * 4, opt = 2 * (size_t)(q - 1) * (n / (size_t)q);
    const size_t seg = q % 3 == 0 ? 3 : 0;
    mpiar__sim_result_t r = timing(direct, q, count, seg, q % 2);
    EXPECT(r.bytes_sent_max == opt && r.bytes_sent_total == (size_t)q * opt &&
               r.messages_max == (q > 1 ? 2 * (size_t)(q - 1) * (seg ? 3 : 1) : 0),
           "repro_direct p=%d sends %zu max, %zu total, %zu messages max; optimum %zu per rank", q,
           r.bytes_sent_max, r.bytes_sent_total, r.messages_max, opt);
    /* The weighted halving: optimal bytes for every p, at most 3 ceil(log2 p) messages. */
    {
      mpiar__sim_result_t h = timing(halving, q, count, 0, q % 2);
      EXPECT(h.bytes_sent_max == opt && h.bytes_sent_total == (size_t)q * opt &&
                 h.messages_max <= 3 * (size_t)mpiar__log2i(q),
             "repro_halving p=%d sends %zu max, %zu total, %zu messages max; optimum %zu", q,
             h.bytes_sent_max, h.bytes_sent_total, h.messages_max, opt);
    }
    /* Rabenseifner's pattern, reordered: the same bytes (optimal for powers of two). */
    {
      mpiar__sim_result_t a = timing(rrab, q, count, 0, 0), b = timing(rab, q, count, 0, 0);
      EXPECT(a.bytes_sent_max == b.bytes_sent_max && a.messages == b.messages &&
                 ((q & (q - 1)) != 0 || a.bytes_sent_max == opt),
             "repro_rabenseifner p=%d: %zu bytes max, %zu messages; rabenseifner %zu, %zu", q,
             a.bytes_sent_max, a.messages, b.bytes_sent_max, b.messages);
    }
  }
  /* repro_direct: unsegmented closed form where d B gamma <= alpha + B beta (B = 2 KiB). */
  for (int p = 2; p <= 64; p += quick ? 5 : 1) {
    expect_closed_form(direct, p, (size_t)p * 512, 0, p % 2);
  }
  expect_closed_form(direct, 100, 100 * 512, 0, 0);
  expect_closed_form(direct, 127, 127 * 512, 0, 1);
  /* Segmented, d S gamma <= alpha + S beta: the segmented ring's port-bound time. */
  const int segp[] = {2, 3, 5, 8, 13, 33, 64};
  for (size_t i = 0; i < sizeof segp / sizeof segp[0]; i++) {
    const int p = segp[i];
    expect_closed_form(direct, p, (size_t)p * 2 * 256, 256, (int)i % 2);
    expect_closed_form(direct, p, (size_t)p * 3 * 1024, 1024, (int)(i + 1) % 2);
    expect_closed_form(direct, p, (size_t)p * 8 * 256, 256, 0);
  }
  /*
   * Against the ring it replaces: never slower unsegmented, nor segmented where
   * d S gamma <= alpha + S beta; outside that regime within 5% (header of repro_direct.c).
   */
  for (int p = 2; p <= 64; p += (p < 16 && !quick ? 1 : 7)) {
    const size_t counts[] = {2, (size_t)p * 1024, (size_t)p * 65536, (size_t)p * 65536 * 2};
    const size_t segs[] = {0, 0, 4096, 65536};
    for (int c = 0; c < 4; c++) {
      const double sb = (double)segs[c] * 4, d = mpiar__log2i(p);
      const double tol =
          segs[c] == 0 || d * sb * model.gamma <= model.alpha + sb * model.beta ? 1e-12 : 0.05;
      mpiar__sim_result_t a = timing(direct, p, counts[c], segs[c], 0);
      mpiar__sim_result_t b = timing(ring, p, counts[c], segs[c], 0);
      EXPECT(a.time_s <= b.time_s * (1 + tol) && a.messages <= b.messages,
             "p=%d count=%zu seg=%zu: repro_direct %.9g s, %zu messages; ring %.9g s, %zu", p,
             counts[c], segs[c], a.time_s, a.messages, b.time_s, b.messages);
    }
  }
  /* repro_rabenseifner: rabenseifner's closed form for powers of two. */
  for (int p = 2; p <= 1024; p *= 2) {
    expect_closed_form(rrab, p, (size_t)p * 16, 0, p % 4 == 0);
    expect_closed_form(rrab, p, (size_t)p * 4096, 0, p % 4 != 0);
  }
}

int main(int argc, char **argv) {
  if (argc < 2 || argc > 3 || (argc == 3 && strcmp(argv[2], "quick") != 0)) {
    fprintf(stderr, "usage: %s BUILDER|mapped|cost [quick]\n", argv[0]);
    return 2;
  }
  quick = argc == 3;
  if (strcmp(argv[1], "mapped") == 0) {
    mapped();
  } else if (strcmp(argv[1], "cost") == 0) {
    cost();
  } else {
    const mpiar__algorithm_t *alg = mpiar__algorithm_find_any(argv[1]);
    if (alg == NULL) {
      fprintf(stderr, "unknown algorithm %s\n", argv[1]);
      return 2;
    }
    matrix(alg);
  }
  printf("%s: %d runs, %d failures\n", argv[1], runs, failures);
  return failures ? 1 : 0;
}
