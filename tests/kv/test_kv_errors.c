/*
 * Every bad input of the kvstore, one case per CTest entry (argv[1] names it, "all" runs all):
 * bad options, unknown keys, init twice, count and dtype mismatches between workers, NULL
 * buffers, a key registered on some workers only, mismatched calls, push/pull, bad optimizer
 * settings, bad broadcast roots, and corrupt or mismatched checkpoints. Each collective failure
 * must return an error on every worker (no hang) and leave the store usable and unchanged.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/settings.h"
#include "kv_test.h"
#include "kvstore/kv_internal.h"
#include "mpiar_kv.h"

static int rank, nranks;

static mpiar_kv_t *new_store(void) {
  mpiar_kv_t *kv = NULL;
  KV_OK(mpiar_kv_create(MPI_COMM_WORLD, NULL, &kv));
  return kv;
}

/* On worker `who` expect `here`, on the others MPIAR_ERR_MISMATCH naming that worker. */
static void expect_blame(int rc, int who, int here) {
  if (nranks == 1 || rank == who) {
    KV_EXPECT_RC(rc, here);
  } else {
    KV_EXPECT_RC(rc, MPIAR_ERR_MISMATCH);
    char want[32];
    snprintf(want, sizeof want, "worker %d", who);
    KV_EXPECT(strstr(mpiar_last_error(), want) != NULL, "detail '%s' does not name %s",
              mpiar_last_error(), want);
  }
}

/* The store still works: a pushpull of a fresh key gives the exact sum. */
static void expect_usable(mpiar_kv_t *kv, int64_t id) {
  int32_t v[3] = {rank, 1, -rank};
  KV_OK(mpiar_kv_init(kv, MPIAR_KV_INT(id), MPIAR_INT32, 3, v));
  v[0] = rank;
  v[2] = -rank;
  KV_OK(mpiar_kv_pushpull(kv, MPIAR_KV_INT(id), MPIAR_IN_PLACE, v));
  int32_t s = nranks * (nranks - 1) / 2;
  KV_EXPECT(v[0] == s && v[1] == nranks && v[2] == -s, "usable: %d %d %d", v[0], v[1], v[2]);
}

