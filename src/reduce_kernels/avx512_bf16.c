/*
 * AVX512-BF16 kernels: bf16 SUM, PROD, AVG and divide with the rounding back to bf16 done by
 * vcvtne2ps2bf16 (32 lanes in one instruction). That instruction rounds to nearest even and
 * quiets NaNs as the reference does, but treats subnormal f32 values as zero; since a normal
 * f32 never rounds to a subnormal bf16, only registers holding a subnormal result differ, and
 * those (rare) registers are rounded with integer operations instead.
 * dispatch.c installs these only on CPUs with AVX512-BF16.
 */
#include "base/common.h"
#include "reduce_kernels/simd_loop.h"

#define PS(x) _mm512_castsi512_ps(x)
#define SI(x) _mm512_castps_si512(x)

static inline __m512 nanfix_ps(__m512 r, __m512 a) {
  __mmask16 k = _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q);
  return PS(_mm512_mask_or_epi32(SI(r), k, SI(a), _mm512_set1_epi32(0x00400000)));
}
static inline __m512 sum_ps(__m512 a, __m512 b, __m512 c) {
  (void)c;
  return nanfix_ps(_mm512_add_ps(a, b), a);
}
static inline __m512 prod_ps(__m512 a, __m512 b, __m512 c) {
  (void)c;
  return nanfix_ps(_mm512_mul_ps(a, b), a);
}
static inline __m512 avg_ps(__m512 a, __m512 b, __m512 c) {
  (void)c;
  return nanfix_ps(_mm512_mul_ps(_mm512_add_ps(a, b), _mm512_set1_ps(0.5f)), a);
}
static inline __m512 div_ps(__m512 a, __m512 b, __m512 q) {
  (void)b;
  return nanfix_ps(_mm512_div_ps(a, q), a);
}

/* Integer round to nearest even of one f32 register into bf16 in the low half of each dword. */
static inline __m512i round_int(__m512 v) {
  __m512i x = SI(v);
  __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(1));
  __m512i r = _mm512_add_epi32(x, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff)));
  __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  r = _mm512_mask_or_epi32(r, nan, x, _mm512_set1_epi32(0x00400000));
  return _mm512_srli_epi32(r, 16);
}

/* Lanes with a zero exponent field and a non-zero mantissa: f32 subnormals. */
static inline __mmask16 subnormal(__m512 v) {
  __m512i x = SI(v);
  __mmask16 zero_exp = _mm512_testn_epi32_mask(x, _mm512_set1_epi32(0x7f800000));
  return _mm512_mask_test_epi32_mask(zero_exp, x, _mm512_set1_epi32(0x007fffff));
}

/*
 * Inputs are widened with cvtepu16 (lanes in order), so that vcvtne2ps2bf16's output, which
 * keeps lane order, needs no shuffle: the low 16 elements come from lo, the high 16 from hi.
 */
#define BF16_OP(NAME, FN)                                                                     \
  static inline __m512i NAME(__m512i a, __m512i b, __m512i c) {                               \
    __m512 alo = PS(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_castsi512_si256(a)), 16)); \
    __m512 ahi =                                                                              \
        PS(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(a, 1)), 16));    \
    __m512 blo = PS(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_castsi512_si256(b)), 16)); \
    __m512 bhi =                                                                              \
        PS(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(b, 1)), 16));    \
    __m512 rlo = FN(alo, blo, PS(c));                                                         \
    __m512 rhi = FN(ahi, bhi, PS(c));                                                         \
    if (MPIAR__UNLIKELY((subnormal(rlo) | subnormal(rhi)) != 0)) {                            \
      __m256i lo16 = _mm512_cvtepi32_epi16(round_int(rlo));                                   \
      __m256i hi16 = _mm512_cvtepi32_epi16(round_int(rhi));                                   \
      return _mm512_inserti64x4(_mm512_castsi256_si512(lo16), hi16, 1);                       \
    }                                                                                         \
    return (__m512i)_mm512_cvtne2ps_pbh(rhi, rlo);                                            \
  }
BF16_OP(bf16_sum_op, sum_ps)
BF16_OP(bf16_prod_op, prod_ps)
BF16_OP(bf16_avg_op, avg_ps)
BF16_OP(bf16_div_op, div_ps)

MPIAR__KERNEL512(bf16_sum, 2, bf16_sum_op)
MPIAR__KERNEL512(bf16_prod, 2, bf16_prod_op)
MPIAR__KERNEL512(bf16_avg, 2, bf16_avg_op)
MPIAR__RUN512(bf16_divrun, 2, bf16_div_op)

static void bf16_div(void *dst, const void *a, size_t n, double divisor) {
  bf16_divrun_run(dst, a, a, n * 2, SI(_mm512_set1_ps((float)divisor)));
}

void mpiar__fill_avx512_bf16(mpiar__kernel_table_t *t) {
  t->fn[MPIAR_BFLOAT16][MPIAR_SUM] = bf16_sum;
  t->fn[MPIAR_BFLOAT16][MPIAR_PROD] = bf16_prod;
  t->fn[MPIAR_BFLOAT16][MPIAR_AVG] = bf16_avg;
  t->div[MPIAR_BFLOAT16] = bf16_div;
}
