/* Helpers shared by the kernel tests: a fixed-seed generator, value mixes and assertions (the
 * checks of ../common/test_check.h; CHECK here takes no message). */
#ifndef MPIAR_KERNEL_TEST_UTIL_H
#define MPIAR_KERNEL_TEST_UTIL_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond) CHECK_COND(cond)
#include "base/common.h"
#include "../common/test_check.h"
#include "../common/test_random.h"
#include "reduce_kernels/kernels.h"

/* Compare two integers (e.g. bit patterns), printing both on a mismatch. */
#define CHECK_EQ_HEX(got, want)                                                                   \
  do {                                                                                            \
    unsigned long long g_ = (unsigned long long)(got), w_ = (unsigned long long)(want);           \
    if (g_ != w_) {                                                                               \
      fprintf(stderr, "%s:%d: %s = 0x%llx, expected %s = 0x%llx\n", __FILE__, __LINE__, #got, g_, \
              #want, w_);                                                                         \
      failures++;                                                                                 \
    }                                                                                             \
  } while (0)

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static inline void rng_seed(uint64_t s) {
  rng_state = s ? s : 1;
}

static inline uint64_t rng_next(void) {
  /* xorshift64*: fixed seeds make every failure reproducible. */
  return test_xorshift64star(&rng_state);
}

static inline int is_float_dtype(mpiar_dtype_t dt) {
  return mpiar__dtype_is_float(dt);
}

/* Special bit patterns per floating type: zeros, infinities, NaNs with payloads (quiet and
 * signalling, both signs), subnormals, the largest finite values, and ones. */
static const uint16_t specials16_f16[] = {0x0000, 0x8000, 0x7c00, 0xfc00, 0x7e00, 0xfe00, 0x7c01,
                                          0x7d23, 0xfe5a, 0x0001, 0x8001, 0x03ff, 0x83ff, 0x0400,
                                          0x7bff, 0xfbff, 0x3c00, 0xbc00, 0x3c01, 0x1400};
static const uint16_t specials16_bf16[] = {0x0000, 0x8000, 0x7f80, 0xff80, 0x7fc0, 0xffc0, 0x7f81,
                                           0x7fa5, 0xffd3, 0x0001, 0x8001, 0x007f, 0x807f, 0x0080,
                                           0x7f7f, 0xff7f, 0x3f80, 0xbf80, 0x3f81, 0x0100};
static const uint32_t specials32[] = {
    0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00000u, 0x7f800001u,
    0x7fa12345u, 0xffe54321u, 0x00000001u, 0x80000001u, 0x007fffffu, 0x807fffffu, 0x00800000u,
    0x7f7fffffu, 0xff7fffffu, 0x3f800000u, 0xbf800000u, 0x33000000u, 0x38800000u};
static const uint64_t specials64[] = {
    0x0000000000000000ull, 0x8000000000000000ull, 0x7ff0000000000000ull, 0xfff0000000000000ull,
    0x7ff8000000000000ull, 0xfff8000000000000ull, 0x7ff0000000000001ull, 0x7ff4123456789abcull,
    0xfffc0000deadbeefull, 0x0000000000000001ull, 0x8000000000000001ull, 0x000fffffffffffffull,
    0x7fefffffffffffffull, 0xffefffffffffffffull, 0x3ff0000000000000ull, 0xbff0000000000000ull};

#define NELEMS(x) (sizeof(x) / sizeof((x)[0]))

/*
 * Fill n elements of dtype: mostly values of moderate, similar magnitude (so that sums and
 * products round, and 16-bit ties happen often), some raw random bits, some special values.
 */
static inline void fill_values(void *buf, size_t n, mpiar_dtype_t dt) {
  for (size_t i = 0; i < n; i++) {
    uint64_t r = rng_next();
    unsigned kind = (unsigned)(r & 15u);
    uint64_t bits = rng_next();
    switch (dt) {
    case MPIAR_FLOAT16: {
      uint16_t v = (uint16_t)bits;
      if (kind < 2) {
        v = specials16_f16[(bits >> 20) % NELEMS(specials16_f16)];
      } else if (kind < 12) {
        v = (uint16_t)((v & 0x83ffu) | (uint16_t)((13u + (bits >> 16) % 6u) << 10));
      }
      memcpy((char *)buf + 2 * i, &v, 2);
      break;
    }
    case MPIAR_BFLOAT16: {
      uint16_t v = (uint16_t)bits;
      if (kind < 2) {
        v = specials16_bf16[(bits >> 20) % NELEMS(specials16_bf16)];
      } else if (kind < 12) {
        v = (uint16_t)((v & 0x807fu) | (uint16_t)((125u + (bits >> 16) % 6u) << 7));
      }
      memcpy((char *)buf + 2 * i, &v, 2);
      break;
    }
    case MPIAR_FLOAT32: {
      uint32_t v = (uint32_t)bits;
      if (kind < 2) {
        v = specials32[(bits >> 40) % NELEMS(specials32)];
      } else if (kind < 12) {
        v = (v & 0x807fffffu) | ((125u + (uint32_t)(bits >> 32) % 6u) << 23);
      }
      memcpy((char *)buf + 4 * i, &v, 4);
      break;
    }
    case MPIAR_FLOAT64: {
      uint64_t v = bits;
      if (kind < 2) {
        v = specials64[(r >> 20) % NELEMS(specials64)];
      } else if (kind < 12) {
        v = (v & 0x800fffffffffffffull) | ((1021ull + (r >> 20) % 6u) << 52);
      }
      memcpy((char *)buf + 8 * i, &v, 8);
      break;
    }
    default: {
      /* Integers: raw bits, with extremes often so that wrapping is exercised. */
      size_t sz = mpiar_dtype_size(dt);
      if (kind < 3) {
        bits = (kind == 0) ? ~0ull : (kind == 1 ? 0x7fffffffffffffffull : 0x8080808080808080ull);
      }
      memcpy((char *)buf + sz * i, &bits, sz);
      break;
    }
    }
  }
}

#endif /* MPIAR_KERNEL_TEST_UTIL_H */