static void case_options(void) {
  mpiar_kv_t *kv = NULL;
  mpiar_kv_options_t o = MPIAR_KV_OPTIONS_INIT;
  KV_EXPECT_RC(mpiar_kv_create(MPI_COMM_WORLD, NULL, NULL), MPIAR_ERR_INVALID_ARG);
  KV_EXPECT_RC(mpiar_kv_create(MPI_COMM_NULL, NULL, &kv), MPIAR_ERR_COMM);
  o.op = MPIAR_MAX;
  KV_EXPECT_RC(mpiar_kv_create(MPI_COMM_WORLD, &o, &kv), MPIAR_ERR_INVALID_ARG);
  KV_EXPECT(kv == NULL, "a failed create returned a store");
  o = (mpiar_kv_options_t)MPIAR_KV_OPTIONS_INIT;
  o.verify = 2;
  KV_EXPECT_RC(mpiar_kv_create(MPI_COMM_WORLD, &o, &kv), MPIAR_ERR_INVALID_ARG);
  o = (mpiar_kv_options_t)MPIAR_KV_OPTIONS_INIT;
  o.algorithm = "no_such_algorithm";
  KV_EXPECT_RC(mpiar_kv_create(MPI_COMM_WORLD, &o, &kv), MPIAR_ERR_UNKNOWN_ALGORITHM);
  o.algorithm = "recursive_multiplying/k=9"; /* out of the entry's range */
  KV_EXPECT_RC(mpiar_kv_create(MPI_COMM_WORLD, &o, &kv), MPIAR_ERR_UNKNOWN_ALGORITHM);
  o.algorithm = "recursive_multiplying/k=3"; /* a parameterised name is an algorithm */
  KV_OK(mpiar_kv_create(MPI_COMM_WORLD, &o, &kv));
  KV_OK(mpiar_kv_destroy(kv));
  kv = NULL;

  /* MPIAR_FUSION_BYTES: malformed is an error naming it; well formed sets the threshold. */
  setenv("MPIAR_FUSION_BYTES", "12Q", 1);
  mpiar__settings_reload(); /* settings are read once per process */
  KV_EXPECT_RC(mpiar_kv_create(MPI_COMM_WORLD, NULL, &kv), MPIAR_ERR_ENV);
  KV_EXPECT(strstr(mpiar_last_error(), "MPIAR_FUSION_BYTES") != NULL, "detail: %s",
            mpiar_last_error());
  setenv("MPIAR_FUSION_BYTES", "-5", 1);
  mpiar__settings_reload(); /* settings are read once per process */
  KV_EXPECT_RC(mpiar_kv_create(MPI_COMM_WORLD, NULL, &kv), MPIAR_ERR_ENV);
  setenv("MPIAR_FUSION_BYTES", "3K", 1);
  mpiar__settings_reload(); /* settings are read once per process */
  KV_OK(mpiar_kv_create(MPI_COMM_WORLD, NULL, &kv));
  size_t fb = 0;
  KV_OK(mpiar_kv_fusion_bytes(kv, &fb));
  KV_EXPECT_EQ(fb, 3072);
  KV_OK(mpiar_kv_destroy(kv));
  /* An explicit threshold wins over the environment. */
  o = (mpiar_kv_options_t)MPIAR_KV_OPTIONS_INIT;
  o.fusion_bytes = 0;
  KV_OK(mpiar_kv_create(MPI_COMM_WORLD, &o, &kv));
  KV_OK(mpiar_kv_fusion_bytes(kv, &fb));
  KV_EXPECT_EQ(fb, 0);
  KV_OK(mpiar_kv_destroy(kv));
  unsetenv("MPIAR_FUSION_BYTES");
  mpiar__settings_reload(); /* settings are read once per process */
  KV_OK(mpiar_kv_create(MPI_COMM_WORLD, NULL, &kv));
  KV_OK(mpiar_kv_fusion_bytes(kv, &fb));
  KV_EXPECT_EQ(fb, MPIAR_KV_FUSION_DEFAULT);
  KV_OK(mpiar_kv_destroy(kv));

  /* Options that shape the packing must agree: a different threshold on one worker fails. */
  o = (mpiar_kv_options_t)MPIAR_KV_OPTIONS_INIT;
  o.fusion_bytes = rank == nranks - 1 ? 4096 : 1024;
  int rc = mpiar_kv_create(MPI_COMM_WORLD, &o, &kv);
  if (nranks > 1) {
    KV_EXPECT_RC(rc, MPIAR_ERR_MISMATCH);
    KV_EXPECT(kv == NULL, "a failed create returned a store");
  } else {
    KV_OK(rc);
    KV_OK(mpiar_kv_destroy(kv));
  }
  KV_OK(mpiar_kv_destroy(NULL));
  /* Calls on a NULL store fail without communicating. */
  int r = 0;
  KV_EXPECT_RC(mpiar_kv_rank(NULL, &r), MPIAR_ERR_INVALID_ARG);
  KV_EXPECT_RC(mpiar_kv_num_workers(NULL, &r), MPIAR_ERR_INVALID_ARG);
  KV_EXPECT_RC(mpiar_kv_barrier(NULL), MPIAR_ERR_INVALID_ARG);
  KV_EXPECT_RC(mpiar_kv_pushpull(NULL, MPIAR_KV_INT(1), &r, &r), MPIAR_ERR_INVALID_ARG);
}

static void case_unknown_key(void) {
  mpiar_kv_t *kv = new_store();
  float w[4] = {1, 2, 3, 4}, g[4] = {0};
  KV_OK(mpiar_kv_init(kv, MPIAR_KV_STR("w"), MPIAR_FLOAT32, 4, w));
  KV_OK(mpiar_kv_set_optimizer(kv, &MPIAR_KV_SGD(0.1, 0.0, 0.0)));
  KV_EXPECT_RC(mpiar_kv_pushpull(kv, MPIAR_KV_INT(7), g, g), MPIAR_ERR_KEY_UNKNOWN);
  KV_EXPECT(strstr(mpiar_last_error(), "7") != NULL, "detail: %s", mpiar_last_error());
  /* The string "w" and the integer keys are distinct. */
  KV_EXPECT_RC(mpiar_kv_pushpull(kv, MPIAR_KV_STR("W"), g, g), MPIAR_ERR_KEY_UNKNOWN);
  mpiar_kv_key_t keys[2] = {MPIAR_KV_STR("w"), MPIAR_KV_INT(7)};
  const void *ins[2] = {g, g};
  void *outs[2] = {g, g};
  KV_EXPECT_RC(mpiar_kv_pushpull_batch(kv, 2, keys, ins, outs), MPIAR_ERR_KEY_UNKNOWN);
  KV_EXPECT(strstr(mpiar_last_error(), "key 1 of 2") != NULL, "detail: %s", mpiar_last_error());
  KV_EXPECT_RC(mpiar_kv_broadcast(kv, MPIAR_KV_INT(7), g, 0), MPIAR_ERR_KEY_UNKNOWN);
  KV_EXPECT_RC(mpiar_kv_step(kv, MPIAR_KV_INT(7), g), MPIAR_ERR_KEY_UNKNOWN);
  KV_EXPECT_RC(mpiar_kv_step_batch(kv, 2, keys, outs), MPIAR_ERR_KEY_UNKNOWN);
  KV_EXPECT_RC(mpiar_kv_lookup(kv, MPIAR_KV_INT(7), NULL, NULL, NULL), MPIAR_ERR_KEY_UNKNOWN);
  /* A string key longer than the limit is refused by name. */
  char *longkey = malloc(MPIAR_KV_KEY_MAX + 2);
  memset(longkey, 'k', MPIAR_KV_KEY_MAX + 1);
  longkey[MPIAR_KV_KEY_MAX + 1] = '\0';
  KV_EXPECT_RC(mpiar_kv_init(kv, MPIAR_KV_STR(longkey), MPIAR_FLOAT32, 4, w),
               MPIAR_ERR_INVALID_ARG);
  free(longkey);
  expect_usable(kv, 100);
  KV_OK(mpiar_kv_destroy(kv));
}

