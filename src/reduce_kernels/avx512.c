/*
 * AVX-512 kernels (F/BW/VL/DQ). Compiled with AVX-512 flags; dispatch.c calls
 * mpiar__fill_avx512() only on CPUs and OSes that support them. Every kernel reproduces the
 * reference bits (see reference.c for the semantics); the comments say how.
 */
#include "reduce_kernels/simd_loop.h"

#define PS(x) _mm512_castsi512_ps(x)
#define PD(x) _mm512_castsi512_pd(x)
#define SI(x) _mm512_castps_si512(x)
#define SID(x) _mm512_castpd_si512(x)
#define RNE (_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)

/*
 * The reference NaN rule for arithmetic: a NaN in a wins (quieted). The hardware already
 * returns b's NaN quieted when only b is NaN, and the default NaN for invalid operations, but
 * when both are NaN it returns the first *instruction* operand's, and the compiler may swap the
 * operands of a commutative operation; so lanes where a is NaN are set explicitly.
 */
static inline __m512 nanfix_ps(__m512 r, __m512 a) {
  __mmask16 k = _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q);
  return PS(_mm512_mask_or_epi32(SI(r), k, SI(a), _mm512_set1_epi32(0x00400000)));
}

static inline __m512d nanfix_pd(__m512d r, __m512d a) {
  __mmask8 k = _mm512_cmp_pd_mask(a, a, _CMP_UNORD_Q);
  return PD(_mm512_mask_or_epi64(SID(r), k, SID(a), _mm512_set1_epi64(0x0008000000000000ll)));
}

/* f32 operations on values; ctx holds the divisor for div. */
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

static inline __m512d sum_pd(__m512d a, __m512d b, __m512d c) {
  (void)c;
  return nanfix_pd(_mm512_add_pd(a, b), a);
}
static inline __m512d prod_pd(__m512d a, __m512d b, __m512d c) {
  (void)c;
  return nanfix_pd(_mm512_mul_pd(a, b), a);
}
static inline __m512d avg_pd(__m512d a, __m512d b, __m512d c) {
  (void)c;
  return nanfix_pd(_mm512_mul_pd(_mm512_add_pd(a, b), _mm512_set1_pd(0.5)), a);
}
static inline __m512d div_pd(__m512d a, __m512d b, __m512d q) {
  (void)b;
  return nanfix_pd(_mm512_div_pd(a, q), a);
}

/* Raw-bit wrappers for the loop skeleton. */
#define F32_OP(NAME, FN)                                        \
  static inline __m512i NAME(__m512i a, __m512i b, __m512i c) { \
    return SI(FN(PS(a), PS(b), PS(c)));                         \
  }
#define F64_OP(NAME, FN)                                        \
  static inline __m512i NAME(__m512i a, __m512i b, __m512i c) { \
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

/*
 * f16 through f32: 32 halves become two f32 registers; the f32 operation (with its NaN rule)
 * runs on each, and vcvtps2ph rounds back to nearest even (it quiets a NaN and keeps the top of
 * its payload, as the reference conversion does).
 */
#define F16_OP(NAME, FN)                                            \
  static inline __m512i NAME(__m512i a, __m512i b, __m512i c) {     \
    __m512 alo = _mm512_cvtph_ps(_mm512_castsi512_si256(a));        \
    __m512 ahi = _mm512_cvtph_ps(_mm512_extracti64x4_epi64(a, 1));  \
    __m512 blo = _mm512_cvtph_ps(_mm512_castsi512_si256(b));        \
    __m512 bhi = _mm512_cvtph_ps(_mm512_extracti64x4_epi64(b, 1));  \
    __m256i rlo = _mm512_cvtps_ph(FN(alo, blo, PS(c)), RNE);        \
    __m256i rhi = _mm512_cvtps_ph(FN(ahi, bhi, PS(c)), RNE);        \
    return _mm512_inserti64x4(_mm512_castsi256_si512(rlo), rhi, 1); \
  }
F16_OP(f16_sum_op, sum_ps)
F16_OP(f16_prod_op, prod_ps)
F16_OP(f16_avg_op, avg_ps)
F16_OP(f16_div_op, div_ps)

/*
 * bf16 through f32: interleaving with zero words puts each bf16 in the top half of a dword,
 * which is its exact f32 value. The rounding back is done with integer operations (add
 * 0x7fff plus the lowest kept bit, then drop 16 bits), which rounds subnormals like any other
 * value; the hardware conversion flushes them. NaN lanes skip the rounding and get the quiet
 * bit. packus undoes the interleave within each 128-bit lane.
 */
static inline __m512i bf16_round(__m512 v) {
  __m512i x = SI(v);
  __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(1));
  __m512i r = _mm512_add_epi32(x, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff)));
  __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  r = _mm512_mask_or_epi32(r, nan, x, _mm512_set1_epi32(0x00400000));
  return _mm512_srli_epi32(r, 16);
}

