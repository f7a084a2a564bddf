/*
 * Loop skeletons shared by the AVX2 and AVX-512 kernel files. A kernel is a vector operation
 * OP(a, b) on whole registers of raw bits; the skeleton walks the span in bytes, so one skeleton
 * serves every element type. Included only by kernel files compiled with the matching flags.
 *
 * Each element is computed by the same vector code whether it falls in the body, the head or the
 * tail of a span (the AVX-512 skeleton masks partial vectors, the AVX2 one copies them through a
 * register-sized buffer), so where a span starts or ends never changes the result bits.
 */
#ifndef MPIAR_KERNELS_SIMD_LOOP_H
#define MPIAR_KERNELS_SIMD_LOOP_H

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "reduce_kernels/isa.h"

#if defined(__AVX512F__) && defined(__AVX512BW__)
/*
 * AVX-512: a masked head brings dst to a 64-byte boundary (when dst is element-aligned), then
 * two registers per iteration, then a masked tail. Masked loads suppress faults on the bytes
 * they do not read, so the tail never touches memory past the span. Spans of at least
 * MPIAR__STREAM_BYTES use non-temporal stores. CTX is an extra operand (e.g. a divisor).
 */
#define MPIAR__RUN512(NAME, ESIZE, OP)                                                         \
  static void NAME##_run(char *d, const char *pa, const char *pb, size_t bytes, __m512i ctx) { \
    size_t i = 0;                                                                              \
    size_t head = (64u - ((uintptr_t)d & 63u)) & 63u;                                          \
    if (head % (ESIZE) != 0) {                                                                 \
      head = 0; /* dst is not element-aligned: it can never reach a 64-byte boundary */        \
    } else if (head > bytes) {                                                                 \
      head = bytes;                                                                            \
    }                                                                                          \
    if (head != 0) {                                                                           \
      __mmask64 k = (__mmask64)((1ull << head) - 1u);                                          \
      __m512i x = _mm512_maskz_loadu_epi8(k, pa);                                              \
      __m512i y = _mm512_maskz_loadu_epi8(k, pb);                                              \
      _mm512_mask_storeu_epi8(d, k, OP(x, y, ctx));                                            \
      i = head;                                                                                \
    }                                                                                          \
    int aligned = (((uintptr_t)(d + i)) & 63u) == 0;                                           \
    if (aligned && bytes >= MPIAR__STREAM_BYTES) {                                             \
      for (; i + 128 <= bytes; i += 128) {                                                     \
        __m512i x0 = _mm512_loadu_si512(pa + i);                                               \
        __m512i y0 = _mm512_loadu_si512(pb + i);                                               \
        __m512i x1 = _mm512_loadu_si512(pa + i + 64);                                          \
        __m512i y1 = _mm512_loadu_si512(pb + i + 64);                                          \
        _mm512_stream_si512((void *)(d + i), OP(x0, y0, ctx));                                 \
        _mm512_stream_si512((void *)(d + i + 64), OP(x1, y1, ctx));                            \
      }                                                                                        \
      _mm_sfence();                                                                            \
    }                                                                                          \
    for (; i + 128 <= bytes; i += 128) {                                                       \
      __m512i x0 = _mm512_loadu_si512(pa + i);                                                 \
      __m512i y0 = _mm512_loadu_si512(pb + i);                                                 \
      __m512i x1 = _mm512_loadu_si512(pa + i + 64);                                            \
      __m512i y1 = _mm512_loadu_si512(pb + i + 64);                                            \
      _mm512_storeu_si512(d + i, OP(x0, y0, ctx));                                             \
      _mm512_storeu_si512(d + i + 64, OP(x1, y1, ctx));                                        \
    }                                                                                          \
    for (; i + 64 <= bytes; i += 64) {                                                         \
      __m512i x = _mm512_loadu_si512(pa + i);                                                  \
      __m512i y = _mm512_loadu_si512(pb + i);                                                  \
      _mm512_storeu_si512(d + i, OP(x, y, ctx));                                               \
    }                                                                                          \
    if (i < bytes) {                                                                           \
      __mmask64 k = (__mmask64)((1ull << (bytes - i)) - 1u);                                   \
      __m512i x = _mm512_maskz_loadu_epi8(k, pa + i);                                          \
      __m512i y = _mm512_maskz_loadu_epi8(k, pb + i);                                          \
      _mm512_mask_storeu_epi8(d + i, k, OP(x, y, ctx));                                        \
    }                                                                                          \
  }

/*
 * The fan-out form (kernels.h, mpiar__fan_fn) of the kernel OP: each 64-byte vector of the result
 * is stored into both destinations as soon as it is made, non-temporally when asked and both are
 * aligned; a masked tail as in the kernel, so every element has the kernel's bits.
 */
