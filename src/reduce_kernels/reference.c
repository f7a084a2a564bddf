/*
 * Reference kernels: portable scalar C for every (dtype, op) pair. They define the result bits;
 * every optimized kernel must reproduce them exactly.
 *
 * Semantics:
 * - Integers: SUM and PROD wrap modulo 2^bits (computed in unsigned arithmetic, so signed
 *   overflow never happens); MIN/MAX compare as signed or unsigned according to the type.
 * - Floating SUM, PROD, AVG and divide: if a is NaN the result is a with its quiet bit set,
 *   else if b is NaN it is b with its quiet bit set; an invalid operation on non-NaN operands
 *   (inf - inf, 0 * inf) gives the CPU's default NaN. AVG is (a + b) * 0.5.
 * - Floating MIN/MAX (IEEE 754-2019 minimum/maximum): if a is NaN the result is a, else if b is
 *   NaN it is b, bits unchanged (not quieted: the operation selects, it does not compute);
 *   otherwise the smaller/larger value, with -0 < +0.
 * - f16/bf16: converted exactly to f32, computed in f32, rounded back to nearest, ties to even
 *   (subnormals kept, overflow to infinity). A NaN converts with its payload, so the NaN rules
 *   above hold in the 16-bit type with its own quiet bit (0x0200 for f16, 0x0040 for bf16).
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "reduce_kernels/isa.h"

/* ---- bit helpers ---- */

static inline uint32_t f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static inline float f32_from(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

static inline uint64_t f64_bits(double d) {
  uint64_t u;
  memcpy(&u, &d, sizeof u);
  return u;
}

static inline double f64_from(uint64_t u) {
  double d;
  memcpy(&d, &u, sizeof d);
  return d;
}

/* ---- f16 / bf16 conversions ---- */

float mpiar__f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t e = (h >> 10) & 0x1fu;
  uint32_t m = h & 0x3ffu;
  if (e == 0x1f) {
    /* Infinity, or NaN with its payload moved to the top of the f32 mantissa. */
    return f32_from(sign | 0x7f800000u | (m << 13));
  }
  if (e == 0) {
    /* Zero or subnormal: m * 2^-24 is exact in f32. */
    float v = (float)m * 0x1p-24f;
    return f32_from(sign | f32_bits(v));
  }
  return f32_from(sign | ((e + 112u) << 23) | (m << 13));
}

uint16_t mpiar__f32_to_f16(float f) {
  uint32_t x = f32_bits(f);
  uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
  uint32_t ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) {
    /* NaN: keep the top of the payload and set the quiet bit. */
    return (uint16_t)(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
  }
  if (ax >= 0x477ff000u) {
    /* At or above 65520 (halfway from 65504 up, 65504 being odd): rounds to infinity. */
    return (uint16_t)(sign | 0x7c00u);
  }
  if (ax < 0x38800000u) {
    /* Below the smallest normal f16 (2^-14): the result is subnormal or zero. */
    if (ax <= 0x33000000u) {
      /* At most 2^-25, half of the smallest subnormal: rounds to zero (a tie goes to even 0). */
      return sign;
    }
    uint32_t e = ax >> 23;
    uint32_t mant = (ax & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126u - e; /* value * 2^24 = mant >> shift; here 14 <= shift <= 24 */
    uint32_t r = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1u);
    uint32_t half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (r & 1u))) {
      r++;
    }
    return (uint16_t)(sign | r);
  }
  /* Normal: rebias the exponent; a carry out of the mantissa correctly bumps the exponent. */
  uint32_t r = (ax >> 13) - (112u << 10);
  uint32_t rem = ax & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) {
    r++;
  }
  return (uint16_t)(sign | r);
}

float mpiar__bf16_to_f32(uint16_t h) {
  return f32_from((uint32_t)h << 16);
}

uint16_t mpiar__f32_to_bf16(float f) {
  uint32_t x = f32_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) {
    return (uint16_t)((x >> 16) | 0x0040u);
  }
  /* Round to nearest even on the low 16 bits; subnormals are rounded like any other value. */
  x += 0x7fffu + ((x >> 16) & 1u);
  return (uint16_t)(x >> 16);
}

/* ---- floating helpers ---- */