#define BF16_OP(NAME, FN)                                                                         \
  static inline __m512i NAME(__m512i a, __m512i b, __m512i c) {                                   \
    __m512i z = _mm512_setzero_si512();                                                           \
    __m512 alo = PS(_mm512_unpacklo_epi16(z, a));                                                 \
    __m512 ahi = PS(_mm512_unpackhi_epi16(z, a));                                                 \
    __m512 blo = PS(_mm512_unpacklo_epi16(z, b));                                                 \
    __m512 bhi = PS(_mm512_unpackhi_epi16(z, b));                                                 \
    return _mm512_packus_epi32(bf16_round(FN(alo, blo, PS(c))), bf16_round(FN(ahi, bhi, PS(c)))); \
  }
BF16_OP(bf16_sum_op, sum_ps)
BF16_OP(bf16_prod_op, prod_ps)
BF16_OP(bf16_avg_op, avg_ps)
BF16_OP(bf16_div_op, div_ps)

/*
 * Floating min/max on bits. Flipping the magnitude bits of negative values turns the float
 * order into the signed integer order, with -0 (all ones) just below +0 (zero), so one integer
 * compare gives IEEE minimum/maximum for non-NaN values; equal keys mean equal bits. NaNs are
 * then placed explicitly: b's, then a's, which takes precedence.
 */
