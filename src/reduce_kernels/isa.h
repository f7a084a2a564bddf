/*
 * Internal to the kernel layer: the per-ISA fill functions and the CPU feature bits that select
 * them. Only dispatch.c calls the fill functions, and only after checking the features.
 */
#ifndef MPIAR_KERNELS_ISA_H
#define MPIAR_KERNELS_ISA_H

#include "reduce_kernels/kernels.h"

/* Each fill function overwrites the slots its file implements and leaves the others alone. */
void mpiar__fill_reference(mpiar__kernel_table_t *table);
void mpiar__fill_avx2(mpiar__kernel_table_t *table);
void mpiar__fill_avx512(mpiar__kernel_table_t *table);
void mpiar__fill_avx512_bf16(mpiar__kernel_table_t *table);
void mpiar__fill_avx512_fp16(mpiar__kernel_table_t *table);

/*
 * Spans at least this long (bytes written by one call) use non-temporal stores in the AVX-512
 * kernels: such a span cannot stay in cache, so skipping the read-for-ownership of the
 * destination saves a third of the memory traffic.
 */
#define MPIAR__STREAM_BYTES ((size_t)32 * 1024 * 1024)

#endif /* MPIAR_KERNELS_ISA_H */
