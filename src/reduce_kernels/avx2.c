/*
 * AVX2 kernels (with FMA and F16C available; no FMA is used, since the reference rounds every
 * operation separately). dispatch.c calls mpiar__fill_avx2() only where the CPU and OS support
 * them. Every kernel reproduces the reference bits; see avx512.c for the reasoning, which is
 * the same here with blends in place of masks.
 */
#include "reduce_kernels/simd_loop.h"

#define PS(x) _mm256_castsi256_ps(x)
#define PD(x) _mm256_castsi256_pd(x)
#define SI(x) _mm256_castps_si256(x)
#define SID(x) _mm256_castpd_si256(x)
#define RNE (_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)

/* Lanes where a is NaN get a with the quiet bit (the hardware handles the other NaN cases). */
static inline __m256 nanfix_ps(__m256 r, __m256 a) {
  __m256 na = _mm256_cmp_ps(a, a, _CMP_UNORD_Q);
  __m256 qa = _mm256_or_ps(a, PS(_mm256_set1_epi32(0x00400000)));
  return _mm256_blendv_ps(r, qa, na);
}

static inline __m256d nanfix_pd(__m256d r, __m256d a) {
  __m256d na = _mm256_cmp_pd(a, a, _CMP_UNORD_Q);
  __m256d qa = _mm256_or_pd(a, PD(_mm256_set1_epi64x(0x0008000000000000ll)));
  return _mm256_blendv_pd(r, qa, na);
}

static inline __m256 sum_ps(__m256 a, __m256 b, __m256 c) {
  (void)c;
  return nanfix_ps(_mm256_add_ps(a, b), a);
}
static inline __m256 prod_ps(__m256 a, __m256 b, __m256 c) {
  (void)c;
  return nanfix_ps(_mm256_mul_ps(a, b), a);
}
static inline __m256 avg_ps(__m256 a, __m256 b, __m256 c) {
  (void)c;
  return nanfix_ps(_mm256_mul_ps(_mm256_add_ps(a, b), _mm256_set1_ps(0.5f)), a);
}
static inline __m256 div_ps(__m256 a, __m256 b, __m256 q) {
  (void)b;
  return nanfix_ps(_mm256_div_ps(a, q), a);
}
static inline __m256d sum_pd(__m256d a, __m256d b, __m256d c) {
  (void)c;
  return nanfix_pd(_mm256_add_pd(a, b), a);
}
static inline __m256d prod_pd(__m256d a, __m256d b, __m256d c) {
  (void)c;
  return nanfix_pd(_mm256_mul_pd(a, b), a);
}
static inline __m256d avg_pd(__m256d a, __m256d b, __m256d c) {
  (void)c;
  return nanfix_pd(_mm256_mul_pd(_mm256_add_pd(a, b), _mm256_set1_pd(0.5)), a);
}
static inline __m256d div_pd(__m256d a, __m256d b, __m256d q) {
  (void)b;
  return nanfix_pd(_mm256_div_pd(a, q), a);
}

#define F32_OP(NAME, FN)                                        \
  static inline __m256i NAME(__m256i a, __m256i b, __m256i c) { \
    return SI(FN(PS(a), PS(b), PS(c)));                         \
  }
#define F64_OP(NAME, FN)                                        \
  static inline __m256i NAME(__m256i a, __m256i b, __m256i c) { \
    return SID(FN(PD(a), PD(b), PD(c)));                        \
  }
F32_OP(f32_sum_op, sum_ps)
F32_OP(f32_prod_op, prod_ps)
F32_OP(f32_avg_op, avg_ps)
F32_OP(f32_div_op, div_ps)
F64_OP(f64_sum_op, sum_pd)
F64_OP(f64_prod_op, prod_pd)
F64_OP(f64_avg_op, avg_pd)
F64_OP(f64_div_op, div_pd)