static void case_init_twice(void) {
  mpiar_kv_t *kv = new_store();
  double v[2] = {1.5, 2.5}, other[3] = {9, 9, 9};
  KV_OK(mpiar_kv_init(kv, MPIAR_KV_INT(1), MPIAR_FLOAT64, 2, v));
  KV_EXPECT_RC(mpiar_kv_init(kv, MPIAR_KV_INT(1), MPIAR_FLOAT64, 2, other), MPIAR_ERR_KEY_EXISTS);
  KV_EXPECT_RC(mpiar_kv_init(kv, MPIAR_KV_INT(1), MPIAR_FLOAT32, 3, other), MPIAR_ERR_KEY_EXISTS);
  const double *stored = NULL;
  size_t count = 0;
  KV_OK(mpiar_kv_lookup(kv, MPIAR_KV_INT(1), NULL, &count, (const void **)&stored));
  KV_EXPECT(count == 2 && stored[0] == 1.5 && stored[1] == 2.5, "the second init changed the key");
  KV_EXPECT(other[0] == 9, "a failed init wrote the caller's buffer");
  expect_usable(kv, 100);
  KV_OK(mpiar_kv_destroy(kv));
}

static void case_count_mismatch(void) {
  mpiar_kv_t *kv = new_store();
  float v[8] = {0};
  int rc = mpiar_kv_init(kv, MPIAR_KV_STR("c"), MPIAR_FLOAT32, (size_t)(4 + rank), v);
  if (nranks > 1) {
    KV_EXPECT_RC(rc, MPIAR_ERR_MISMATCH);
    KV_EXPECT_RC(mpiar_kv_lookup(kv, MPIAR_KV_STR("c"), NULL, NULL, NULL), MPIAR_ERR_KEY_UNKNOWN);
  } else {
    KV_OK(rc);
  }
  KV_EXPECT_RC(mpiar_kv_init(kv, MPIAR_KV_STR("huge"), MPIAR_FLOAT64, SIZE_MAX / 4, v),
               MPIAR_ERR_INVALID_ARG);
  expect_usable(kv, 100);
  KV_OK(mpiar_kv_destroy(kv));
}

static void case_dtype_mismatch(void) {
  mpiar_kv_t *kv = new_store();
  double v[4] = {0};
  int rc = mpiar_kv_init(kv, MPIAR_KV_STR("d"), rank % 2 ? MPIAR_FLOAT32 : MPIAR_INT32, 4, v);
  if (nranks > 1) {
    KV_EXPECT_RC(rc, MPIAR_ERR_MISMATCH);
  } else {
    KV_OK(rc);
  }
  KV_EXPECT_RC(mpiar_kv_init(kv, MPIAR_KV_STR("x"), MPIAR__DTYPE_COUNT, 4, v),
               MPIAR_ERR_INVALID_ARG);
  KV_EXPECT_RC(mpiar_kv_init(kv, MPIAR_KV_STR("y"), (mpiar_dtype_t)-1, 4, v),
               MPIAR_ERR_INVALID_ARG);
  KV_OK(mpiar_kv_destroy(kv));

  /* Averaging is defined on floating types only. */
  mpiar_kv_options_t o = MPIAR_KV_OPTIONS_INIT;
  o.op = MPIAR_AVG;
  KV_OK(mpiar_kv_create(MPI_COMM_WORLD, &o, &kv));
  int32_t iv[4] = {1, 2, 3, 4};
  KV_OK(mpiar_kv_init(kv, MPIAR_KV_INT(5), MPIAR_INT32, 4, iv));
  KV_EXPECT_RC(mpiar_kv_pushpull(kv, MPIAR_KV_INT(5), iv, iv), MPIAR_ERR_BAD_DTYPE_OP);
  KV_OK(mpiar_kv_destroy(kv));
}

