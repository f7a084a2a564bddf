/*
 * Node-shared fusion buffers (kvstore/shared.c): a store with them (the default) and one without
 * (MPIAR_KV_SHARED=0) give the same bits for blocking batches, step batches and asynchronous
 * pushpulls, of sum and avg, float32, float64 and int32, at fusion thresholds that pack several
 * tensors and leave one alone; the store allocates its buffers at a handful of points, not per
 * call; a store on three or more workers without reproducible mode keeps ordinary memory (the
 * zero-copy order would differ from its Rabenseifner's); MPIAR_KV_SHARED that differs between
 * workers fails the creation on every worker.
 *
 * The cases run without reproducible mode, and with it too when the first argument is "both"
 * (on two workers both modes take the same path).
 *
 *   test_kv_shared [both]
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/settings.h"
#include "kv_test.h"
#include "kvstore/kv_internal.h"
#include "mpiar_kv.h"

enum { NKEYS = 9, ROUNDS = 3 };

static int rank, size, reproducible, ints; /* ints: int32 keys too (sum stores) */

static size_t count_of(int k) {
  return k == 4 ? 70000 : (size_t)(k * 977 % 3001) + 1; /* key 4: 280 KB, alone at 256 KiB */
}
static mpiar_dtype_t dtype_of(int k) {
  return k % 3 == 1 ? MPIAR_FLOAT64 : (ints && k % 3 == 2 && k != 8 ? MPIAR_INT32 : MPIAR_FLOAT32);
}
static size_t bytes_of(int k) {
  return count_of(k) * mpiar_dtype_size(dtype_of(k));
}

static void fill(void *g, int k, int round) {
  for (size_t i = 0; i < count_of(k); i++) {
    double v = sin(0.61 * (double)i + 1.3 * k + 0.7 * round) * (1.0 + 0.37 * rank);
    switch (dtype_of(k)) {
    case MPIAR_FLOAT64:
      ((double *)g)[i] = v;
      break;
    case MPIAR_INT32:
      ((int32_t *)g)[i] = (int32_t)(v * 1000.0);
      break;
    default:
      ((float *)g)[i] = (float)v;
    }
  }
}

static void set_shared_env(const char *value) {
  if (value == NULL) {
    unsetenv("MPIAR_KV_SHARED");
  } else {
    setenv("MPIAR_KV_SHARED", value, 1);
  }
  mpiar__settings_reload();
}

static mpiar_kv_t *make_store(mpiar_op_t op, size_t fusion) {
  mpiar_kv_options_t o = MPIAR_KV_OPTIONS_INIT;
  o.fusion_bytes = fusion;
  o.op = op;
  o.reproducible = reproducible;
  o.timeout_ms = 60000;
  mpiar_kv_t *kv = NULL;
  KV_OK(mpiar_kv_create(MPI_COMM_WORLD, &o, &kv));
  for (int k = 0; k < NKEYS; k++) {
    void *v = calloc(bytes_of(k) + 8, 1);
    fill(v, k, -1);
    KV_OK(mpiar_kv_init(kv, MPIAR_KV_INT(k), dtype_of(k), count_of(k), v));
    free(v);
  }
  if (op == MPIAR_AVG) {
    KV_OK(mpiar_kv_set_optimizer(kv, &MPIAR_KV_SGD(0.05, 0.9, 1e-4)));
  }
  return kv;
}

/*
 * Round r on @p kv: a pushpull_batch of every key (outs[0]), asynchronous pushpulls of every key
 * with priorities (outs[1]), and, on the float keys of an avg store, a step_batch (outs[2]) whose
 * stored weights follow.
 */
static void run(mpiar_kv_t *kv, mpiar_op_t op, void **outs[3], int round) {
  mpiar_kv_key_t keys[NKEYS];
  const void *ins[NKEYS];
  for (int k = 0; k < NKEYS; k++) {
    keys[k] = MPIAR_KV_INT(k);
    fill(outs[0][k], k, round);
    ins[k] = MPIAR_IN_PLACE;
  }
  KV_OK(mpiar_kv_pushpull_batch(kv, NKEYS, keys, ins, outs[0]));
  mpiar_request_t req[NKEYS];
  for (int k = 0; k < NKEYS; k++) {
    fill(outs[1][k], k, round + 100);
    KV_OK(mpiar_kv_pushpull_async(kv, keys[k], outs[1][k], outs[1][k], (k * 5) % 3, &req[k]));
  }
  for (int k = NKEYS - 1; k >= 0; k--) {
    KV_OK(mpiar_wait(&req[k]));
  }
  if (op == MPIAR_AVG) {
    mpiar_kv_key_t fkeys[NKEYS];
    void *grads[NKEYS];
    size_t n = 0;
    for (int k = 0; k < NKEYS; k++) {
      if (dtype_of(k) != MPIAR_INT32) {
        fkeys[n] = keys[k];
        fill(outs[2][k], k, round + 200);
        grads[n++] = outs[2][k];
      }
    }
    KV_OK(mpiar_kv_step_batch(kv, n, fkeys, grads));
  }
}

