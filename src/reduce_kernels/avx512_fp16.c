/*
 * AVX512-FP16 kernels: f16 SUM and PROD computed natively in binary16. They equal the
 * reference route (exact conversion to f32, one f32 operation, rounding to f16) because f32 has
 * at least 2p+2 bits for p = 11, so the double rounding of a single addition or multiplication
 * is innocuous. AVG is not done here: (a + b) overflows f16 where f32 does not. The FP16
 * instructions ignore MXCSR's DAZ/FTZ, like the conversions of the reference route.
 * dispatch.c installs these only on CPUs with AVX512-FP16.
 */
#include "reduce_kernels/simd_loop.h"

/* Lanes where a is NaN get a with the f16 quiet bit, as in the reference (see avx512.c). */
static inline __m512i nanfix_ph(__m512h r, __m512h a) {
  __mmask32 k = _mm512_cmp_ph_mask(a, a, _CMP_UNORD_Q);
  __m512i qa = _mm512_or_si512(_mm512_castph_si512(a), _mm512_set1_epi16(0x0200));
  return _mm512_mask_mov_epi16(_mm512_castph_si512(r), k, qa);
}

static inline __m512i f16_sum_op(__m512i a, __m512i b, __m512i c) {
  (void)c;
  __m512h ha = _mm512_castsi512_ph(a);
  return nanfix_ph(_mm512_add_ph(ha, _mm512_castsi512_ph(b)), ha);
}

static inline __m512i f16_prod_op(__m512i a, __m512i b, __m512i c) {
  (void)c;
  __m512h ha = _mm512_castsi512_ph(a);
  return nanfix_ph(_mm512_mul_ph(ha, _mm512_castsi512_ph(b)), ha);
}

MPIAR__KERNEL512(f16_sum, 2, f16_sum_op)
MPIAR__KERNEL512(f16_prod, 2, f16_prod_op)

void mpiar__fill_avx512_fp16(mpiar__kernel_table_t *t) {
  t->fn[MPIAR_FLOAT16][MPIAR_SUM] = f16_sum;
  t->fn[MPIAR_FLOAT16][MPIAR_PROD] = f16_prod;
}