static void case_null_buffers(void) {
  mpiar_kv_t *kv = new_store();
  float v[3] = {1, 2, 3};
  KV_EXPECT_RC(mpiar_kv_init(kv, MPIAR_KV_INT(1), MPIAR_FLOAT32, 3, NULL), MPIAR_ERR_NULL_BUFFER);
  KV_OK(mpiar_kv_init(kv, MPIAR_KV_INT(0), MPIAR_FLOAT32, 0, NULL));
  KV_OK(mpiar_kv_pushpull(kv, MPIAR_KV_INT(0), NULL, NULL));
  KV_OK(mpiar_kv_init(kv, MPIAR_KV_INT(1), MPIAR_FLOAT32, 3, v));
  KV_EXPECT_RC(mpiar_kv_pushpull(kv, MPIAR_KV_INT(1), NULL, v), MPIAR_ERR_NULL_BUFFER);
  KV_EXPECT_RC(mpiar_kv_pushpull(kv, MPIAR_KV_INT(1), v, NULL), MPIAR_ERR_NULL_BUFFER);
  KV_EXPECT_RC(mpiar_kv_pushpull(kv, MPIAR_KV_INT(1), MPIAR_IN_PLACE, NULL), MPIAR_ERR_NULL_BUFFER);
  mpiar_kv_key_t keys[2] = {MPIAR_KV_INT(1), MPIAR_KV_INT(0)};
  const void *ins[2] = {v, NULL};
  void *outs[2] = {v, NULL};
  KV_EXPECT_RC(mpiar_kv_pushpull_batch(kv, 2, NULL, ins, outs), MPIAR_ERR_NULL_BUFFER);
  KV_EXPECT_RC(mpiar_kv_pushpull_batch(kv, 2, keys, NULL, outs), MPIAR_ERR_NULL_BUFFER);
  KV_EXPECT_RC(mpiar_kv_pushpull_batch(kv, 2, keys, ins, NULL), MPIAR_ERR_NULL_BUFFER);
  KV_OK(mpiar_kv_pushpull_batch(kv, 0, NULL, NULL, NULL));
  KV_OK(mpiar_kv_pushpull_batch(kv, 2, keys, ins, outs)); /* key 0 is empty: NULL is fine */
  outs[0] = NULL;
  KV_EXPECT_RC(mpiar_kv_pushpull_batch(kv, 2, keys, ins, outs), MPIAR_ERR_NULL_BUFFER);
  KV_EXPECT_RC(mpiar_kv_broadcast(kv, MPIAR_KV_INT(1), NULL, 0), MPIAR_ERR_NULL_BUFFER);
  KV_OK(mpiar_kv_set_optimizer(kv, &MPIAR_KV_SGD(0.5, 0.0, 0.0)));
  KV_EXPECT_RC(mpiar_kv_step(kv, MPIAR_KV_INT(1), NULL), MPIAR_ERR_NULL_BUFFER);
  KV_EXPECT_RC(mpiar_kv_save(kv, NULL), MPIAR_ERR_NULL_BUFFER);
  KV_EXPECT_RC(mpiar_kv_load(kv, NULL), MPIAR_ERR_NULL_BUFFER);
  /* NULL on one worker only: that worker names the problem, the others name that worker. */
  int who = nranks - 1;
  expect_blame(mpiar_kv_pushpull(kv, MPIAR_KV_INT(1), rank == who ? NULL : v, v), who,
               MPIAR_ERR_NULL_BUFFER);
  expect_blame(mpiar_kv_init(kv, MPIAR_KV_INT(2), MPIAR_FLOAT32, 3, rank == who ? NULL : v), who,
               MPIAR_ERR_NULL_BUFFER);
  KV_EXPECT_RC(mpiar_kv_lookup(kv, MPIAR_KV_INT(2), NULL, NULL, NULL), MPIAR_ERR_KEY_UNKNOWN);
  expect_usable(kv, 100);
  KV_OK(mpiar_kv_destroy(kv));
}

/* Register a key on this worker only, behind the store's back, as a buggy program could. */
static void register_here(mpiar_kv_t *kv, mpiar_kv_key_t key) {
  mpiar__kv_entry_t *e = mpiar__kv_entry_new(key, MPIAR_FLOAT32, 4);
  KV_EXPECT(e != NULL && (e->value = calloc(4, sizeof(float))) != NULL, "allocation");
  KV_OK(mpiar__kv_table_reserve(&kv->table));
  mpiar__kv_table_insert(&kv->table, e);
}