#define MPIAR__FAN512(NAME, ESIZE, OP)                                                         \
  static void NAME##_fan(void *d0v, void *d1v, const void *av, const void *bv, size_t n,      \
                         int stream) {                                                         \
    char *d0 = d0v, *d1 = d1v;                                                                 \
    const char *pa = av, *pb = bv;                                                             \
    const __m512i ctx = _mm512_setzero_si512();                                                \
    size_t bytes = n * (ESIZE), i = 0;                                                         \
    if (stream && ((((uintptr_t)d0) | ((uintptr_t)d1)) & 63u) == 0) {                          \
      for (; i + 64 <= bytes; i += 64) {                                                       \
        __m512i r = OP(_mm512_loadu_si512(pa + i), _mm512_loadu_si512(pb + i), ctx);          \
        _mm512_stream_si512((void *)(d0 + i), r);                                              \
        _mm512_stream_si512((void *)(d1 + i), r);                                              \
      }                                                                                        \
    } else {                                                                                   \
      for (; i + 64 <= bytes; i += 64) {                                                       \
        __m512i r = OP(_mm512_loadu_si512(pa + i), _mm512_loadu_si512(pb + i), ctx);          \
        _mm512_storeu_si512(d0 + i, r);                                                        \
        _mm512_storeu_si512(d1 + i, r);                                                        \
      }                                                                                        \
    }                                                                                          \
    if (i < bytes) {                                                                           \
      __mmask64 k = (__mmask64)((1ull << (bytes - i)) - 1u);                                   \
      __m512i r = OP(_mm512_maskz_loadu_epi8(k, pa + i), _mm512_maskz_loadu_epi8(k, pb + i),   \
                     ctx);                                                                     \
      _mm512_mask_storeu_epi8(d0 + i, k, r);                                                   \
      _mm512_mask_storeu_epi8(d1 + i, k, r);                                                   \
    }                                                                                          \
  }

/* A kernel (dst, a, b, n) over NAME##_run with a zero context. */
#define MPIAR__KERNEL512(NAME, ESIZE, OP)                               \
  MPIAR__RUN512(NAME, ESIZE, OP)                                        \
  static void NAME(void *dst, const void *a, const void *b, size_t n) { \
    NAME##_run(dst, a, b, n *(ESIZE), _mm512_setzero_si512());          \
  }
#endif

#if defined(__AVX2__)
/* AVX2: two registers per iteration; the tail goes through a zeroed 32-byte buffer. */
#define MPIAR__RUN256(NAME, ESIZE, OP)                                                         \
  static void NAME##_run(char *d, const char *pa, const char *pb, size_t bytes, __m256i ctx) { \
    size_t i = 0;                                                                              \
    for (; i + 64 <= bytes; i += 64) {                                                         \
      __m256i x0 = _mm256_loadu_si256((const __m256i *)(pa + i));                              \
      __m256i y0 = _mm256_loadu_si256((const __m256i *)(pb + i));                              \
      __m256i x1 = _mm256_loadu_si256((const __m256i *)(pa + i + 32));                         \
      __m256i y1 = _mm256_loadu_si256((const __m256i *)(pb + i + 32));                         \
      _mm256_storeu_si256((__m256i *)(d + i), OP(x0, y0, ctx));                                \
      _mm256_storeu_si256((__m256i *)(d + i + 32), OP(x1, y1, ctx));                           \
    }                                                                                          \
    for (; i + 32 <= bytes; i += 32) {                                                         \
      __m256i x = _mm256_loadu_si256((const __m256i *)(pa + i));                               \
      __m256i y = _mm256_loadu_si256((const __m256i *)(pb + i));                               \
      _mm256_storeu_si256((__m256i *)(d + i), OP(x, y, ctx));                                  \
    }                                                                                          \
    if (i < bytes) {                                                                           \
      unsigned char bx[32] = {0}, by[32] = {0}, br[32];                                        \
      memcpy(bx, pa + i, bytes - i);                                                           \
      memcpy(by, pb + i, bytes - i);                                                           \
      __m256i r = OP(_mm256_loadu_si256((const __m256i *)bx),                                  \
                     _mm256_loadu_si256((const __m256i *)by), ctx);                            \
      _mm256_storeu_si256((__m256i *)br, r);                                                   \
      memcpy(d + i, br, bytes - i);                                                            \
    }                                                                                          \
  }

/* A kernel (dst, a, b, n) over NAME##_run with a zero context. */
#define MPIAR__KERNEL256(NAME, ESIZE, OP)                               \
  MPIAR__RUN256(NAME, ESIZE, OP)                                        \
  static void NAME(void *dst, const void *a, const void *b, size_t n) { \
    NAME##_run(dst, a, b, n *(ESIZE), _mm256_setzero_si256());          \
  }
#endif

#endif /* MPIAR_KERNELS_SIMD_LOOP_H */