/* The NaN rule of the arithmetic operations: a's NaN, else b's NaN, quieted; else r. */
static inline float nan_fix32(float r, float a, float b) {
  if (isnan(a)) {
    return f32_from(f32_bits(a) | 0x00400000u);
  }
  if (isnan(b)) {
    return f32_from(f32_bits(b) | 0x00400000u);
  }
  return r;
}

static inline double nan_fix64(double r, double a, double b) {
  if (isnan(a)) {
    return f64_from(f64_bits(a) | 0x0008000000000000ull);
  }
  if (isnan(b)) {
    return f64_from(f64_bits(b) | 0x0008000000000000ull);
  }
  return r;
}

static inline float sum32(float a, float b) {
  return nan_fix32(a + b, a, b);
}
static inline float prod32(float a, float b) {
  return nan_fix32(a * b, a, b);
}
static inline float avg32(float a, float b) {
  return nan_fix32((a + b) * 0.5f, a, b);
}
static inline double sum64(double a, double b) {
  return nan_fix64(a + b, a, b);
}
static inline double prod64(double a, double b) {
  return nan_fix64(a * b, a, b);
}
static inline double avg64(double a, double b) {
  return nan_fix64((a + b) * 0.5, a, b);
}

/*
 * IEEE 754-2019 minimum/maximum on bit patterns, given the values as doubles (exact for every
 * type here) and a NaN test: the result is always one of the two bit patterns.
 */
#define MINMAX_BITS(UT, NAME, CMP, JOIN)                                          \
  static inline UT NAME(UT ab, UT bb, double av, double bv) {                     \
    if (isnan(av)) {                                                              \
      return ab;                                                                  \
    }                                                                             \
    if (isnan(bv)) {                                                              \
      return bb;                                                                  \
    }                                                                             \
    if (av == bv) {                                                               \
      /* Equal values differ in bits only for +0 and -0; the sign bit decides. */ \
      return (UT)(ab JOIN bb);                                                    \
    }                                                                             \
    return (av CMP bv) ? ab : bb;                                                 \
  }
MINMAX_BITS(uint16_t, min_bits16, <, |)
MINMAX_BITS(uint16_t, max_bits16, >, &)
MINMAX_BITS(uint32_t, min_bits32, <, |)
MINMAX_BITS(uint32_t, max_bits32, >, &)
MINMAX_BITS(uint64_t, min_bits64, <, |)
MINMAX_BITS(uint64_t, max_bits64, >, &)

/* ---- kernel generators ---- */

/* A kernel applying EXPR (in terms of x and y, of type T) elementwise. */
#define ELEMENTWISE(NAME, T, EXPR)                                      \
  static void NAME(void *dst, const void *a, const void *b, size_t n) { \
    T *d = dst;                                                         \
    const T *pa = a;                                                    \
    const T *pb = b;                                                    \
    for (size_t i = 0; i < n; i++) {                                    \
      T x = pa[i];                                                      \
      T y = pb[i];                                                      \
      d[i] = (EXPR);                                                    \
    }                                                                   \
  }