static void case_partial_key(void) {
  mpiar_kv_t *kv = new_store();
  float v[4] = {1, 2, 3, 4};
  /* Initialising a key on some workers while the others initialise another: no key anywhere. */
  int rc = mpiar_kv_init(kv, MPIAR_KV_STR(rank == 0 ? "p0" : "p1"), MPIAR_FLOAT32, 4, v);
  if (nranks > 1) {
    KV_EXPECT_RC(rc, MPIAR_ERR_MISMATCH);
    KV_EXPECT_RC(mpiar_kv_lookup(kv, MPIAR_KV_STR("p0"), NULL, NULL, NULL), MPIAR_ERR_KEY_UNKNOWN);
    KV_EXPECT_RC(mpiar_kv_lookup(kv, MPIAR_KV_STR("p1"), NULL, NULL, NULL), MPIAR_ERR_KEY_UNKNOWN);
  } else {
    KV_OK(rc);
  }
  /* A key present on worker 0 only: every collective on it fails everywhere, none hangs. */
  KV_OK(mpiar_kv_set_optimizer(kv, &MPIAR_KV_SGD(0.5, 0.9, 0.0)));
  if (rank == 0) {
    register_here(kv, MPIAR_KV_STR("only0"));
  }
  if (nranks > 1) {
    mpiar_kv_key_t k = MPIAR_KV_STR("only0");
    const void *ins[1] = {v};
    void *outs[1] = {v};
    int rcs[4];
    rcs[0] = mpiar_kv_pushpull(kv, k, v, v);
    rcs[1] = mpiar_kv_broadcast(kv, k, v, 0);
    rcs[2] = mpiar_kv_step(kv, k, v);
    rcs[3] = mpiar_kv_pushpull_batch(kv, 1, &k, ins, outs);
    for (int i = 0; i < 4; i++) {
      /* Worker 0 has the key and blames the highest worker lacking it. */
      if (rank == 0) {
        KV_EXPECT_RC(rcs[i], MPIAR_ERR_MISMATCH);
      } else {
        KV_EXPECT_RC(rcs[i], MPIAR_ERR_KEY_UNKNOWN);
      }
    }
    char want[32];
    snprintf(want, sizeof want, "worker %d", nranks - 1);
    KV_EXPECT(rank != 0 || strstr(mpiar_last_error(), want) != NULL, "detail: %s",
              mpiar_last_error());
    /* The stores differ, so saving and loading refuse before touching a file. */
    KV_EXPECT_RC(mpiar_kv_save(kv, "/nonexistent-dir/never-written.ckpt"), MPIAR_ERR_MISMATCH);
  }
  if (rank != 0) {
    register_here(kv, MPIAR_KV_STR("only0"));
  }
  expect_usable(kv, 100);
  KV_OK(mpiar_kv_destroy(kv));
}

static void case_call_mismatch(void) {
  if (nranks == 1) {
    return;
  }
  mpiar_kv_t *kv = new_store();
  float a[4] = {1, 2, 3, 4}, b[4] = {5, 6, 7, 8};
  KV_OK(mpiar_kv_init(kv, MPIAR_KV_STR("a"), MPIAR_FLOAT32, 4, a));
  KV_OK(mpiar_kv_init(kv, MPIAR_KV_STR("b"), MPIAR_FLOAT32, 4, b));
  float g[4] = {1, 1, 1, 1};
  /* Different keys of the same shape, a different call, a different order in a batch. */
  KV_EXPECT_RC(mpiar_kv_pushpull(kv, MPIAR_KV_STR(rank == 0 ? "a" : "b"), g, g),
               MPIAR_ERR_MISMATCH);
  KV_EXPECT(g[0] == 1, "a failed pushpull wrote the output");
  KV_EXPECT_RC(rank == 0 ? mpiar_kv_pushpull(kv, MPIAR_KV_STR("a"), g, g)
                         : mpiar_kv_broadcast(kv, MPIAR_KV_STR("a"), g, 0),
               MPIAR_ERR_MISMATCH);
  mpiar_kv_key_t ab[2] = {MPIAR_KV_STR("a"), MPIAR_KV_STR("b")};
  mpiar_kv_key_t ba[2] = {MPIAR_KV_STR("b"), MPIAR_KV_STR("a")};
  float g2[4] = {1, 1, 1, 1};
  const void *ins[2] = {g, g2};
  void *outs[2] = {g, g2};
  KV_EXPECT_RC(mpiar_kv_pushpull_batch(kv, 2, rank == 0 ? ab : ba, ins, outs), MPIAR_ERR_MISMATCH);
  expect_usable(kv, 100);
  KV_OK(mpiar_kv_destroy(kv));
}

static void case_push_pull(void) {
  mpiar_kv_t *kv = new_store();
  float v[2] = {1, 2};
  KV_OK(mpiar_kv_init(kv, MPIAR_KV_INT(1), MPIAR_FLOAT32, 2, v));
  const char *want = "the allreduce kvstore has no push/pull; use pushpull";
  KV_EXPECT_RC(mpiar_kv_push(kv, MPIAR_KV_INT(1), v), MPIAR_ERR_UNSUPPORTED);
  KV_EXPECT(strcmp(mpiar_last_error(), want) == 0, "push detail: '%s'", mpiar_last_error());
  KV_EXPECT_RC(mpiar_kv_pull(kv, MPIAR_KV_INT(1), v), MPIAR_ERR_UNSUPPORTED);
  KV_EXPECT(strcmp(mpiar_last_error(), want) == 0, "pull detail: '%s'", mpiar_last_error());
  KV_EXPECT_RC(mpiar_kv_pull(kv, MPIAR_KV_STR("absent"), v), MPIAR_ERR_UNSUPPORTED);
  expect_usable(kv, 100);
  KV_OK(mpiar_kv_destroy(kv));
}