/* f16 through f32 with F16C: 16 halves become two f32 registers and are rounded back (RNE). */
#define F16_OP(NAME, FN)                                                 \
  static inline __m256i NAME(__m256i a, __m256i b, __m256i c) {          \
    __m256 alo = _mm256_cvtph_ps(_mm256_castsi256_si128(a));             \
    __m256 ahi = _mm256_cvtph_ps(_mm256_extracti128_si256(a, 1));        \
    __m256 blo = _mm256_cvtph_ps(_mm256_castsi256_si128(b));             \
    __m256 bhi = _mm256_cvtph_ps(_mm256_extracti128_si256(b, 1));        \
    __m128i rlo = _mm256_cvtps_ph(FN(alo, blo, PS(c)), RNE);             \
    __m128i rhi = _mm256_cvtps_ph(FN(ahi, bhi, PS(c)), RNE);             \
    return _mm256_inserti128_si256(_mm256_castsi128_si256(rlo), rhi, 1); \
  }
F16_OP(f16_sum_op, sum_ps)
F16_OP(f16_prod_op, prod_ps)
F16_OP(f16_avg_op, avg_ps)
F16_OP(f16_div_op, div_ps)

/* bf16 through f32, rounded to nearest even with integer operations (subnormals included). */
static inline __m256i bf16_round(__m256 v) {
  __m256i x = SI(v);
  __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(1));
  __m256i r = _mm256_add_epi32(x, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff)));
  __m256i nan = SI(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
  __m256i qx = _mm256_or_si256(x, _mm256_set1_epi32(0x00400000));
  r = _mm256_blendv_epi8(r, qx, nan);
  return _mm256_srli_epi32(r, 16);
}

#define BF16_OP(NAME, FN)                                                                         \
  static inline __m256i NAME(__m256i a, __m256i b, __m256i c) {                                   \
    __m256i z = _mm256_setzero_si256();                                                           \
    __m256 alo = PS(_mm256_unpacklo_epi16(z, a));                                                 \
    __m256 ahi = PS(_mm256_unpackhi_epi16(z, a));                                                 \
    __m256 blo = PS(_mm256_unpacklo_epi16(z, b));                                                 \
    __m256 bhi = PS(_mm256_unpackhi_epi16(z, b));                                                 \
    return _mm256_packus_epi32(bf16_round(FN(alo, blo, PS(c))), bf16_round(FN(ahi, bhi, PS(c)))); \
  }
BF16_OP(bf16_sum_op, sum_ps)
BF16_OP(bf16_prod_op, prod_ps)
BF16_OP(bf16_avg_op, avg_ps)
BF16_OP(bf16_div_op, div_ps)

/*
 * Floating min/max on order-preserving integer keys (see avx512.c). AVX2 lacks a 64-bit
 * arithmetic shift, so the sign mask of 64-bit lanes comes from a compare with zero.
 */
static inline __m256i key16(__m256i x) {
  return _mm256_xor_si256(x, _mm256_srli_epi16(_mm256_srai_epi16(x, 15), 1));
}
static inline __m256i key32(__m256i x) {
  return _mm256_xor_si256(x, _mm256_srli_epi32(_mm256_srai_epi32(x, 31), 1));
}
static inline __m256i key64(__m256i x) {
  __m256i neg = _mm256_cmpgt_epi64(_mm256_setzero_si256(), x);
  return _mm256_xor_si256(x, _mm256_srli_epi64(neg, 1));
}

#define MINMAX_OP(NAME, W, KEY, SET1, SIGNMAX, INF, IS_MAX)                             \
  static inline __m256i NAME(__m256i a, __m256i b, __m256i c) {                         \
    (void)c;                                                                            \
    __m256i gt = _mm256_cmpgt_epi##W(KEY(a), KEY(b));                                   \
    __m256i r = (IS_MAX) ? _mm256_blendv_epi8(b, a, gt) : _mm256_blendv_epi8(a, b, gt); \
    __m256i mag = SET1(SIGNMAX);                                                        \
    __m256i inf = SET1(INF);                                                            \
    __m256i nb = _mm256_cmpgt_epi##W(_mm256_and_si256(b, mag), inf);                    \
    __m256i na = _mm256_cmpgt_epi##W(_mm256_and_si256(a, mag), inf);                    \
    r = _mm256_blendv_epi8(r, b, nb);                                                   \
    return _mm256_blendv_epi8(r, a, na);                                                \
  }
