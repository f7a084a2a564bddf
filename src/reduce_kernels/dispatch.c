/*
 * Kernel dispatch: which ISA level this process uses, the table of kernels for it, and the split
 * of long spans across OpenMP threads.
 *
 * The table is filled once per process: reference kernels in every slot, then each level up to
 * the chosen one overwrites the slots it implements (AVX2, then AVX-512 and its BF16/FP16
 * extensions when present). A level is usable only when the CPU has the instructions *and* the
 * OS saves their registers on context switches (XCR0, read with xgetbv); the CPU flags alone
 * would let a kernel fault on a kernel that did not enable the state.
 */
#include <cpuid.h>
#include <pthread.h>
#include <sched.h>
#include <unistd.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(MPIAR_HAVE_OPENMP)
#include <omp.h>
#endif

#include "base/common.h"
#include "base/settings.h"
#include "reduce_kernels/isa.h"

static const char *const isa_names[MPIAR__ISA_COUNT] = {
    [MPIAR__ISA_REFERENCE] = "reference",
    [MPIAR__ISA_AVX2] = "avx2",
    [MPIAR__ISA_AVX512] = "avx512",
};

const char *mpiar__isa_name(mpiar__isa_t isa) {
  return ((unsigned)isa < MPIAR__ISA_COUNT) ? isa_names[isa] : NULL;
}

/* ---- CPU features ---- */

/* XCR0 bits: SSE and AVX (YMM) state; AVX-512 adds opmask, ZMM_Hi256 and Hi16_ZMM state. */
#define XCR0_YMM 0x06u
#define XCR0_ZMM 0xe6u

static uint64_t read_xcr0(void) {
  uint32_t lo, hi;
  /* The instruction is encoded by hand so that this file needs no -mxsave flag. */
  __asm__ volatile(".byte 0x0f, 0x01, 0xd0" : "=a"(lo), "=d"(hi) : "c"(0));
  return ((uint64_t)hi << 32) | lo;
}

static unsigned detect_features(void) {
  unsigned eax, ebx, ecx, edx;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) {
    return 0;
  }
  /* Without OSXSAVE, xgetbv itself is undefined and no AVX state is enabled. */
  if (!(ecx & bit_OSXSAVE)) {
    return 0;
  }
  int f16c = (ecx & bit_F16C) != 0;
  uint64_t xcr0 = read_xcr0();
  unsigned f = 0;
  __builtin_cpu_init();
  if ((xcr0 & XCR0_YMM) == XCR0_YMM && f16c && __builtin_cpu_supports("avx2") &&
      __builtin_cpu_supports("fma")) {
    f |= MPIAR__FEAT_AVX2;
  }
  if ((f & MPIAR__FEAT_AVX2) && (xcr0 & XCR0_ZMM) == XCR0_ZMM &&
      __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq")) {
    f |= MPIAR__FEAT_AVX512;
  }
  if (f & MPIAR__FEAT_AVX512) {
    /* AVX512_FP16: leaf 7 subleaf 0, EDX bit 23. AVX512_BF16: leaf 7 subleaf 1, EAX bit 5. */
    if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) && (edx & (1u << 23))) {
      f |= MPIAR__FEAT_AVX512_FP16;
    }
    if (__get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) && (eax & (1u << 5))) {
      f |= MPIAR__FEAT_AVX512_BF16;
    }
  }
  /* A level whose kernel files the compiler could not build is not available either. */
#if !defined(MPIAR_KERNELS_AVX2)
  f &= ~(unsigned)(MPIAR__FEAT_AVX2 | MPIAR__FEAT_AVX512);
#endif
#if !defined(MPIAR_KERNELS_AVX512)
  f &= ~(unsigned)MPIAR__FEAT_AVX512;
#endif
  if (!(f & MPIAR__FEAT_AVX512)) {
    f &= ~(unsigned)(MPIAR__FEAT_AVX512_BF16 | MPIAR__FEAT_AVX512_FP16);
  }
#if !defined(MPIAR_KERNELS_AVX512_BF16)
  f &= ~(unsigned)MPIAR__FEAT_AVX512_BF16;
#endif
#if !defined(MPIAR_KERNELS_AVX512_FP16)
  f &= ~(unsigned)MPIAR__FEAT_AVX512_FP16;
#endif
  return f;
}

static pthread_once_t features_once = PTHREAD_ONCE_INIT;
static unsigned detected_features;
static unsigned disabled_features; /* test hook; written before any kernel use */

static void features_init(void) {
  detected_features = detect_features();
}

unsigned mpiar__cpu_features(void) {
  pthread_once(&features_once, features_init);
  unsigned f = detected_features & ~__atomic_load_n(&disabled_features, __ATOMIC_ACQUIRE);
  /* Every level builds on the one below, so disabling a base disables its refinements. */
  if (!(f & MPIAR__FEAT_AVX2)) {
    f &= ~(unsigned)MPIAR__FEAT_AVX512;
  }
  if (!(f & MPIAR__FEAT_AVX512)) {
    f &= ~(unsigned)(MPIAR__FEAT_AVX512_BF16 | MPIAR__FEAT_AVX512_FP16);
  }
  return f;
}

