/*
 * Asynchronous pushpull (mpiar_kv_pushpull_async): results equal per-key pushpull bit for bit
 * whatever the fusion threshold, priorities and completion order; higher priority starts first;
 * requests, NULL requests and mpiar_kv_wait_all(); tensors larger than the threshold; empty
 * tensors; a priority that differs between workers is caught by the agreement.
 *
 *   test_kv_async [default|ALGORITHM]
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "core/inspect.h"
#include "kv_test.h"
#include "kvstore/kv_internal.h"
#include "mpiar_kv.h"

enum { NKEYS = 23 };

static int rank, size;
static const char *algorithm;

/* Key k: a float tensor of a size that varies a lot; key 7 is empty, keys 5 and 11 are f64. */
static size_t count_of(int k) {
  return k == 7 ? 0 : (size_t)((k * 3571) % 9000) + (k % 4 == 0 ? 300000 : 1);
}
static mpiar_dtype_t dtype_of(int k) {
  return (k == 5 || k == 11) ? MPIAR_FLOAT64 : MPIAR_FLOAT32;
}

static void grad(void *g, int k, int step) {
  size_t n = count_of(k);
  for (size_t i = 0; i < n; i++) {
    double v = sin(0.37 * (double)i + (double)k + 0.11 * step) * (1.0 + rank) / 3.0;
    if (dtype_of(k) == MPIAR_FLOAT64) {
      ((double *)g)[i] = v;
    } else {
      ((float *)g)[i] = (float)v;
    }
  }
}

static mpiar_kv_t *make_store(size_t fusion) {
  mpiar_kv_options_t o = MPIAR_KV_OPTIONS_INIT;
  o.fusion_bytes = fusion;
  o.op = MPIAR_AVG;
  o.algorithm = strcmp(algorithm, "default") == 0 ? NULL : algorithm;
  o.timeout_ms = 60000;
  mpiar_kv_t *kv = NULL;
  KV_OK(mpiar_kv_create(MPI_COMM_WORLD, &o, &kv));
  for (int k = 0; k < NKEYS; k++) {
    size_t bytes = count_of(k) * mpiar_dtype_size(dtype_of(k));
    void *v = calloc(bytes + 8, 1);
    KV_OK(mpiar_kv_init(kv, MPIAR_KV_INT(k), dtype_of(k), count_of(k), v));
    free(v);
  }
  return kv;
}

/* Per-key blocking pushpull: the reference. */
static void **reference(int step) {
  mpiar_kv_t *kv = make_store(0);
  void **out = calloc(NKEYS, sizeof *out);
  for (int k = 0; k < NKEYS; k++) {
    size_t bytes = count_of(k) * mpiar_dtype_size(dtype_of(k));
    out[k] = malloc(bytes + 8);
    grad(out[k], k, step);
    KV_OK(mpiar_kv_pushpull(kv, MPIAR_KV_INT(k), MPIAR_IN_PLACE, out[k]));
  }
  KV_OK(mpiar_kv_destroy(kv));
  return out;
}

/* The backward pass: keys in reverse order, priority -k (the first layer is needed first). */
static void run(size_t fusion, int mode, int step, void **want) {
  mpiar_kv_t *kv = make_store(fusion);
  void *ins[NKEYS], *outs[NKEYS];
  mpiar_request_t reqs[NKEYS];
  for (int k = NKEYS - 1; k >= 0; k--) {
    size_t bytes = count_of(k) * mpiar_dtype_size(dtype_of(k));
    ins[k] = malloc(bytes + 8);
    outs[k] = malloc(bytes + 8);
    grad(ins[k], k, step);
    /* Even keys in place, odd ones out of place; mode 2 lets wait_all complete everything. */
    const void *in = k % 2 == 0 ? MPIAR_IN_PLACE : ins[k];
    if (k % 2 == 0) {
      memcpy(outs[k], ins[k], bytes);
    }
    KV_OK(mpiar_kv_pushpull_async(kv, MPIAR_KV_INT(k), in, outs[k], -k,
                                  mode == 2 && k % 3 == 0 ? NULL : &reqs[k]));
    if (mode == 2 && k % 3 == 0) {
      reqs[k] = MPIAR_REQUEST_NULL;
    }
  }
  if (mode == 0) { /* wait on each in the order the update needs them (same on every worker) */
    for (int k = 0; k < NKEYS; k++) {
      KV_OK(mpiar_wait(&reqs[k]));
    }
  } else if (mode == 1) { /* all at once */
    KV_OK(mpiar_waitall(NKEYS, reqs));
  } else { /* wait_all, then the requests complete at once */
    KV_OK(mpiar_kv_wait_all(kv));
    for (int k = 0; k < NKEYS; k++) {
      int done = 0;
      KV_OK(mpiar_test(&reqs[k], &done));
      KV_EXPECT(done, "request of key %d not complete after wait_all", k);
    }
  }
  for (int k = 0; k < NKEYS; k++) {
    size_t bytes = count_of(k) * mpiar_dtype_size(dtype_of(k));
    KV_EXPECT(memcmp(outs[k], want[k], bytes) == 0,
              "fusion %zu mode %d: key %d differs from per-key pushpull", fusion, mode, k);
    free(ins[k]);
    free(outs[k]);
  }
  KV_OK(mpiar_kv_destroy(kv));
}