MINMAX_OP(f16_min_op, 16, key16, _mm256_set1_epi16, 0x7fff, 0x7c00, 0)
MINMAX_OP(f16_max_op, 16, key16, _mm256_set1_epi16, 0x7fff, 0x7c00, 1)
MINMAX_OP(bf16_min_op, 16, key16, _mm256_set1_epi16, 0x7fff, 0x7f80, 0)
MINMAX_OP(bf16_max_op, 16, key16, _mm256_set1_epi16, 0x7fff, 0x7f80, 1)
MINMAX_OP(f32_min_op, 32, key32, _mm256_set1_epi32, 0x7fffffff, 0x7f800000, 0)
MINMAX_OP(f32_max_op, 32, key32, _mm256_set1_epi32, 0x7fffffff, 0x7f800000, 1)
MINMAX_OP(f64_min_op, 64, key64, _mm256_set1_epi64x, 0x7fffffffffffffffll, 0x7ff0000000000000ll, 0)
MINMAX_OP(f64_max_op, 64, key64, _mm256_set1_epi64x, 0x7fffffffffffffffll, 0x7ff0000000000000ll, 1)

#define INT_OP(NAME, EXPR)                                      \
  static inline __m256i NAME(__m256i a, __m256i b, __m256i c) { \
    (void)c;                                                    \
    return EXPR;                                                \
  }
INT_OP(i8_sum_op, _mm256_add_epi8(a, b))
INT_OP(i32_sum_op, _mm256_add_epi32(a, b))
INT_OP(i64_sum_op, _mm256_add_epi64(a, b))
INT_OP(i32_prod_op, _mm256_mullo_epi32(a, b))
INT_OP(i8_min_op, _mm256_min_epi8(a, b))
INT_OP(i8_max_op, _mm256_max_epi8(a, b))
INT_OP(u8_min_op, _mm256_min_epu8(a, b))
INT_OP(u8_max_op, _mm256_max_epu8(a, b))
INT_OP(i32_min_op, _mm256_min_epi32(a, b))
INT_OP(i32_max_op, _mm256_max_epi32(a, b))
INT_OP(u32_min_op, _mm256_min_epu32(a, b))
INT_OP(u32_max_op, _mm256_max_epu32(a, b))
INT_OP(and_op, _mm256_and_si256(a, b))
INT_OP(or_op, _mm256_or_si256(a, b))
INT_OP(xor_op, _mm256_xor_si256(a, b))