#define MINMAX_OP(NAME, W, MASK_T, SIGNMAX, INF, IS_MAX)                                    \
  static inline __m512i NAME(__m512i a, __m512i b, __m512i c) {                             \
    (void)c;                                                                                \
    __m512i ka = _mm512_xor_si512(a, _mm512_srli_epi##W(_mm512_srai_epi##W(a, W - 1), 1));  \
    __m512i kb = _mm512_xor_si512(b, _mm512_srli_epi##W(_mm512_srai_epi##W(b, W - 1), 1));  \
    MASK_T gt = _mm512_cmpgt_epi##W##_mask(ka, kb);                                         \
    __m512i r =                                                                             \
        (IS_MAX) ? _mm512_mask_blend_epi##W(gt, b, a) : _mm512_mask_blend_epi##W(gt, a, b); \
    __m512i mag = _mm512_set1_epi##W(SIGNMAX);                                              \
    __m512i inf = _mm512_set1_epi##W(INF);                                                  \
    MASK_T nb = _mm512_cmpgt_epi##W##_mask(_mm512_and_si512(b, mag), inf);                  \
    MASK_T na = _mm512_cmpgt_epi##W##_mask(_mm512_and_si512(a, mag), inf);                  \
    r = _mm512_mask_mov_epi##W(r, nb, b);                                                   \
    return _mm512_mask_mov_epi##W(r, na, a);                                                \
  }
MINMAX_OP(f16_min_op, 16, __mmask32, 0x7fff, 0x7c00, 0)
MINMAX_OP(f16_max_op, 16, __mmask32, 0x7fff, 0x7c00, 1)
MINMAX_OP(bf16_min_op, 16, __mmask32, 0x7fff, 0x7f80, 0)
MINMAX_OP(bf16_max_op, 16, __mmask32, 0x7fff, 0x7f80, 1)
MINMAX_OP(f32_min_op, 32, __mmask16, 0x7fffffff, 0x7f800000, 0)
MINMAX_OP(f32_max_op, 32, __mmask16, 0x7fffffff, 0x7f800000, 1)
MINMAX_OP(f64_min_op, 64, __mmask8, 0x7fffffffffffffffll, 0x7ff0000000000000ll, 0)
MINMAX_OP(f64_max_op, 64, __mmask8, 0x7fffffffffffffffll, 0x7ff0000000000000ll, 1)

/* Integer operations: two's complement addition and multiplication wrap like the reference. */
#define INT_OP(NAME, EXPR)                                      \
  static inline __m512i NAME(__m512i a, __m512i b, __m512i c) { \
    (void)c;                                                    \
    return EXPR;                                                \
  }
INT_OP(i8_sum_op, _mm512_add_epi8(a, b))
INT_OP(i32_sum_op, _mm512_add_epi32(a, b))
INT_OP(i64_sum_op, _mm512_add_epi64(a, b))
INT_OP(i32_prod_op, _mm512_mullo_epi32(a, b))
INT_OP(i64_prod_op, _mm512_mullo_epi64(a, b))
INT_OP(i8_min_op, _mm512_min_epi8(a, b))
INT_OP(i8_max_op, _mm512_max_epi8(a, b))
INT_OP(u8_min_op, _mm512_min_epu8(a, b))
INT_OP(u8_max_op, _mm512_max_epu8(a, b))
INT_OP(i32_min_op, _mm512_min_epi32(a, b))
INT_OP(i32_max_op, _mm512_max_epi32(a, b))
INT_OP(u32_min_op, _mm512_min_epu32(a, b))
INT_OP(u32_max_op, _mm512_max_epu32(a, b))
INT_OP(i64_min_op, _mm512_min_epi64(a, b))
INT_OP(i64_max_op, _mm512_max_epi64(a, b))
INT_OP(u64_min_op, _mm512_min_epu64(a, b))
INT_OP(u64_max_op, _mm512_max_epu64(a, b))
INT_OP(and_op, _mm512_and_si512(a, b))
INT_OP(or_op, _mm512_or_si512(a, b))
INT_OP(xor_op, _mm512_xor_si512(a, b))

#define FLOAT_KERNELS(P, ESIZE)                  \
  MPIAR__KERNEL512(P##_sum, ESIZE, P##_sum_op)   \
  MPIAR__KERNEL512(P##_prod, ESIZE, P##_prod_op) \
  MPIAR__KERNEL512(P##_avg, ESIZE, P##_avg_op)   \
  MPIAR__KERNEL512(P##_min, ESIZE, P##_min_op)   \
  MPIAR__KERNEL512(P##_max, ESIZE, P##_max_op)   \
  MPIAR__RUN512(P##_divrun, ESIZE, P##_div_op)
FLOAT_KERNELS(f16, 2)
FLOAT_KERNELS(bf16, 2)
FLOAT_KERNELS(f32, 4)
FLOAT_KERNELS(f64, 8)
/* Fan-out forms (the zero-copy allreduce's last step): the float32 and float64 arithmetic. */
#define FLOAT_FANS(P, ESIZE)                  \
  MPIAR__FAN512(P##_sum, ESIZE, P##_sum_op)   \
  MPIAR__FAN512(P##_prod, ESIZE, P##_prod_op) \
  MPIAR__FAN512(P##_avg, ESIZE, P##_avg_op)   \
  MPIAR__FAN512(P##_min, ESIZE, P##_min_op)   \
  MPIAR__FAN512(P##_max, ESIZE, P##_max_op)
FLOAT_FANS(f32, 4)
FLOAT_FANS(f64, 8)

/* The divide kernels reuse the two-input skeleton with b = a and the divisor as context. */
static void f32_div(void *dst, const void *a, size_t n, double divisor) {
  f32_divrun_run(dst, a, a, n * 4, SI(_mm512_set1_ps((float)divisor)));
}
static void f64_div(void *dst, const void *a, size_t n, double divisor) {
  f64_divrun_run(dst, a, a, n * 8, SID(_mm512_set1_pd(divisor)));
}
static void f16_div(void *dst, const void *a, size_t n, double divisor) {
  f16_divrun_run(dst, a, a, n * 2, SI(_mm512_set1_ps((float)divisor)));
}
static void bf16_div(void *dst, const void *a, size_t n, double divisor) {
  bf16_divrun_run(dst, a, a, n * 2, SI(_mm512_set1_ps((float)divisor)));
}

MPIAR__KERNEL512(i8_sum, 1, i8_sum_op)
MPIAR__KERNEL512(i32_sum, 4, i32_sum_op)
MPIAR__KERNEL512(i64_sum, 8, i64_sum_op)
MPIAR__FAN512(i32_sum, 4, i32_sum_op)
MPIAR__FAN512(i64_sum, 8, i64_sum_op)
MPIAR__KERNEL512(i32_prod, 4, i32_prod_op)
MPIAR__KERNEL512(i64_prod, 8, i64_prod_op)
MPIAR__KERNEL512(i8_min, 1, i8_min_op)
MPIAR__KERNEL512(i8_max, 1, i8_max_op)
MPIAR__KERNEL512(u8_min, 1, u8_min_op)
MPIAR__KERNEL512(u8_max, 1, u8_max_op)
MPIAR__KERNEL512(i32_min, 4, i32_min_op)
MPIAR__KERNEL512(i32_max, 4, i32_max_op)
MPIAR__KERNEL512(u32_min, 4, u32_min_op)
MPIAR__KERNEL512(u32_max, 4, u32_max_op)
MPIAR__KERNEL512(i64_min, 8, i64_min_op)
MPIAR__KERNEL512(i64_max, 8, i64_max_op)
MPIAR__KERNEL512(u64_min, 8, u64_min_op)
MPIAR__KERNEL512(u64_max, 8, u64_max_op)
/* Bitwise operations do not care about element boundaries; byte granularity serves all types. */
MPIAR__KERNEL512(any_band, 1, and_op)
MPIAR__KERNEL512(any_bor, 1, or_op)
MPIAR__KERNEL512(any_bxor, 1, xor_op)

/* Bitwise kernels take element counts; these scale them to bytes per type. */
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

void mpiar__fill_avx512(mpiar__kernel_table_t *t) {
  SET_FLOAT(t, MPIAR_FLOAT16, f16)
  SET_FLOAT(t, MPIAR_BFLOAT16, bf16)
  SET_FLOAT(t, MPIAR_FLOAT32, f32)
  SET_FLOAT(t, MPIAR_FLOAT64, f64)
  /* Wrapping addition and low-half multiplication give the same bits signed or unsigned. */
  t->fn[MPIAR_INT8][MPIAR_SUM] = i8_sum;
  t->fn[MPIAR_UINT8][MPIAR_SUM] = i8_sum;
  t->fn[MPIAR_INT32][MPIAR_SUM] = i32_sum;
  t->fn[MPIAR_UINT32][MPIAR_SUM] = i32_sum;
  t->fn[MPIAR_INT64][MPIAR_SUM] = i64_sum;
  t->fn[MPIAR_UINT64][MPIAR_SUM] = i64_sum;
  t->fn[MPIAR_INT32][MPIAR_PROD] = i32_prod;
  t->fn[MPIAR_UINT32][MPIAR_PROD] = i32_prod;
  t->fn[MPIAR_INT64][MPIAR_PROD] = i64_prod;
  t->fn[MPIAR_UINT64][MPIAR_PROD] = i64_prod;
  t->fn[MPIAR_INT8][MPIAR_MIN] = i8_min;
  t->fn[MPIAR_INT8][MPIAR_MAX] = i8_max;
  t->fn[MPIAR_UINT8][MPIAR_MIN] = u8_min;
  t->fn[MPIAR_UINT8][MPIAR_MAX] = u8_max;
  t->fn[MPIAR_INT32][MPIAR_MIN] = i32_min;
  t->fn[MPIAR_INT32][MPIAR_MAX] = i32_max;
  t->fn[MPIAR_UINT32][MPIAR_MIN] = u32_min;
  t->fn[MPIAR_UINT32][MPIAR_MAX] = u32_max;
  t->fn[MPIAR_INT64][MPIAR_MIN] = i64_min;
  t->fn[MPIAR_INT64][MPIAR_MAX] = i64_max;
  t->fn[MPIAR_UINT64][MPIAR_MIN] = u64_min;
  t->fn[MPIAR_UINT64][MPIAR_MAX] = u64_max;
  SET_BITWISE(t, MPIAR_INT8, 8)
  SET_BITWISE(t, MPIAR_UINT8, 8)
  SET_BITWISE(t, MPIAR_INT32, 32)
  SET_BITWISE(t, MPIAR_UINT32, 32)
  SET_BITWISE(t, MPIAR_INT64, 64)
  SET_BITWISE(t, MPIAR_UINT64, 64)
  static const mpiar_dtype_t fdt[] = {MPIAR_FLOAT32, MPIAR_FLOAT64};
  const mpiar__fan_fn fans[2][5] = {
      {f32_sum_fan, f32_prod_fan, f32_min_fan, f32_max_fan, f32_avg_fan},
      {f64_sum_fan, f64_prod_fan, f64_min_fan, f64_max_fan, f64_avg_fan}};
  static const mpiar_op_t fop[] = {MPIAR_SUM, MPIAR_PROD, MPIAR_MIN, MPIAR_MAX, MPIAR_AVG};
  for (int d = 0; d < 2; d++) {
    for (int o = 0; o < 5; o++) {
      t->fan[fdt[d]][fop[o]] = fans[d][o];
    }
  }
  t->fan[MPIAR_INT32][MPIAR_SUM] = i32_sum_fan;
  t->fan[MPIAR_UINT32][MPIAR_SUM] = i32_sum_fan;
  t->fan[MPIAR_INT64][MPIAR_SUM] = i64_sum_fan;
  t->fan[MPIAR_UINT64][MPIAR_SUM] = i64_sum_fan;
}
