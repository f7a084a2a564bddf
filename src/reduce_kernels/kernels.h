/*
 * Reduce-kernel layer: dst[i] = a[i] op b[i] for every (dtype, op) pair, chosen once per
 * process from the CPU's features, with long spans split across OpenMP threads.
 *
 * The table is filled with the reference (scalar C) kernels first; then each ISA level the CPU
 * (and the OS, checked with xgetbv) supports overwrites the slots it implements. The result
 * bits of every kernel equal the reference's, so the level and thread count never change results.
 */
#ifndef MPIAR_KERNELS_H
#define MPIAR_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "base/common.h"

/* One kernel: dst[i] = a[i] op b[i], i < n. dst may equal a or b; no other overlap. */
typedef void (*mpiar__kernel_fn)(void *dst, const void *a, const void *b, size_t n);

/* One divide kernel: dst[i] = a[i] / divisor (floating types; f16/bf16 through f32). */
typedef void (*mpiar__div_fn)(void *dst, const void *a, size_t n, double divisor);

/*
 * One fan-out kernel: d0[i] = d1[i] = a[i] op b[i], i < n, with the bits of the pair's kernel,
 * reading each input line once and writing both results from the register (no second pass
 * over a temporary); non-temporal stores when @p stream and both destinations are 64-byte
 * aligned (the caller fences). d0 may equal a and d1 equal b (in place); no other overlap.
 */
typedef void (*mpiar__fan_fn)(void *d0, void *d1, const void *a, const void *b, size_t n,
                              int stream);

typedef enum mpiar__isa {
  MPIAR__ISA_REFERENCE = 0,
  MPIAR__ISA_AVX2,   /* AVX2 + FMA + F16C */
  MPIAR__ISA_AVX512, /* AVX-512 F/BW/VL/DQ (+BF16, +FP16 where present) */
  MPIAR__ISA_COUNT
} mpiar__isa_t;

/* A filled dispatch table for one ISA level. */
typedef struct mpiar__kernel_table {
  mpiar__isa_t isa;
  mpiar__kernel_fn fn[MPIAR__DTYPE_COUNT][MPIAR__OP_COUNT]; /* NULL: pair not supported */
  mpiar__div_fn div[MPIAR__DTYPE_COUNT];                   /* NULL for integer types */
  /* Fan-out forms, where the level has one (AVX-512: sum, prod, min, max and avg of float32
   * and float64, sum of the 32- and 64-bit integers); NULL elsewhere. */
  mpiar__fan_fn fan[MPIAR__DTYPE_COUNT][MPIAR__OP_COUNT];
} mpiar__kernel_table_t;

/*
 * Initialise the process-wide table once (thread-safe): the best level the CPU supports, or the
 * level MPIAR_KERNEL forces. @return MPIAR_SUCCESS, MPIAR_ERR_ENV (unknown level name) or
 * MPIAR_ERR_ISA_UNAVAILABLE (the forced level is not supported here). The outcome is sticky.
 */
int mpiar__kernels_init(void);

/* The process-wide table (after a successful mpiar__kernels_init()). */
const mpiar__kernel_table_t *mpiar__kernels(void);

/* @return 1 if this CPU and OS support @p isa. */
int mpiar__isa_supported(mpiar__isa_t isa);

/*
 * CPU features behind the levels. AVX2 means AVX2 + FMA + F16C with YMM state enabled by the OS;
 * AVX512 means F/BW/VL/DQ with opmask and ZMM state enabled; the BF16 and FP16 extensions only
 * refine the AVX512 level (its bf16/f16 slots) and are used only when present.
 */
enum {
  MPIAR__FEAT_AVX2 = 1u << 0,
  MPIAR__FEAT_AVX512 = 1u << 1,
  MPIAR__FEAT_AVX512_BF16 = 1u << 2,
  MPIAR__FEAT_AVX512_FP16 = 1u << 3
};

/* @return the MPIAR__FEAT_* bits this CPU and OS support (minus those disabled below). */
unsigned mpiar__cpu_features(void);

/*
 * Test hook: treat the MPIAR__FEAT_* bits in @p mask as absent from now on, so that tests can
 * reach the paths of smaller CPUs (e.g. AVX-512 without FP16, or a forced level that is missing).
 * Call it before mpiar__kernels_init() for the process table to see it.
 */
void mpiar__kernels_disable_features(unsigned mask);

/* @return "reference", "avx2", "avx512". */
const char *mpiar__isa_name(mpiar__isa_t isa);

/*
 * Fill @p table for one level (reference slots first, then the level's own). For tests and
 * benchmarks that compare levels. @return MPIAR_ERR_ISA_UNAVAILABLE if not supported here.
 */
int mpiar__kernel_table_fill(mpiar__isa_t isa, mpiar__kernel_table_t *table);

/*
 * The reduction used by the executors: dst = a op b over n elements with the process table,
 * split across threads when n * elem size exceeds the threshold. The pair must be supported
 * (callers validate first). Never fails once the table is initialised.
 */
void mpiar__reduce(void *dst, const void *a, const void *b, size_t n, mpiar_dtype_t dtype,
                   mpiar_op_t op);

/*
 * d0 = d1 = a op b over n elements with the process table's fan-out kernel, on the calling
 * thread (the zero-copy allreduce's last step at p = 2, docs/shm.md). @return 1 if done, 0 if
 * the level has no fan-out form of the pair (the caller reduces and copies instead).
 */
int mpiar__reduce_fan(void *d0, void *d1, const void *a, const void *b, size_t n,
                      mpiar_dtype_t dtype, mpiar_op_t op, int stream);

/* dst[i] = a[i] / divisor with the process table (floating dtypes), threaded like mpiar__reduce. */
void mpiar__divide(void *dst, const void *a, size_t n, mpiar_dtype_t dtype, double divisor);

/*
 * Threads used for one long span: MPIAR_NUM_THREADS if set, else the value set by
 * mpiar__kernel_set_default_threads() (the executor sets cores per node / ranks per node), else
 * the OpenMP default. Always 1 without OpenMP.
 */
int mpiar__kernel_threads(void);

/* CPUs this process may run on (its affinity mask). */
int mpiar__usable_cpus(void);

/* Words of a CPU bit mask: CPUs 0 .. 64 * MPIAR__CPU_WORDS - 1. */
#define MPIAR__CPU_WORDS 16

/* This process's affinity mask as bits (CPU c is bit c % 64 of word c / 64); without one, the
 * first mpiar__usable_cpus() CPUs. */
void mpiar__usable_cpu_mask(uint64_t mask[MPIAR__CPU_WORDS]);
void mpiar__kernel_set_default_threads(int nthreads);

/* Spans shorter than this many bytes (per operand) run on one thread. */
#define MPIAR__KERNEL_PARALLEL_BYTES ((size_t)256 * 1024)

/*
 * Spans at least this long (bytes written by one call) use non-temporal stores in the AVX-512
 * kernels: such a span cannot stay in cache, so skipping the read-for-ownership of the
 * destination saves a third of the memory traffic.
 */
#define MPIAR__STREAM_BYTES ((size_t)32 * 1024 * 1024)

/* f16/bf16 <-> f32 conversions with round-to-nearest-even (reference semantics). */
float mpiar__f16_to_f32(uint16_t h);
uint16_t mpiar__f32_to_f16(float f);
float mpiar__bf16_to_f32(uint16_t h);
uint16_t mpiar__f32_to_bf16(float f);

#endif /* MPIAR_KERNELS_H */