#define FLOAT_KERNELS(P, ESIZE)                  \
  MPIAR__KERNEL256(P##_sum, ESIZE, P##_sum_op)   \
  MPIAR__KERNEL256(P##_prod, ESIZE, P##_prod_op) \
  MPIAR__KERNEL256(P##_avg, ESIZE, P##_avg_op)   \
  MPIAR__KERNEL256(P##_min, ESIZE, P##_min_op)   \
  MPIAR__KERNEL256(P##_max, ESIZE, P##_max_op)   \
  MPIAR__RUN256(P##_divrun, ESIZE, P##_div_op)
FLOAT_KERNELS(f16, 2)
FLOAT_KERNELS(bf16, 2)
FLOAT_KERNELS(f32, 4)
FLOAT_KERNELS(f64, 8)

static void f32_div(void *dst, const void *a, size_t n, double divisor) {
  f32_divrun_run(dst, a, a, n * 4, SI(_mm256_set1_ps((float)divisor)));
}
static void f64_div(void *dst, const void *a, size_t n, double divisor) {
  f64_divrun_run(dst, a, a, n * 8, SID(_mm256_set1_pd(divisor)));
}
static void f16_div(void *dst, const void *a, size_t n, double divisor) {
  f16_divrun_run(dst, a, a, n * 2, SI(_mm256_set1_ps((float)divisor)));
}
static void bf16_div(void *dst, const void *a, size_t n, double divisor) {
  bf16_divrun_run(dst, a, a, n * 2, SI(_mm256_set1_ps((float)divisor)));
}

MPIAR__KERNEL256(i8_sum, 1, i8_sum_op)
MPIAR__KERNEL256(i32_sum, 4, i32_sum_op)
MPIAR__KERNEL256(i64_sum, 8, i64_sum_op)
MPIAR__KERNEL256(i32_prod, 4, i32_prod_op)
MPIAR__KERNEL256(i8_min, 1, i8_min_op)
MPIAR__KERNEL256(i8_max, 1, i8_max_op)
MPIAR__KERNEL256(u8_min, 1, u8_min_op)
MPIAR__KERNEL256(u8_max, 1, u8_max_op)
MPIAR__KERNEL256(i32_min, 4, i32_min_op)
MPIAR__KERNEL256(i32_max, 4, i32_max_op)
MPIAR__KERNEL256(u32_min, 4, u32_min_op)
MPIAR__KERNEL256(u32_max, 4, u32_max_op)
MPIAR__KERNEL256(any_band, 1, and_op)
MPIAR__KERNEL256(any_bor, 1, or_op)
MPIAR__KERNEL256(any_bxor, 1, xor_op)

#define BITWISE(W, ESIZE)                                                \
  static void band##W(void *d, const void *a, const void *b, size_t n) { \
    any_band(d, a, b, n *(ESIZE));                                       \
  }                                                                      \
  static void bor##W(void *d, const void *a, const void *b, size_t n) {  \
    any_bor(d, a, b, n *(ESIZE));                                        \
  }                                                                      \
  static void bxor##W(void *d, const void *a, const void *b, size_t n) { \
    any_bxor(d, a, b, n *(ESIZE));                                       \
  }
BITWISE(8, 1)
BITWISE(32, 4)
BITWISE(64, 8)

#define SET_FLOAT(T, DT, P)         \
  T->fn[DT][MPIAR_SUM] = P##_sum;   \
  T->fn[DT][MPIAR_PROD] = P##_prod; \
  T->fn[DT][MPIAR_MIN] = P##_min;   \
  T->fn[DT][MPIAR_MAX] = P##_max;   \
  T->fn[DT][MPIAR_AVG] = P##_avg;   \
  T->div[DT] = P##_div;

#define SET_BITWISE(T, DT, W)      \
  T->fn[DT][MPIAR_BAND] = band##W; \
  T->fn[DT][MPIAR_BOR] = bor##W;   \
  T->fn[DT][MPIAR_BXOR] = bxor##W;

void mpiar__fill_avx2(mpiar__kernel_table_t *t) {
  SET_FLOAT(t, MPIAR_FLOAT16, f16)
  SET_FLOAT(t, MPIAR_BFLOAT16, bf16)
  SET_FLOAT(t, MPIAR_FLOAT32, f32)
  SET_FLOAT(t, MPIAR_FLOAT64, f64)
  t->fn[MPIAR_INT8][MPIAR_SUM] = i8_sum;
  t->fn[MPIAR_UINT8][MPIAR_SUM] = i8_sum;
  t->fn[MPIAR_INT32][MPIAR_SUM] = i32_sum;
  t->fn[MPIAR_UINT32][MPIAR_SUM] = i32_sum;
  t->fn[MPIAR_INT64][MPIAR_SUM] = i64_sum;
  t->fn[MPIAR_UINT64][MPIAR_SUM] = i64_sum;
  t->fn[MPIAR_INT32][MPIAR_PROD] = i32_prod;
  t->fn[MPIAR_UINT32][MPIAR_PROD] = i32_prod;
  t->fn[MPIAR_INT8][MPIAR_MIN] = i8_min;
  t->fn[MPIAR_INT8][MPIAR_MAX] = i8_max;
  t->fn[MPIAR_UINT8][MPIAR_MIN] = u8_min;
  t->fn[MPIAR_UINT8][MPIAR_MAX] = u8_max;
  t->fn[MPIAR_INT32][MPIAR_MIN] = i32_min;
  t->fn[MPIAR_INT32][MPIAR_MAX] = i32_max;
  t->fn[MPIAR_UINT32][MPIAR_MIN] = u32_min;
  t->fn[MPIAR_UINT32][MPIAR_MAX] = u32_max;
  SET_BITWISE(t, MPIAR_INT8, 8)
  SET_BITWISE(t, MPIAR_UINT8, 8)
  SET_BITWISE(t, MPIAR_INT32, 32)
  SET_BITWISE(t, MPIAR_UINT32, 32)
  SET_BITWISE(t, MPIAR_INT64, 64)
  SET_BITWISE(t, MPIAR_UINT64, 64)
}
