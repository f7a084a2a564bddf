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

#endif /* MPIAR_KERNELS_ISA_H */