/* Higher priority starts first: queue small tensors, let the buffer fill, see the start order. */
static void check_priority_order(void) {
  mpiar_kv_t *kv = make_store((size_t)64 << 20);
  float *a = calloc(count_of(1), sizeof(float)), *b = calloc(count_of(2), sizeof(float));
  mpiar_request_t ra, rb;
  KV_OK(mpiar_kv_pushpull_async(kv, MPIAR_KV_INT(1), MPIAR_IN_PLACE, a, 1, &ra));
  KV_OK(mpiar_kv_pushpull_async(kv, MPIAR_KV_INT(2), MPIAR_IN_PLACE, b, 5, &rb));
  /* Both queued; waiting on one starts the queue: key 2 (priority 5, called second) first. */
  KV_EXPECT(mpiar__kv_async_queued(kv) == 2, "queued %zu", mpiar__kv_async_queued(kv));
  KV_OK(mpiar_wait(&ra));
  KV_OK(mpiar_wait(&rb));
  uint64_t order[4];
  size_t n = mpiar__kv_async_started(kv, order, 4);
  KV_EXPECT(n == 2 && order[0] == 1 && order[1] == 0, "start order %zu: %llu %llu", n,
            (unsigned long long)order[0], (unsigned long long)order[1]);
  free(a);
  free(b);
  KV_OK(mpiar_kv_destroy(kv));
}

/* A worker that gives another priority to a key: the agreement fails everywhere. */
static void check_mismatch(void) {
  if (size < 2) {
    return;
  }
  mpiar_kv_t *kv = make_store((size_t)64 << 20);
  float *a = calloc(count_of(1), sizeof(float));
  mpiar_request_t r;
  KV_OK(mpiar_kv_pushpull_async(kv, MPIAR_KV_INT(1), MPIAR_IN_PLACE, a, rank == 0 ? 3 : 4, &r));
  KV_EXPECT_RC(mpiar_wait(&r), MPIAR_ERR_MISMATCH);
  KV_EXPECT(r == MPIAR_REQUEST_NULL, "failed request not released");
  /* An unknown key is refused locally, and makes no request. */
  KV_EXPECT_RC(mpiar_kv_pushpull_async(kv, MPIAR_KV_INT(999), MPIAR_IN_PLACE, a, 0, &r),
               MPIAR_ERR_KEY_UNKNOWN);
  KV_EXPECT(r == MPIAR_REQUEST_NULL, "refused call made a request");
  free(a);
  KV_OK(mpiar_kv_destroy(kv));
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  algorithm = argc > 1 ? argv[1] : "default";
  long live = mpiar__inspect_requests_live();
  const size_t fusions[] = {0, 4096, 100000, (size_t)64 << 20};
  for (int step = 0; step < 2; step++) {
    void **want = reference(step);
    for (size_t f = 0; f < sizeof fusions / sizeof fusions[0]; f++) {
      for (int mode = 0; mode < 3; mode++) {
        run(fusions[f], mode, step, want);
      }
    }
    for (int k = 0; k < NKEYS; k++) {
      free(want[k]);
    }
    free(want);
  }
  check_priority_order();
  check_mismatch();
  KV_EXPECT(mpiar__inspect_requests_live() <= live + 64, "%ld requests live (was %ld)",
            mpiar__inspect_requests_live(), live);
  if (rank == 0) {
    printf("kv async on %d workers (%s): passed\n", size, algorithm);
  }
  MPI_Finalize();
  return 0;
}