void mpiar__kernels_disable_features(unsigned mask) {
  __atomic_or_fetch(&disabled_features, mask, __ATOMIC_RELEASE);
}

int mpiar__isa_supported(mpiar__isa_t isa) {
  unsigned f = mpiar__cpu_features();
  switch (isa) {
  case MPIAR__ISA_REFERENCE:
    return 1;
  case MPIAR__ISA_AVX2:
    return (f & MPIAR__FEAT_AVX2) != 0;
  case MPIAR__ISA_AVX512:
    return (f & MPIAR__FEAT_AVX512) != 0;
  default:
    return 0;
  }
}

int mpiar__kernel_table_fill(mpiar__isa_t isa, mpiar__kernel_table_t *table) {
  if ((unsigned)isa >= MPIAR__ISA_COUNT || table == NULL) {
    return mpiar__error(MPIAR_ERR_INVALID_ARG, "invalid kernel level %d or null table", (int)isa);
  }
  if (!mpiar__isa_supported(isa)) {
    return mpiar__error(MPIAR_ERR_ISA_UNAVAILABLE,
                        "kernel level '%s' is not supported by this CPU, OS or build",
                        isa_names[isa]);
  }
  unsigned f = mpiar__cpu_features();
  table->isa = isa;
  memset(table->fan, 0, sizeof table->fan); /* only levels with fan-out forms set them */
  mpiar__fill_reference(table);
#if defined(MPIAR_KERNELS_AVX2)
  if (isa >= MPIAR__ISA_AVX2) {
    mpiar__fill_avx2(table);
  }
#endif
#if defined(MPIAR_KERNELS_AVX512)
  if (isa >= MPIAR__ISA_AVX512) {
    mpiar__fill_avx512(table);
  }
#endif
#if defined(MPIAR_KERNELS_AVX512_BF16)
  if (isa >= MPIAR__ISA_AVX512 && (f & MPIAR__FEAT_AVX512_BF16)) {
    mpiar__fill_avx512_bf16(table);
  }
#endif
#if defined(MPIAR_KERNELS_AVX512_FP16)
  if (isa >= MPIAR__ISA_AVX512 && (f & MPIAR__FEAT_AVX512_FP16)) {
    mpiar__fill_avx512_fp16(table);
  }
#endif
  (void)f;
  return MPIAR_SUCCESS;
}

/* ---- the process-wide table ---- */

static pthread_once_t table_once = PTHREAD_ONCE_INIT;
static int table_ready; /* set (release) once the table and init_rc are final */
static mpiar__kernel_table_t process_table;
static int init_rc;
/* The detail of a failed initialisation, repeated to every later caller on any thread. */
static char init_detail[256];

/* The level MPIAR_KERNEL forces, or the best one this CPU and OS support. */
static int choose_level(const mpiar__settings_t *set, mpiar__isa_t *level) {
  if (set->kernel < 0) {
    *level = mpiar__isa_supported(MPIAR__ISA_AVX512) ? MPIAR__ISA_AVX512
             : mpiar__isa_supported(MPIAR__ISA_AVX2) ? MPIAR__ISA_AVX2
                                                     : MPIAR__ISA_REFERENCE;
    return MPIAR_SUCCESS;
  }
  if (!mpiar__isa_supported((mpiar__isa_t)set->kernel)) {
    return mpiar__error(MPIAR_ERR_ISA_UNAVAILABLE,
                        "MPIAR_KERNEL=%s: this CPU, OS or build does not support that level",
                        isa_names[set->kernel]);
  }
  *level = (mpiar__isa_t)set->kernel;
  return MPIAR_SUCCESS;
}

static void table_init(void) {
  mpiar__isa_t level = MPIAR__ISA_REFERENCE;
  const mpiar__settings_t *set = NULL;
  int rc = mpiar__settings(&set);
  if (rc == MPIAR_SUCCESS) {
    rc = choose_level(set, &level);
  }
  if (rc != MPIAR_SUCCESS) {
    snprintf(init_detail, sizeof init_detail, "%s", mpiar_last_error());
    level = MPIAR__ISA_REFERENCE;
  }
  /* Even after a failure the table holds the reference kernels, so a stray call cannot crash. */
  int fill_rc = mpiar__kernel_table_fill(level, &process_table);
  init_rc = (rc != MPIAR_SUCCESS) ? rc : fill_rc;
  __atomic_store_n(&table_ready, 1, __ATOMIC_RELEASE);
}

/* Build the table once (every call after the first costs one load). */
static void table_once_run(void) {
  if (MPIAR__UNLIKELY(!__atomic_load_n(&table_ready, __ATOMIC_ACQUIRE))) {
    pthread_once(&table_once, table_init);
  }
}

int mpiar__kernels_init(void) {
  table_once_run();
  if (init_rc != MPIAR_SUCCESS) {
    return mpiar__error(init_rc, "%s", init_detail);
  }
  return MPIAR_SUCCESS;
}