static void case_optimizer(void) {
  mpiar_kv_t *kv = new_store();
  float w[2] = {1, 2}, g[2] = {1, 1};
  int32_t iw[2] = {1, 2};
  uint16_t hw[2] = {0x3C00, 0x4000};
  KV_OK(mpiar_kv_init(kv, MPIAR_KV_INT(1), MPIAR_FLOAT32, 2, w));
  KV_OK(mpiar_kv_init(kv, MPIAR_KV_INT(2), MPIAR_INT32, 2, iw));
  KV_OK(mpiar_kv_init(kv, MPIAR_KV_INT(3), MPIAR_FLOAT16, 2, hw));
  KV_EXPECT_RC(mpiar_kv_step(kv, MPIAR_KV_INT(1), g), MPIAR_ERR_UNSUPPORTED);
  KV_EXPECT_RC(mpiar_kv_set_optimizer(kv, NULL), MPIAR_ERR_INVALID_ARG);
  KV_EXPECT_RC(mpiar_kv_set_optimizer(kv, &MPIAR_KV_SGD(0.0, 0.0, 0.0)), MPIAR_ERR_INVALID_ARG);
  KV_EXPECT_RC(mpiar_kv_set_optimizer(kv, &MPIAR_KV_SGD(-1.0, 0.0, 0.0)), MPIAR_ERR_INVALID_ARG);
  KV_EXPECT_RC(mpiar_kv_set_optimizer(kv, &MPIAR_KV_SGD(0.1 / 0.0, 0.0, 0.0)),
               MPIAR_ERR_INVALID_ARG);
  KV_EXPECT_RC(mpiar_kv_set_optimizer(kv, &MPIAR_KV_SGD(0.1, 1.0, 0.0)), MPIAR_ERR_INVALID_ARG);
  KV_EXPECT_RC(mpiar_kv_set_optimizer(kv, &MPIAR_KV_SGD(0.1, -0.5, 0.0)), MPIAR_ERR_INVALID_ARG);
  KV_EXPECT_RC(mpiar_kv_set_optimizer(kv, &MPIAR_KV_SGD(0.1, 0.0, -1.0)), MPIAR_ERR_INVALID_ARG);
  mpiar_kv_optimizer_t bad = {(mpiar_kv_optimizer_kind_t)7, 0.1, 0, 0};
  KV_EXPECT_RC(mpiar_kv_set_optimizer(kv, &bad), MPIAR_ERR_INVALID_ARG);
  /* Different hyper-parameters on one worker would make the weights drift apart. */
  int rc = mpiar_kv_set_optimizer(kv, &MPIAR_KV_SGD(rank == 0 ? 0.1 : 0.2, 0.0, 0.0));
  KV_EXPECT_RC(rc, nranks > 1 ? MPIAR_ERR_MISMATCH : MPIAR_SUCCESS);
  KV_OK(mpiar_kv_set_optimizer(kv, &MPIAR_KV_SGD(0.1, 0.9, 1e-4)));
  KV_EXPECT_RC(mpiar_kv_step(kv, MPIAR_KV_INT(2), iw), MPIAR_ERR_UNSUPPORTED);
  KV_EXPECT_RC(mpiar_kv_step(kv, MPIAR_KV_INT(3), hw), MPIAR_ERR_UNSUPPORTED);
  const float *stored = NULL;
  KV_OK(mpiar_kv_lookup(kv, MPIAR_KV_INT(1), NULL, NULL, (const void **)&stored));
  KV_EXPECT(stored[0] == 1 && stored[1] == 2, "a failed step changed the weights");
  KV_OK(mpiar_kv_step(kv, MPIAR_KV_INT(1), g));
  KV_OK(mpiar_kv_destroy(kv));
}

static void case_broadcast_root(void) {
  mpiar_kv_t *kv = new_store();
  float v[2] = {1, 2};
  KV_OK(mpiar_kv_init(kv, MPIAR_KV_INT(1), MPIAR_FLOAT32, 2, v));
  KV_EXPECT_RC(mpiar_kv_broadcast(kv, MPIAR_KV_INT(1), v, -1), MPIAR_ERR_INVALID_ARG);
  KV_EXPECT_RC(mpiar_kv_broadcast(kv, MPIAR_KV_INT(1), v, nranks), MPIAR_ERR_INVALID_ARG);
  if (nranks > 1) {
    KV_EXPECT_RC(mpiar_kv_broadcast(kv, MPIAR_KV_INT(1), v, rank == 0 ? 0 : 1), MPIAR_ERR_MISMATCH);
  }
  expect_usable(kv, 100);
  KV_OK(mpiar_kv_destroy(kv));
}

