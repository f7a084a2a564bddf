/*
 * The store's fusion buffers on node-shared memory (mpiar_alloc, docs/shm.md).
 *
 * Fusion already copies the tensors into a buffer the store owns, so when that buffer lies in
 * mpiar_alloc memory of the store's communicator, and every worker is on one node, the fused
 * allreduce takes the zero-copy path: each worker reduces its share straight from every worker's
 * buffer, with flags in shared memory instead of messages.
 *
 * When. The store decides at its creation: MPIAR_KV_SHARED is not 0, fusion is on, and the
 * zero-copy path gives the bits the MPI path gives; then, at its first fused reduction
 * (collective): two or more workers share one node (MPI_Comm_split_type) whose shared windows
 * the path can use. Equal bits keep fused and per-key results equal bit for bit: the zero-copy
 * path reduces every element in the canonical order (mpiar_reduce_canonical), which is every
 * algorithm's order on two workers (x0 op x1; a named algorithm must be flagged pair-exact or
 * canonical) and every algorithm's order in reproducible mode. On three or more workers without
 * reproducible mode the store's Rabenseifner sums in another order, so the buffers stay ordinary.
 *
 * Allocation. A buffer is allocated, or grown, only at points that are collective by
 * construction and where its size follows from the call alone, the same on every worker: in a
 * blocking batch after its agreement, and at an asynchronous start. Its size is the first power
 * of two at or above the need (1 MiB at least), at most the fusion threshold, so a store
 * allocates a handful of times in its life, never per call: creating a window took 0.1-0.2 s on
 * two ranks of the development machine (load 11), whatever its size up to 64 MiB, and MPI leaves
 * its pages untouched until used. Every allocation is followed by one agreement (MIN of
 * "it worked" over the workers): where it failed on some worker, every worker frees what it got
 * and the store falls back to ordinary memory for the rest of its life.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "algorithms/algorithms.h"
#include "base/common.h"
#include "kvstore/kv_internal.h"

/* Do every worker of the store's communicator share this process's node, where the zero-copy
 * path can run? (collective) */
static int one_node(MPI_Comm comm, int size) {
  MPI_Comm node = MPI_COMM_NULL;
  if (MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) != MPI_SUCCESS) {
    return 0;
  }
  int n = 0;
  MPI_Comm_size(node, &n);
  int ok = n == size;
  MPI_Comm_free(&node);
  return ok;
}

/* Does the zero-copy path give the bits of the store's MPI path for every dtype? */
static int same_bits(const mpiar_kv_t *kv) {
  if (kv->ar.reproducible) {
    return 1;
  }
  if (kv->size > 2) {
    return 0;
  }
  const mpiar__algorithm_t *a = kv->algorithm ? mpiar__algorithm_find_any(kv->algorithm) : NULL;
  return a == NULL ? kv->algorithm == NULL
                   : (a->flags & (MPIAR__ALG_PAIR_EXACT | MPIAR__ALG_CANONICAL)) != 0;
}

void mpiar__kv_shared_decide(mpiar_kv_t *kv, int enabled) {
  /* -1: possible; whether the workers share a node is asked at the first fused reduction (a
   * collective point), so that stores that never fuse pay nothing. */
  kv->shared = enabled && kv->fusion_bytes > 0 && kv->size > 1 && same_bits(kv) ? -1 : 0;
}

int mpiar__kv_shared_fit(mpiar_kv_t *kv, mpiar__kv_shbuf_t *s, size_t need) {
  if (kv->shared < 0) {
    kv->shared = one_node(kv->comm, kv->size);
  }
  if (!kv->shared) {
    return 0;
  }
  if (s->buf != NULL && s->cap >= need) {
    return 1;
  }
  size_t want = (size_t)1 << 20; /* a window's creation costs 0.1-0.2 s: grow seldom */
  while (want < need && want < kv->fusion_bytes) {
    want *= 2;
  }
  if (want > kv->fusion_bytes) {
    want = kv->fusion_bytes;
  }
  if (want < need) {
    want = need;
  }
  void *p = NULL;
  int32_t ok = mpiar_alloc(kv->comm, want, &p) == MPIAR_SUCCESS;
  int rc = mpiar_allreduce_ex(MPIAR_IN_PLACE, &ok, 1, MPIAR_INT32, MPIAR_MIN, kv->comm, &kv->ar);
  if (rc != MPIAR_SUCCESS) {
    /* The communicator is broken: the memory goes at MPI_Finalize. */
    return rc;
  }
  if (!ok) {
    /* Some worker could not: all fall back (mpiar_free is collective over the node's ranks that
     * allocated, which are all or none of them). */
    mpiar_free(p);
    kv->shared = 0;
    mpiar__error_clear();
    return 0;
  }
  mpiar_free(s->buf);
  s->buf = p;
  s->cap = want;
  kv->shared_allocs++;
  return 1;
}

void mpiar__kv_shared_release(mpiar__kv_shbuf_t *s) {
  /* Collective: every worker releases the store's buffers in the same order (destroy). After
   * MPI_Finalize the library has freed them already and mpiar_free says so; nothing is left. */
  if (s->buf != NULL) {
    (void)mpiar_free(s->buf);
  }
  s->buf = NULL;
  s->cap = 0;
}

int mpiar__kv_shared_state(const mpiar_kv_t *kv, size_t *allocs) {
  if (allocs != NULL) {
    *allocs = kv->shared_allocs;
  }
  return kv->shared != 0;
}
