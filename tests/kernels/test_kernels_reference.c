/*
 * The reference kernels against values computed by hand: integer wrapping, IEEE minimum and
 * maximum with signed zeros and NaNs, NaN propagation with payloads, and f16/bf16 rounding ties,
 * subnormals and overflow, with known bit patterns.
 */
#include "kernel_test_util.h"

static mpiar__kernel_table_t ref;

/* Run one reference kernel on single elements given as bit patterns; return the result bits. */
static uint64_t op1(mpiar_dtype_t dt, mpiar_op_t op, uint64_t a, uint64_t b) {
  uint64_t d = 0xdeadbeefdeadbeefull;
  size_t es = mpiar_dtype_size(dt);
  unsigned char da[8], db[8], dd[8];
  memcpy(da, &a, es);
  memcpy(db, &b, es);
  ref.fn[dt][op](dd, da, db, 1);
  d = 0;
  memcpy(&d, dd, es);
  return d;
}

static uint64_t div1(mpiar_dtype_t dt, uint64_t a, double q) {
  uint64_t d = 0;
  ref.div[dt](&d, &a, 1, q);
  return d;
}

static uint32_t fbits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

static float bitsf(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

int main(void) {
  CHECK(mpiar__kernel_table_fill(MPIAR__ISA_REFERENCE, &ref) == MPIAR_SUCCESS);
  CHECK(ref.isa == MPIAR__ISA_REFERENCE);

  /* Integers wrap modulo 2^bits; signed MIN/MAX compare signed, unsigned ones unsigned. */
  CHECK_EQ_HEX(op1(MPIAR_INT8, MPIAR_SUM, 127, 1), 0x80);
  CHECK_EQ_HEX(op1(MPIAR_INT8, MPIAR_PROD, 16, 16), 0x00);
  CHECK_EQ_HEX(op1(MPIAR_INT8, MPIAR_PROD, 0x80, 0xff), 0x80); /* -128 * -1 = -128 */
  CHECK_EQ_HEX(op1(MPIAR_INT8, MPIAR_MIN, 0xff, 0x01), 0xff);
  CHECK_EQ_HEX(op1(MPIAR_UINT8, MPIAR_MIN, 0xff, 0x01), 0x01);
  CHECK_EQ_HEX(op1(MPIAR_UINT8, MPIAR_SUM, 200, 100), 44);
  CHECK_EQ_HEX(op1(MPIAR_INT32, MPIAR_SUM, 0x7fffffff, 1), 0x80000000);
  CHECK_EQ_HEX(op1(MPIAR_INT32, MPIAR_MAX, 0x80000000, 0x7fffffff), 0x7fffffff);
  CHECK_EQ_HEX(op1(MPIAR_UINT32, MPIAR_MAX, 0x80000000, 0x7fffffff), 0x80000000);
  CHECK_EQ_HEX(op1(MPIAR_INT64, MPIAR_PROD, 0x100000000ull, 0x100000000ull), 0);
  CHECK_EQ_HEX(op1(MPIAR_INT64, MPIAR_SUM, 0x7fffffffffffffffull, 2), 0x8000000000000001ull);
  CHECK_EQ_HEX(op1(MPIAR_UINT64, MPIAR_MIN, ~0ull, 5), 5);
  CHECK_EQ_HEX(op1(MPIAR_INT64, MPIAR_MIN, ~0ull, 5), ~0ull);
  CHECK_EQ_HEX(op1(MPIAR_UINT32, MPIAR_BXOR, 0xf0f0f0f0u, 0xffff0000u), 0x0f0ff0f0u);
  CHECK_EQ_HEX(op1(MPIAR_INT8, MPIAR_BAND, 0xc3, 0x5a), 0x42);
  CHECK_EQ_HEX(op1(MPIAR_UINT64, MPIAR_BOR, 0x8000000000000000ull, 1), 0x8000000000000001ull);

  /* IEEE minimum/maximum: -0 < +0, the first NaN wins with its bits unchanged. */
  CHECK_EQ_HEX(op1(MPIAR_FLOAT32, MPIAR_MIN, 0x80000000u, 0x00000000u), 0x80000000u);
  CHECK_EQ_HEX(op1(MPIAR_FLOAT32, MPIAR_MIN, 0x00000000u, 0x80000000u), 0x80000000u);
  CHECK_EQ_HEX(op1(MPIAR_FLOAT32, MPIAR_MAX, 0x80000000u, 0x00000000u), 0x00000000u);
  CHECK_EQ_HEX(op1(MPIAR_FLOAT32, MPIAR_MAX, 0x7f800001u, 0x3f800000u), 0x7f800001u);
  CHECK_EQ_HEX(op1(MPIAR_FLOAT32, MPIAR_MIN, 0x3f800000u, 0xffa00000u), 0xffa00000u);
  CHECK_EQ_HEX(op1(MPIAR_FLOAT32, MPIAR_MIN, 0x7fc00001u, 0x7fc00002u), 0x7fc00001u);
  CHECK_EQ_HEX(op1(MPIAR_FLOAT32, MPIAR_MAX, 0xff800000u, 0xbf800000u), 0xbf800000u);
  CHECK_EQ_HEX(op1(MPIAR_FLOAT64, MPIAR_MIN, 0x0000000000000000ull, 0x8000000000000000ull),
               0x8000000000000000ull);
  CHECK_EQ_HEX(op1(MPIAR_FLOAT64, MPIAR_MAX, 0x7ff0000000000001ull, 0x3ff0000000000000ull),
               0x7ff0000000000001ull);
  CHECK_EQ_HEX(op1(MPIAR_FLOAT16, MPIAR_MIN, 0x8000, 0x0000), 0x8000);
  CHECK_EQ_HEX(op1(MPIAR_FLOAT16, MPIAR_MAX, 0x8000, 0x0000), 0x0000);
  CHECK_EQ_HEX(op1(MPIAR_FLOAT16, MPIAR_MAX, 0x7c01, 0x3c00), 0x7c01);
  CHECK_EQ_HEX(op1(MPIAR_FLOAT16, MPIAR_MIN, 0xbc00, 0x3c00), 0xbc00);
  CHECK_EQ_HEX(op1(MPIAR_BFLOAT16, MPIAR_MAX, 0x3f80, 0x7f81), 0x7f81);
  CHECK_EQ_HEX(op1(MPIAR_BFLOAT16, MPIAR_MIN, 0x0000, 0x8000), 0x8000);

  /* Arithmetic NaNs: a's NaN first, quieted, payload kept; invalid operations give NaN. */
  CHECK_EQ_HEX(op1(MPIAR_FLOAT32, MPIAR_SUM, 0x7f800001u, 0x3f800000u), 0x7fc00001u);
  CHECK_EQ_HEX(op1(MPIAR_FLOAT32, MPIAR_SUM, 0x3f800000u, 0xff800001u), 0xffc00001u);
  CHECK_EQ_HEX(op1(MPIAR_FLOAT32, MPIAR_PROD, 0x7f800002u, 0xffc00003u), 0x7fc00002u);
  CHECK_EQ_HEX(op1(MPIAR_FLOAT32, MPIAR_SUM, 0xffc00003u, 0x7f800002u), 0xffc00003u);
  CHECK(isnan(bitsf((uint32_t)op1(MPIAR_FLOAT32, MPIAR_SUM, 0x7f800000u, 0xff800000u))));
  CHECK_EQ_HEX(op1(MPIAR_FLOAT64, MPIAR_AVG, 0x7ff0000000000001ull, 0x3ff0000000000000ull),
               0x7ff8000000000001ull);
  CHECK_EQ_HEX(op1(MPIAR_FLOAT16, MPIAR_SUM, 0x7c01, 0x3c00), 0x7e01);
  CHECK_EQ_HEX(op1(MPIAR_FLOAT16, MPIAR_SUM, 0x3c00, 0xfd23), 0xff23);
  CHECK_EQ_HEX(op1(MPIAR_BFLOAT16, MPIAR_SUM, 0x7f81, 0x3f80), 0x7fc1);
  CHECK_EQ_HEX(op1(MPIAR_BFLOAT16, MPIAR_PROD, 0x3f80, 0xff85), 0xffc5);

  /* Ordinary arithmetic. */
  CHECK_EQ_HEX(op1(MPIAR_FLOAT32, MPIAR_SUM, fbits(1.5f), fbits(2.25f)), fbits(3.75f));
  CHECK_EQ_HEX(op1(MPIAR_FLOAT32, MPIAR_AVG, fbits(1.0f), fbits(4.0f)), fbits(2.5f));
  CHECK_EQ_HEX(op1(MPIAR_FLOAT32, MPIAR_SUM, 0x80000000u, 0x80000000u), 0x80000000u);
  CHECK_EQ_HEX(op1(MPIAR_FLOAT32, MPIAR_SUM, 0x80000000u, 0x00000000u), 0x00000000u);
  CHECK_EQ_HEX(div1(MPIAR_FLOAT32, fbits(3.0f), 2.0), fbits(1.5f));
  CHECK_EQ_HEX(div1(MPIAR_FLOAT64, 0x4008000000000000ull, 4.0), 0x3fe8000000000000ull);
  CHECK_EQ_HEX(div1(MPIAR_FLOAT16, 0x4200, 2.0), 0x3e00);  /* 3 / 2 = 1.5 */
  CHECK_EQ_HEX(div1(MPIAR_BFLOAT16, 0x4040, 3.0), 0x3f80); /* 3 / 3 = 1 */
  CHECK_EQ_HEX(div1(MPIAR_FLOAT16, 0x7c01, 2.0), 0x7e01);

  /* bf16 round to nearest even: 1 + 2^-8 is a tie below (to 1), 1 + 3*2^-8 one above. */
  CHECK_EQ_HEX(op1(MPIAR_BFLOAT16, MPIAR_SUM, 0x3f80, 0x3b80), 0x3f80);
  CHECK_EQ_HEX(op1(MPIAR_BFLOAT16, MPIAR_SUM, 0x3f81, 0x3b80), 0x3f82);
  CHECK_EQ_HEX(op1(MPIAR_BFLOAT16, MPIAR_SUM, 0x3f80, 0x3c40), 0x3f82);
  CHECK_EQ_HEX(op1(MPIAR_BFLOAT16, MPIAR_SUM, 0x0001, 0x0001), 0x0002); /* subnormals kept */
  CHECK_EQ_HEX(op1(MPIAR_BFLOAT16, MPIAR_SUM, 0x7f7f, 0x7f7f), 0x7f80); /* overflow to inf */
  /* AVG is (a + b) * 0.5 in f32, whose range bf16 shares: the sum overflows first. */
  CHECK_EQ_HEX(op1(MPIAR_BFLOAT16, MPIAR_AVG, 0x7f7f, 0x7f7f), 0x7f80);
  /* f16: 1 + 2^-11 is a tie to 1; (1 + 2^-10) + 2^-11 a tie up to 1 + 2^-9. */
  CHECK_EQ_HEX(op1(MPIAR_FLOAT16, MPIAR_SUM, 0x3c00, 0x1000), 0x3c00);
  CHECK_EQ_HEX(op1(MPIAR_FLOAT16, MPIAR_SUM, 0x3c01, 0x1000), 0x3c02);
  CHECK_EQ_HEX(op1(MPIAR_FLOAT16, MPIAR_SUM, 0x7bff, 0x4c00), 0x7c00); /* 65504 + 16: inf */
  CHECK_EQ_HEX(op1(MPIAR_FLOAT16, MPIAR_SUM, 0x7bff, 0x4800), 0x7bff); /* 65504 + 8 */
  CHECK_EQ_HEX(op1(MPIAR_FLOAT16, MPIAR_AVG, 0x7bff, 0x7bff), 0x7bff); /* no f16 overflow */
  CHECK_EQ_HEX(op1(MPIAR_FLOAT16, MPIAR_SUM, 0x0001, 0x0001), 0x0002);
  CHECK_EQ_HEX(op1(MPIAR_FLOAT16, MPIAR_PROD, 0x0001, 0x3800), 0x0000); /* 2^-25: tie to 0 */
  CHECK_EQ_HEX(op1(MPIAR_FLOAT16, MPIAR_PROD, 0x0003, 0x3800), 0x0002); /* 1.5 ulp: to 2 */
  CHECK_EQ_HEX(op1(MPIAR_FLOAT16, MPIAR_PROD, 0x0400, 0x3800), 0x0200); /* normal to subnormal */

  /* The conversions themselves. */
  CHECK_EQ_HEX(mpiar__f32_to_f16(65520.0f), 0x7c00);
  CHECK_EQ_HEX(mpiar__f32_to_f16(65519.99f), 0x7bff);
  CHECK_EQ_HEX(mpiar__f32_to_f16(-1.0f), 0xbc00);
  CHECK_EQ_HEX(mpiar__f32_to_f16(0x1p-24f), 0x0001);
  CHECK_EQ_HEX(mpiar__f32_to_f16(0x1p-25f), 0x0000);
  CHECK_EQ_HEX(mpiar__f32_to_f16(0x1.000002p-25f), 0x0001);
  CHECK_EQ_HEX(mpiar__f32_to_f16(0x1.ffcp-15f), 0x0400); /* rounds up into the normals */
  CHECK_EQ_HEX(fbits(mpiar__f16_to_f32(0x0001)), fbits(0x1p-24f));
  CHECK_EQ_HEX(fbits(mpiar__f16_to_f32(0xfbff)), fbits(-65504.0f));
  CHECK_EQ_HEX(fbits(mpiar__f16_to_f32(0x7c01)), 0x7f802000u);
  CHECK_EQ_HEX(mpiar__f32_to_bf16(bitsf(0x7f7fffffu)), 0x7f80);
  CHECK_EQ_HEX(mpiar__f32_to_bf16(bitsf(0x00008000u)), 0x0000); /* subnormal tie to even */
  CHECK_EQ_HEX(mpiar__f32_to_bf16(bitsf(0x00018000u)), 0x0002);
  CHECK_EQ_HEX(mpiar__f32_to_bf16(bitsf(0x7f800001u)), 0x7fc0);
  CHECK_EQ_HEX(fbits(mpiar__bf16_to_f32(0xbf80)), fbits(-1.0f));

  /* Exhaustive: every f16 converts to f32 and back unchanged (NaNs gain the quiet bit). */
  for (uint32_t h = 0; h < 0x10000u; h++) {
    uint16_t back = mpiar__f32_to_f16(mpiar__f16_to_f32((uint16_t)h));
    int nan = (h & 0x7fffu) > 0x7c00u;
    if (back != (nan ? (uint16_t)(h | 0x0200u) : (uint16_t)h)) {
      fprintf(stderr, "f16 0x%04x round-trips to 0x%04x\n", (unsigned)h, (unsigned)back);
      failures++;
      break;
    }
  }
  if (failures != 0) {
    fprintf(stderr, "%d failures\n", failures);
    return 1;
  }
  printf("reference kernels match the hand-computed values\n");
  return 0;
}