/* A temporary directory made by worker 0 and shared by name (all workers are on this node). */
static void shared_dir(char *dir, size_t size) {
  char buf[256] = {0};
  if (rank == 0) {
    snprintf(buf, sizeof buf, "/tmp/mpiar_kv_err_XXXXXX");
    KV_EXPECT(mkdtemp(buf) != NULL, "mkdtemp");
  }
  KV_OK(mpiar_bcast(buf, sizeof buf, MPIAR_UINT8, 0, MPI_COMM_WORLD));
  snprintf(dir, size, "%s", buf);
}

/* A store with two keys (one with momentum) for the checkpoint cases. */
static mpiar_kv_t *ckpt_store(void) {
  mpiar_kv_t *kv = new_store();
  float w[3] = {0.5f, -1.25f, 3.0f};
  int32_t c[2] = {7, -9};
  KV_OK(mpiar_kv_init(kv, MPIAR_KV_INT(1), MPIAR_FLOAT32, 3, w));
  KV_OK(mpiar_kv_init(kv, MPIAR_KV_STR("steps"), MPIAR_INT32, 2, c));
  KV_OK(mpiar_kv_set_optimizer(kv, &MPIAR_KV_SGD(0.25, 0.5, 0.0)));
  float g[3] = {1, 2, 4};
  KV_OK(mpiar_kv_step(kv, MPIAR_KV_INT(1), g));
  return kv;
}

static void snapshot(mpiar_kv_t *kv, unsigned char *out) {
  const void *d = NULL;
  KV_OK(mpiar_kv_lookup(kv, MPIAR_KV_INT(1), NULL, NULL, &d));
  memcpy(out, d, 12);
  KV_OK(mpiar_kv_lookup(kv, MPIAR_KV_STR("steps"), NULL, NULL, &d));
  memcpy(out + 12, d, 8);
  memcpy(out + 20, kv->table.items[0]->momentum, 12);
}

static void write_file(const char *path, const unsigned char *b, size_t len) {
  if (rank == 0) {
    FILE *f = fopen(path, "wb");
    KV_EXPECT(f != NULL && fwrite(b, 1, len, f) == len, "write %s", path);
    fclose(f);
  }
}

static void case_corrupt_checkpoint(void) {
  char dir[256], path[300], bad[300];
  shared_dir(dir, sizeof dir);
  snprintf(path, sizeof path, "%s/good.ckpt", dir);
  snprintf(bad, sizeof bad, "%s/bad.ckpt", dir);
  mpiar_kv_t *kv = ckpt_store();
  KV_OK(mpiar_kv_save(kv, path));
  unsigned char before[32], after[32];
  snapshot(kv, before);

  /* Worker 0 reads the good file; every corruption of it is written under the bad name. */
  unsigned char buf[1024];
  long len = 0;
  if (rank == 0) {
    FILE *f = fopen(path, "rb");
    KV_EXPECT(f != NULL, "open %s", path);
    len = (long)fread(buf, 1, sizeof buf, f);
    fclose(f);
  }
  KV_OK(mpiar_bcast(&len, 1, MPIAR_INT64, 0, MPI_COMM_WORLD));
  KV_EXPECT(len > 0 && len < (long)sizeof buf, "checkpoint of %ld bytes", len);

  /* A step between saving and loading, so that an accidental load would be visible. */
  float g[3] = {1, 1, 1};
  KV_OK(mpiar_kv_step(kv, MPIAR_KV_INT(1), g));
  snapshot(kv, before);

  unsigned char copy[1024];
  for (long pos = 0; pos < len; pos++) {
    memcpy(copy, buf, (size_t)len);
    copy[pos] ^= (unsigned char)(1u << (pos % 8));
    write_file(bad, copy, (size_t)len);
    int rc = mpiar_kv_load(kv, bad);
    KV_EXPECT(rc == MPIAR_ERR_CORRUPT, "byte %ld flipped: %s (%s)", pos, mpiar_err_name(rc),
              mpiar_last_error());
    if (rank != 0) {
      KV_EXPECT(strncmp(mpiar_last_error(), "worker 0: ", 10) == 0, "detail: %s",
                mpiar_last_error());
    }
    snapshot(kv, after);
    KV_EXPECT(memcmp(before, after, sizeof before) == 0,
              "byte %ld: a failed load changed the store", pos);
  }
  for (int e = 0; e < 8; e++) {
    write_file(bad, buf, (size_t)(len * e / 8));
    KV_EXPECT_RC(mpiar_kv_load(kv, bad), MPIAR_ERR_CORRUPT);
    snapshot(kv, after);
    KV_EXPECT(memcmp(before, after, sizeof before) == 0, "truncated: the store changed");
  }
  if (rank == 0) {
    unlink(bad);
  }
  KV_EXPECT_RC(mpiar_kv_load(kv, bad), MPIAR_ERR_IO);
  snapshot(kv, after);
  KV_EXPECT(memcmp(before, after, sizeof before) == 0, "missing file: the store changed");

  /* The good file still loads and restores the saved state. */
  KV_OK(mpiar_kv_load(kv, path));
  mpiar_kv_t *ref = ckpt_store();
  unsigned char want[32];
  snapshot(ref, want);
  snapshot(kv, after);
  KV_EXPECT(memcmp(want, after, sizeof want) == 0, "the load did not restore the saved state");
  KV_OK(mpiar_kv_destroy(ref));
  KV_OK(mpiar_kv_destroy(kv));
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) {
    unlink(path);
    rmdir(dir);
  }
}