const mpiar__kernel_table_t *mpiar__kernels(void) {
  table_once_run();
  return &process_table;
}

/* ---- threads ---- */

static int default_threads; /* 0: the OpenMP default */

void mpiar__kernel_set_default_threads(int nthreads) {
  __atomic_store_n(&default_threads, nthreads > 0 ? nthreads : 0, __ATOMIC_RELAXED);
}

/* CPUs this process may run on (its affinity mask, which mpiexec or srun may have narrowed). */
int mpiar__usable_cpus(void) {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    int n = CPU_COUNT(&set);
    if (n > 0) {
      return n;
    }
  }
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? (int)n : 1;
}

void mpiar__usable_cpu_mask(uint64_t mask[MPIAR__CPU_WORDS]) {
  memset(mask, 0, MPIAR__CPU_WORDS * sizeof *mask);
  cpu_set_t set;
  int have = sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0;
  int n = have ? CPU_SETSIZE : mpiar__usable_cpus();
  for (int c = 0; c < n && c < 64 * MPIAR__CPU_WORDS; c++) {
    if (!have || CPU_ISSET(c, &set)) {
      mask[c / 64] |= (uint64_t)1 << (c % 64);
    }
  }
}

int mpiar__kernel_threads(void) {
#if defined(MPIAR_HAVE_OPENMP)
  /* MPIAR_NUM_THREADS, capped at the CPUs this process may use: more threads than CPUs only
   * take turns on them (a malformed value was reported by mpiar__kernels_init()). */
  const mpiar__settings_t *set = NULL;
  mpiar__settings(&set);
  if (set->num_threads > 0) {
    static int cpus;
    int c = __atomic_load_n(&cpus, __ATOMIC_RELAXED);
    if (c == 0) {
      c = mpiar__usable_cpus();
      __atomic_store_n(&cpus, c, __ATOMIC_RELAXED);
    }
    return set->num_threads < c ? (int)set->num_threads : c;
  }
  int d = __atomic_load_n(&default_threads, __ATOMIC_RELAXED);
  return d > 0 ? d : omp_get_max_threads();
#else
  return 1;
#endif
}

/*
 * Split [0, n) into one chunk per thread. Chunks are whole multiples of 64 bytes (except the
 * last), so no two threads write the same cache line when dst is 64-byte aligned. Each element
 * is computed by the same kernel code whatever the split, so the result bits never change.
 */
static size_t chunk_elems(size_t n, size_t esize, int nthreads) {
  size_t per_line = 64 / esize;
  size_t chunk = (n + (size_t)nthreads - 1) / (size_t)nthreads;
  return (chunk + per_line - 1) / per_line * per_line;
}

void mpiar__reduce(void *dst, const void *a, const void *b, size_t n, mpiar_dtype_t dtype,
                   mpiar_op_t op) {
  mpiar__kernel_fn fn = mpiar__kernels()->fn[dtype][op];
  size_t esize = mpiar_dtype_size(dtype);
  int nthreads = 1;
  if (n * esize > MPIAR__KERNEL_PARALLEL_BYTES) {
    nthreads = mpiar__kernel_threads();
  }
  if (nthreads <= 1) {
    fn(dst, a, b, n);
    return;
  }
#if defined(MPIAR_HAVE_OPENMP)
  size_t chunk = chunk_elems(n, esize, nthreads);
#pragma omp parallel num_threads(nthreads)
  {
    size_t start = (size_t)omp_get_thread_num() * chunk;
    if (start < n) {
      size_t len = (n - start < chunk) ? n - start : chunk;
      fn((char *)dst + start * esize, (const char *)a + start * esize,
         (const char *)b + start * esize, len);
    }
  }
#else
  (void)chunk_elems;
#endif
}

int mpiar__reduce_fan(void *d0, void *d1, const void *a, const void *b, size_t n,
                      mpiar_dtype_t dtype, mpiar_op_t op, int stream) {
  mpiar__fan_fn fn = mpiar__kernels()->fan[dtype][op];
  if (fn == NULL) {
    return 0;
  }
  fn(d0, d1, a, b, n, stream);
  return 1;
}

void mpiar__divide(void *dst, const void *a, size_t n, mpiar_dtype_t dtype, double divisor) {
  mpiar__div_fn fn = mpiar__kernels()->div[dtype];
  size_t esize = mpiar_dtype_size(dtype);
  int nthreads = 1;
  if (n * esize > MPIAR__KERNEL_PARALLEL_BYTES) {
    nthreads = mpiar__kernel_threads();
  }
  if (nthreads <= 1) {
    fn(dst, a, n, divisor);
    return;
  }
#if defined(MPIAR_HAVE_OPENMP)
  size_t chunk = chunk_elems(n, esize, nthreads);
#pragma omp parallel num_threads(nthreads)
  {
    size_t start = (size_t)omp_get_thread_num() * chunk;
    if (start < n) {
      size_t len = (n - start < chunk) ? n - start : chunk;
      fn((char *)dst + start * esize, (const char *)a + start * esize, len, divisor);
    }
  }
#endif
}
