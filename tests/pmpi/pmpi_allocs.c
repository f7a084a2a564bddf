/*
 * Allocations of the interposer in steady state: a plain MPI program, run with libmpiar_pmpi.so
 * preloaded, counts the heap allocations made directly by code of that library (the caller of
 * malloc & co. lies in its address range) while it repeats the same MPI_Allreduce calls. The
 * logical operations (MPI_LAND, MPI_LOR, MPI_LXOR) turn every element into a 0/1 byte first; once
 * warm they must allocate no more per call than a bitwise operation of the same count, which
 * reduces the user's buffer directly. Results are checked too.
 *
 * The program replaces malloc, calloc, realloc, posix_memalign, aligned_alloc and memalign with
 * counting wrappers around glibc's own (__libc_*), so it is built without sanitizers.
 * Exit code 0: no extra allocation; 1: extra allocations or wrong results; 77: the interposer is
 * not loaded (nothing to measure).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <mpi.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);

/* The interposer's address range; 0..0 until known, so nothing is counted before. */
static uintptr_t lib_lo, lib_hi;
static atomic_long lib_allocs;

static void count(const void *caller) {
  uintptr_t c = (uintptr_t)caller;
  if (c >= lib_lo && c < lib_hi) {
    atomic_fetch_add_explicit(&lib_allocs, 1, memory_order_relaxed);
  }
}

void *malloc(size_t n) {
  count(__builtin_return_address(0));
  return __libc_malloc(n);
}

void *calloc(size_t n, size_t s) {
  count(__builtin_return_address(0));
  return __libc_calloc(n, s);
}

void *realloc(void *p, size_t n) {
  count(__builtin_return_address(0));
  return __libc_realloc(p, n);
}

void free(void *p) {
  __libc_free(p);
}

int posix_memalign(void **out, size_t align, size_t n) {
  count(__builtin_return_address(0));
  void *p = __libc_memalign(align, n);
  if (p == NULL) {
    return 12; /* ENOMEM */
  }
  *out = p;
  return 0;
}

void *aligned_alloc(size_t align, size_t n) {
  count(__builtin_return_address(0));
  return __libc_memalign(align, n);
}

void *memalign(size_t align, size_t n) {
  count(__builtin_return_address(0));
  return __libc_memalign(align, n);
}

/* The loaded object holding `base`: record the span of its loaded segments. */
static int find_range(struct dl_phdr_info *info, size_t size, void *base) {
  (void)size;
  if ((void *)info->dlpi_addr != base) {
    return 0;
  }
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type == PT_LOAD) {
      uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
      uintptr_t hi = lo + ph->p_memsz;
      lib_lo = (lib_lo == 0 || lo < lib_lo) ? lo : lib_lo;
      lib_hi = hi > lib_hi ? hi : lib_hi;
    }
  }
  return 1;
}

/* Run `calls` allreduces of n ints with op and check them. @return the wrong elements. */
static long run(MPI_Op op, int n, int calls, int rank, int p) {
  int *in = __libc_malloc((size_t)n * sizeof *in);
  int *out = __libc_malloc((size_t)n * sizeof *out);
  long wrong = 0;
  for (int c = 0; c < calls; c++) {
    for (int i = 0; i < n; i++) {
      in[i] = ((i + rank + c) % 3 == 0) ? 0 : (i % 7 + 1) << (rank % 4);
    }
    MPI_Allreduce(in, out, n, MPI_INT, op, MPI_COMM_WORLD);
    for (int i = 0; i < n; i++) {
      int want = (op == MPI_LAND) ? 1 : -1;
      for (int r = 0; r < p; r++) {
        int v = ((i + r + c) % 3 == 0) ? 0 : (i % 7 + 1) << (r % 4);
        want = op == MPI_LAND ? (want && v) : (want == -1 ? v : (want | v));
      }
      wrong += out[i] != want;
    }
  }
  __libc_free(in);
  __libc_free(out);
  return wrong;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, p;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &p);

  /* MPI_Allreduce as this program sees it: the interposer's when it is loaded. */
  Dl_info info;
  int loaded = dladdr((void *)MPI_Allreduce, &info) != 0 && info.dli_fname != NULL &&
               strstr(info.dli_fname, "mpiar_pmpi") != NULL;
  if (loaded) {
    dl_iterate_phdr(find_range, info.dli_fbase);
    loaded = lib_hi > lib_lo;
  }
  int all_loaded = 0;
  PMPI_Allreduce(&loaded, &all_loaded, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (!all_loaded) {
    if (rank == 0) {
      printf("SKIPPED: libmpiar_pmpi.so does not define MPI_Allreduce in this process\n");
    }
    MPI_Finalize();
    return 77;
  }

  enum { N = 4096, WARM = 3, CALLS = 50 };
  long wrong = run(MPI_LAND, N, WARM, rank, p) + run(MPI_BOR, N, WARM, rank, p);
  atomic_store(&lib_allocs, 0);
  wrong += run(MPI_LAND, N, CALLS, rank, p);
  long logical = atomic_exchange(&lib_allocs, 0);
  wrong += run(MPI_BOR, N, CALLS, rank, p);
  long bitwise = atomic_exchange(&lib_allocs, 0);

  long counts[3] = {logical, bitwise, wrong}, sums[3];
  PMPI_Allreduce(counts, sums, 3, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  int ok = sums[0] <= sums[1] && sums[2] == 0;
  if (rank == 0) {
    printf("interposer allocations over %d warm calls of %d ints on %d ranks: MPI_LAND %ld, "
           "MPI_BOR %ld; wrong elements %ld: %s\n",
           CALLS, N, p, sums[0], sums[1], sums[2], ok ? "ok" : "FAILED");
  }
  MPI_Finalize();
  return ok ? 0 : 1;
}