static void case_mismatched_checkpoint(void) {
  char dir[256], path[300];
  shared_dir(dir, sizeof dir);
  snprintf(path, sizeof path, "%s/model.ckpt", dir);
  mpiar_kv_t *kv = ckpt_store();
  KV_OK(mpiar_kv_save(kv, path));
  KV_OK(mpiar_kv_destroy(kv));

  float w[4] = {1, 2, 3, 4};
  int32_t c[2] = {1, 2};
  double d[3] = {1, 2, 3};
  struct {
    const char *what;
    int shape; /* 0: key 1 has 4 elements; 1: key 1 is float64; 2: key "steps" missing and
                  another key present; 3: key "steps" missing (file has an extra key) */
  } cases[] = {{"count", 0}, {"dtype", 1}, {"other key", 2}, {"extra key", 3}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    kv = new_store();
    if (cases[i].shape == 0) {
      KV_OK(mpiar_kv_init(kv, MPIAR_KV_INT(1), MPIAR_FLOAT32, 4, w));
    } else if (cases[i].shape == 1) {
      KV_OK(mpiar_kv_init(kv, MPIAR_KV_INT(1), MPIAR_FLOAT64, 3, d));
    } else {
      KV_OK(mpiar_kv_init(kv, MPIAR_KV_INT(1), MPIAR_FLOAT32, 3, w));
    }
    if (cases[i].shape != 3) {
      KV_OK(mpiar_kv_init(kv, MPIAR_KV_STR(cases[i].shape == 2 ? "other" : "steps"), MPIAR_INT32, 2,
                          c));
    }
    const void *before = NULL;
    KV_OK(mpiar_kv_lookup(kv, MPIAR_KV_INT(1), NULL, NULL, &before));
    unsigned char keep[32];
    memcpy(keep, before, cases[i].shape == 0 ? 16 : cases[i].shape == 1 ? 24 : 12);
    int rc = mpiar_kv_load(kv, path);
    KV_EXPECT(rc == MPIAR_ERR_MISMATCH, "%s: %s (%s)", cases[i].what, mpiar_err_name(rc),
              mpiar_last_error());
    const void *now = NULL;
    KV_OK(mpiar_kv_lookup(kv, MPIAR_KV_INT(1), NULL, NULL, &now));
    KV_EXPECT(now == before && memcmp(keep, now, cases[i].shape == 0 ? 16 : 12) == 0,
              "%s: the store changed", cases[i].what);
    KV_OK(mpiar_kv_destroy(kv));
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) {
    unlink(path);
    rmdir(dir);
  }
}

static const struct {
  const char *name;
  void (*run)(void);
} cases[] = {
    {"options", case_options},
    {"unknown_key", case_unknown_key},
    {"init_twice", case_init_twice},
    {"count_mismatch", case_count_mismatch},
    {"dtype_mismatch", case_dtype_mismatch},
    {"null_buffers", case_null_buffers},
    {"partial_key", case_partial_key},
    {"call_mismatch", case_call_mismatch},
    {"push_pull", case_push_pull},
    {"optimizer", case_optimizer},
    {"broadcast_root", case_broadcast_root},
    {"corrupt_checkpoint", case_corrupt_checkpoint},
    {"mismatched_checkpoint", case_mismatched_checkpoint},
};

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  const char *which = argc > 1 ? argv[1] : "all";
  int ran = 0;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    if (strcmp(which, "all") == 0 || strcmp(which, cases[i].name) == 0) {
      cases[i].run();
      if (rank == 0) {
        printf("kv error case %s: passed on %d workers\n", cases[i].name, nranks);
      }
      ran++;
    }
  }
  KV_EXPECT(ran > 0, "unknown case '%s'", which);
  MPI_Finalize();
  return 0;
}