/* Integer kernels; U is the unsigned type of the same width, used for wrapping arithmetic. */
#define INT_KERNELS(P, T, U)                    \
  ELEMENTWISE(P##_sum, T, (T)(U)((U)x + (U)y))  \
  ELEMENTWISE(P##_prod, T, (T)(U)((U)x * (U)y)) \
  ELEMENTWISE(P##_min, T, (x < y) ? x : y)      \
  ELEMENTWISE(P##_max, T, (x > y) ? x : y)      \
  ELEMENTWISE(P##_band, T, (T)(x & y))          \
  ELEMENTWISE(P##_bor, T, (T)(x | y))           \
  ELEMENTWISE(P##_bxor, T, (T)(x ^ y))

INT_KERNELS(i8, int8_t, uint8_t)
INT_KERNELS(u8, uint8_t, uint8_t)
INT_KERNELS(i32, int32_t, uint32_t)
INT_KERNELS(u32, uint32_t, uint32_t)
INT_KERNELS(i64, int64_t, uint64_t)
INT_KERNELS(u64, uint64_t, uint64_t)

ELEMENTWISE(f32_sum, float, sum32(x, y))
ELEMENTWISE(f32_prod, float, prod32(x, y))
ELEMENTWISE(f32_avg, float, avg32(x, y))
ELEMENTWISE(f32_min, float, f32_from(min_bits32(f32_bits(x), f32_bits(y), x, y)))
ELEMENTWISE(f32_max, float, f32_from(max_bits32(f32_bits(x), f32_bits(y), x, y)))

ELEMENTWISE(f64_sum, double, sum64(x, y))
ELEMENTWISE(f64_prod, double, prod64(x, y))
ELEMENTWISE(f64_avg, double, avg64(x, y))
ELEMENTWISE(f64_min, double, f64_from(min_bits64(f64_bits(x), f64_bits(y), x, y)))
ELEMENTWISE(f64_max, double, f64_from(max_bits64(f64_bits(x), f64_bits(y), x, y)))

/* 16-bit floating kernels: through f32 with one rounding at the end. */
#define HALF_KERNELS(P, TO32, FROM32)                                       \
  ELEMENTWISE(P##_sum, uint16_t, FROM32(sum32(TO32(x), TO32(y))))           \
  ELEMENTWISE(P##_prod, uint16_t, FROM32(prod32(TO32(x), TO32(y))))         \
  ELEMENTWISE(P##_avg, uint16_t, FROM32(avg32(TO32(x), TO32(y))))           \
  ELEMENTWISE(P##_min, uint16_t, min_bits16(x, y, TO32(x), TO32(y)))        \
  ELEMENTWISE(P##_max, uint16_t, max_bits16(x, y, TO32(x), TO32(y)))        \
  static void P##_div(void *dst, const void *a, size_t n, double divisor) { \
    uint16_t *d = dst;                                                      \
    const uint16_t *pa = a;                                                 \
    float q = (float)divisor;                                               \
    for (size_t i = 0; i < n; i++) {                                        \
      float x = TO32(pa[i]);                                                \
      d[i] = FROM32(nan_fix32(x / q, x, x));                                \
    }                                                                       \
  }

HALF_KERNELS(f16, mpiar__f16_to_f32, mpiar__f32_to_f16)
HALF_KERNELS(bf16, mpiar__bf16_to_f32, mpiar__f32_to_bf16)

static void f32_div(void *dst, const void *a, size_t n, double divisor) {
  float *d = dst;
  const float *pa = a;
  float q = (float)divisor;
  for (size_t i = 0; i < n; i++) {
    d[i] = nan_fix32(pa[i] / q, pa[i], pa[i]);
  }
}

static void f64_div(void *dst, const void *a, size_t n, double divisor) {
  double *d = dst;
  const double *pa = a;
  for (size_t i = 0; i < n; i++) {
    d[i] = nan_fix64(pa[i] / divisor, pa[i], pa[i]);
  }
}

#define SET_INT(T, DT, P)           \
  T->fn[DT][MPIAR_SUM] = P##_sum;   \
  T->fn[DT][MPIAR_PROD] = P##_prod; \
  T->fn[DT][MPIAR_MIN] = P##_min;   \
  T->fn[DT][MPIAR_MAX] = P##_max;   \
  T->fn[DT][MPIAR_BAND] = P##_band; \
  T->fn[DT][MPIAR_BOR] = P##_bor;   \
  T->fn[DT][MPIAR_BXOR] = P##_bxor;

#define SET_FLOAT(T, DT, P)         \
  T->fn[DT][MPIAR_SUM] = P##_sum;   \
  T->fn[DT][MPIAR_PROD] = P##_prod; \
  T->fn[DT][MPIAR_MIN] = P##_min;   \
  T->fn[DT][MPIAR_MAX] = P##_max;   \
  T->fn[DT][MPIAR_AVG] = P##_avg;   \
  T->div[DT] = P##_div;

void mpiar__fill_reference(mpiar__kernel_table_t *t) {
  memset(t->fn, 0, sizeof t->fn);
  memset(t->div, 0, sizeof t->div);
  SET_INT(t, MPIAR_INT8, i8)
  SET_INT(t, MPIAR_UINT8, u8)
  SET_INT(t, MPIAR_INT32, i32)
  SET_INT(t, MPIAR_UINT32, u32)
  SET_INT(t, MPIAR_INT64, i64)
  SET_INT(t, MPIAR_UINT64, u64)
  SET_FLOAT(t, MPIAR_FLOAT16, f16)
  SET_FLOAT(t, MPIAR_BFLOAT16, bf16)
  SET_FLOAT(t, MPIAR_FLOAT32, f32)
  SET_FLOAT(t, MPIAR_FLOAT64, f64)
}