static void **alloc_outs(void) {
  void **o = calloc(NKEYS, sizeof *o);
  for (int k = 0; k < NKEYS; k++) {
    o[k] = calloc(bytes_of(k) + 8, 1);
  }
  return o;
}

static void compare(mpiar_op_t op, size_t fusion) {
  int expect_shared = size >= 2 && (size <= 2 || reproducible);
  ints = op == MPIAR_SUM;
  set_shared_env(NULL);
  mpiar_kv_t *with = make_store(op, fusion);
  set_shared_env("0");
  mpiar_kv_t *without = make_store(op, fusion);
  set_shared_env(NULL);
  size_t allocs = 0;
  KV_EXPECT_EQ(mpiar__kv_shared_state(with, NULL), expect_shared);
  KV_EXPECT_EQ(mpiar__kv_shared_state(without, &allocs), 0);
  KV_EXPECT_EQ(allocs, 0);

  void **a[3] = {alloc_outs(), alloc_outs(), alloc_outs()};
  void **b[3] = {alloc_outs(), alloc_outs(), alloc_outs()};
  for (int r = 0; r < ROUNDS; r++) {
    run(with, op, a, r);
    run(without, op, b, r);
    for (int j = 0; j < 3; j++) {
      for (int k = 0; k < NKEYS; k++) {
        KV_EXPECT(memcmp(a[j][k], b[j][k], bytes_of(k)) == 0,
                  "round %d, part %d, key %d differs with and without shared buffers (op %s, "
                  "fusion %zu, %d workers)",
                  r, j, k, mpiar_op_name(op), fusion, size);
      }
    }
    for (int k = 0; k < NKEYS && op == MPIAR_AVG; k++) {
      const void *va = NULL, *vb = NULL;
      KV_OK(mpiar_kv_lookup(with, MPIAR_KV_INT(k), NULL, NULL, &va));
      KV_OK(mpiar_kv_lookup(without, MPIAR_KV_INT(k), NULL, NULL, &vb));
      KV_EXPECT(memcmp(va, vb, bytes_of(k)) == 0, "stored value of key %d differs", k);
    }
    mpiar__kv_shared_state(with, &allocs);
    /* The blocking batches' buffer and the asynchronous ring's slots, each allocated once (these
     * batches fit the first size, 1 MiB): 3 rounds start more fused batches than that. */
    KV_EXPECT(expect_shared ? allocs >= 2 && allocs <= 1 + MPIAR__KV_SHARED_RING : allocs == 0,
              "%zu allocations after round %d", allocs, r);
  }
  KV_OK(mpiar_kv_destroy(with));
  KV_OK(mpiar_kv_destroy(without));
  for (int j = 0; j < 3; j++) {
    for (int k = 0; k < NKEYS; k++) {
      free(a[j][k]);
      free(b[j][k]);
    }
    free(a[j]);
    free(b[j]);
  }
}

/* MPIAR_KV_SHARED=0 on the last worker only: the creation fails on every worker. */
static void differing_setting(void) {
  set_shared_env(rank == size - 1 ? "0" : NULL);
  mpiar_kv_options_t o = MPIAR_KV_OPTIONS_INIT;
  o.timeout_ms = 60000;
  mpiar_kv_t *kv = NULL;
  KV_EXPECT_RC(mpiar_kv_create(MPI_COMM_WORLD, &o, &kv), MPIAR_ERR_MISMATCH);
  KV_EXPECT(kv == NULL, "no store on failure");
  set_shared_env(NULL);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int modes = argc > 1 && strcmp(argv[1], "both") == 0 ? 2 : 1;
  for (reproducible = 0; reproducible < modes; reproducible++) {
    compare(MPIAR_AVG, 64 << 10);
    compare(MPIAR_SUM, 256 << 10);
  }
  if (size > 1) {
    differing_setting();
  }
  if (rank == 0) {
    printf("kv_shared: %d workers: the same bits with and without node-shared buffers\n", size);
  }
  MPI_Finalize();
  return 0;
}
