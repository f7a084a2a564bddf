/*
 * The kvstore's operations under MPI: init (worker 0's value everywhere), pushpull (sum and
 * average, in place and not), pushpull_batch against per-key pushpull on mixed dtypes and sizes
 * around the fusion threshold, broadcast, SGD with momentum and weight decay against a local
 * reference, step_batch against step, and a checkpoint round trip that resumes training bit for
 * bit. Every result is also checked to be bitwise identical on every worker.
 * argv[1]: the allreduce algorithm of the stores ("auto" for mpiar's choice, "default" to leave
 * the option unset).
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kv_test.h"
#include "kvstore/kv_internal.h"
#include "mpiar_kv.h"

static int rank, nranks;
static const char *algorithm;

static mpiar_kv_t *store(size_t fusion, mpiar_op_t op) {
  mpiar_kv_options_t o = MPIAR_KV_OPTIONS_INIT;
  o.fusion_bytes = fusion;
  o.op = op;
  /* "default" leaves the option unset: the store's own choice. */
  o.algorithm = strcmp(algorithm, "default") == 0 ? NULL : algorithm;
  mpiar_kv_t *kv = NULL;
  KV_OK(mpiar_kv_create(MPI_COMM_WORLD, &o, &kv));
  return kv;
}

static uint64_t fnv(const void *p, size_t n) {
  const unsigned char *b = p;
  uint64_t h = 0xCBF29CE484222325ull;
  for (size_t i = 0; i < n; i++) {
    h = (h ^ b[i]) * 0x100000001B3ull;
  }
  return h;
}

/* The bytes are the same on every worker (a hash compared with one MAX allreduce of h and ~h). */
static void expect_same_everywhere(const void *p, size_t n, const char *what) {
  uint64_t h[2];
  h[0] = fnv(p, n);
  h[1] = ~h[0];
  KV_OK(mpiar_allreduce(MPIAR_IN_PLACE, h, 2, MPIAR_UINT64, MPIAR_MAX, MPI_COMM_WORLD));
  KV_EXPECT(h[0] == ~h[1], "%s differs between workers", what);
}

static uint64_t rng;
static double urand(void) {
  return (double)(test_xorshift64(&rng) >> 11) / 9007199254740992.0;
}

static void test_basics(void) {
  mpiar_kv_t *kv = store(MPIAR_KV_FUSION_AUTO, MPIAR_SUM);
  int r = -1, n = -1;
  KV_OK(mpiar_kv_rank(kv, &r));
  KV_OK(mpiar_kv_num_workers(kv, &n));
  KV_EXPECT(r == rank && n == nranks, "rank %d of %d, expected %d of %d", r, n, rank, nranks);
  KV_OK(mpiar_kv_barrier(kv));

  /* init: worker 0's value becomes everyone's, in the store and in the caller's buffer. */
  float w[5];
  for (int i = 0; i < 5; i++) {
    w[i] = (float)(rank * 100 + i) + 0.5f;
  }
  KV_OK(mpiar_kv_init(kv, MPIAR_KV_INT(1), MPIAR_FLOAT32, 5, w));
  for (int i = 0; i < 5; i++) {
    KV_EXPECT(w[i] == (float)i + 0.5f, "init: w[%d] = %g", i, w[i]);
  }
  mpiar_dtype_t dt;
  size_t count = 0;
  const float *stored = NULL;
  KV_OK(mpiar_kv_lookup(kv, MPIAR_KV_INT(1), &dt, &count, (const void **)&stored));
  KV_EXPECT(dt == MPIAR_FLOAT32 && count == 5 && memcmp(stored, w, sizeof w) == 0, "lookup");
  double e[3] = {rank + 0.25, -rank - 0.5, 1e300};
  KV_OK(mpiar_kv_init(kv, MPIAR_KV_STR("emb"), MPIAR_FLOAT64, 3, e));
  KV_EXPECT(e[0] == 0.25 && e[1] == -0.5, "init of a string key");
  int64_t iv[4] = {rank, -rank, INT64_MAX - rank, 7};
  KV_OK(mpiar_kv_init(kv, MPIAR_KV_INT(-5), MPIAR_INT64, 4, iv));
  KV_OK(mpiar_kv_init(kv, MPIAR_KV_STR("empty"), MPIAR_INT8, 0, NULL));

  /* pushpull: exact sums of rank-valued data, three ways to say in place. */
  int64_t in[4] = {rank, 2 * rank, -3, rank == 0 ? INT64_MAX : 1}, out[4];
  KV_OK(mpiar_kv_pushpull(kv, MPIAR_KV_INT(-5), in, out));
  int64_t s = (int64_t)nranks * (nranks - 1) / 2;
  KV_EXPECT(out[0] == s && out[1] == 2 * s && out[2] == -3 * nranks, "pushpull sum");
  /* Integer sums wrap: INT64_MAX + (p - 1) wraps when p > 1. */
  KV_EXPECT(out[3] == (int64_t)((uint64_t)INT64_MAX + (uint64_t)(nranks - 1)), "wrapping sum");
  KV_EXPECT(in[0] == rank, "pushpull changed its input");
  KV_OK(mpiar_kv_pushpull(kv, MPIAR_KV_INT(-5), in, in));
  KV_EXPECT(in[0] == s && in[1] == 2 * s, "pushpull in == out");
  double d[3] = {rank + 0.5, 1, -2};
  KV_OK(mpiar_kv_pushpull(kv, MPIAR_KV_STR("emb"), MPIAR_IN_PLACE, d));
  KV_EXPECT(d[0] == s + 0.5 * nranks && d[1] == nranks && d[2] == -2.0 * nranks, "MPIAR_IN_PLACE");
  KV_OK(mpiar_kv_pushpull(kv, MPIAR_KV_STR("empty"), NULL, NULL));
  /* pushpull never changes the stored value. */
  KV_OK(mpiar_kv_lookup(kv, MPIAR_KV_INT(-5), NULL, NULL, (const void **)&stored));
  KV_EXPECT(((const int64_t *)(const void *)stored)[0] == 0, "pushpull changed the store");

  /* broadcast from the last worker. */
  float b[5] = {(float)rank, 1, 2, 3, (float)-rank};
  KV_OK(mpiar_kv_broadcast(kv, MPIAR_KV_INT(1), b, nranks - 1));
  KV_EXPECT(b[0] == (float)(nranks - 1) && b[4] == (float)-(nranks - 1), "broadcast value");
  KV_OK(mpiar_kv_lookup(kv, MPIAR_KV_INT(1), NULL, NULL, (const void **)&stored));
  KV_EXPECT(memcmp(stored, b, sizeof b) == 0, "broadcast did not update the store");
  KV_OK(mpiar_kv_destroy(kv));

  /* An averaging store. */
  kv = store(MPIAR_KV_FUSION_AUTO, MPIAR_AVG);
  float a[3] = {0, 0, 0};
  KV_OK(mpiar_kv_init(kv, MPIAR_KV_INT(0), MPIAR_FLOAT32, 3, a));
  float g[3] = {(float)rank, 2.0f * (float)rank, 1.0f};
  KV_OK(mpiar_kv_pushpull(kv, MPIAR_KV_INT(0), g, g));
  float avg = (float)(nranks - 1) / 2.0f;
  KV_EXPECT(g[0] == avg && g[1] == 2 * avg && g[2] == 1.0f, "average %g %g %g", g[0], g[1], g[2]);
  KV_OK(mpiar_kv_destroy(kv));
}

/* Batch: mixed dtypes and sizes around a 1000-byte threshold, against per-key pushpull. */
#define NB 40
static void test_batch(void) {
  static const mpiar_dtype_t types[] = {MPIAR_FLOAT32, MPIAR_FLOAT64, MPIAR_INT32, MPIAR_FLOAT16,
                                        MPIAR_BFLOAT16};
  int bitwise = nranks <= 2 || strcmp(algorithm, "default") == 0 ||
                strcmp(algorithm, "rabenseifner") == 0 ||
                strcmp(algorithm, "recursive_doubling") == 0;
  size_t fusions[] = {1000, 0, MPIAR_KV_FUSION_DEFAULT};
  for (size_t f = 0; f < sizeof fusions / sizeof fusions[0]; f++) {
    mpiar_kv_t *kv = store(fusions[f], MPIAR_SUM);
    mpiar_kv_key_t keys[NB + 2];
    mpiar_dtype_t dts[NB + 2];
    size_t counts[NB + 2], bytes[NB + 2];
    void *inb[NB + 2], *outb[NB + 2], *outp[NB + 2];
    char names[NB][16];
    rng = 0x1234567ull + (uint64_t)rank * 7919;
    for (int i = 0; i < NB; i++) {
      dts[i] = types[i % 5];
      counts[i] = (size_t)(1 + (i * 37) % 600);
      if (i % 2) {
        snprintf(names[i], sizeof names[i], "t%d", i);
        keys[i] = MPIAR_KV_STR(names[i]);
      } else {
        keys[i] = MPIAR_KV_INT(i);
      }
      bytes[i] = counts[i] * mpiar_dtype_size(dts[i]);
      inb[i] = calloc(1, bytes[i]);
      outb[i] = calloc(1, bytes[i]);
      outp[i] = calloc(1, bytes[i]);
      KV_EXPECT(inb[i] && outb[i] && outp[i], "allocation");
      KV_OK(mpiar_kv_init(kv, keys[i], dts[i], counts[i], inb[i]));
      for (size_t k = 0; k < counts[i]; k++) {
        double v = urand() * 2 - 1;
        switch (dts[i]) {
        case MPIAR_FLOAT32:
          ((float *)inb[i])[k] = (float)v;
          break;
        case MPIAR_FLOAT64:
          ((double *)inb[i])[k] = v * 1e3;
          break;
        case MPIAR_INT32:
          ((int32_t *)inb[i])[k] = (int32_t)(v * 2e9);
          break;
        default: /* 16-bit floats: any bit pattern of a finite value of modest size */
          ((uint16_t *)inb[i])[k] =
              (uint16_t)((dts[i] == MPIAR_FLOAT16 ? 0x3000 : 0x3E00) + (rng & 0x3FF));
          break;
        }
      }
    }
    /* The same key twice and an empty key also go through a batch. */
    keys[NB] = keys[3];
    dts[NB] = dts[3];
    counts[NB] = counts[3];
    bytes[NB] = bytes[3];
    inb[NB] = inb[3];
    outb[NB] = malloc(bytes[3]);
    outp[NB] = malloc(bytes[3]);
    KV_OK(mpiar_kv_init(kv, MPIAR_KV_STR("none"), MPIAR_FLOAT32, 0, NULL));
    keys[NB + 1] = MPIAR_KV_STR("none");
    bytes[NB + 1] = 0;
    inb[NB + 1] = outb[NB + 1] = outp[NB + 1] = NULL;
    int n = NB + 2;
    int differing = 0;

    const void *ins[NB + 2];
    for (int i = 0; i < n; i++) {
      ins[i] = inb[i];
    }
    KV_OK(mpiar_kv_pushpull_batch(kv, (size_t)n, keys, ins, outb));
    for (int i = 0; i < n; i++) {
      KV_OK(mpiar_kv_pushpull(kv, keys[i], inb[i], outp[i]));
    }
    for (int i = 0; i < n; i++) {
      char what[64];
      snprintf(what, sizeof what, "batch result %d (fusion %zu)", i, fusions[f]);
      expect_same_everywhere(outb[i], bytes[i], what);
      if (bitwise || dts[i] == MPIAR_INT32) {
        KV_EXPECT(bytes[i] == 0 || memcmp(outb[i], outp[i], bytes[i]) == 0,
                  "%s differs from per-key pushpull (%s x %zu)", what, mpiar_dtype_name(dts[i]),
                  counts[i]);
      } else if (dts[i] == MPIAR_FLOAT32 || dts[i] == MPIAR_FLOAT64) {
        differing += bytes[i] > 0 && memcmp(outb[i], outp[i], bytes[i]) != 0;
        for (size_t k = 0; k < counts[i]; k++) {
          double x = dts[i] == MPIAR_FLOAT32 ? ((float *)outb[i])[k] : ((double *)outb[i])[k];
          double y = dts[i] == MPIAR_FLOAT32 ? ((float *)outp[i])[k] : ((double *)outp[i])[k];
          KV_EXPECT(fabs(x - y) <= 1e-5 * (1 + fabs(y)), "%s[%zu]: %g vs %g", what, k, x, y);
        }
      }
    }
    if (!bitwise && rank == 0) {
      /* Informative: how often fusion changed the last bits where the order depends on position. */
      printf("fusion %zu: %d float tensors not bitwise equal to per-key pushpull (%s, %d ranks)\n",
             fusions[f], differing, algorithm, nranks);
    }
    /* In place: the outputs hold the inputs and ins[] says MPIAR_IN_PLACE. */
    for (int i = 0; i < NB; i++) {
      memcpy(outb[i], inb[i], bytes[i]);
      ins[i] = i % 3 == 0 ? MPIAR_IN_PLACE : outb[i];
    }
    KV_OK(mpiar_kv_pushpull_batch(kv, NB, keys, ins, outb));
    for (int i = 0; i < NB; i++) {
      if (bitwise || dts[i] == MPIAR_INT32) {
        KV_EXPECT(memcmp(outb[i], outp[i], bytes[i]) == 0, "in-place batch result %d", i);
      }
    }
    for (int i = 0; i <= NB; i++) {
      if (i < NB) {
        free(inb[i]);
      }
      free(outb[i]);
      free(outp[i]);
    }
    KV_OK(mpiar_kv_destroy(kv));
  }
}

/* SGD with momentum and weight decay, on averaged gradients that are exact. */
static void sgd_ref(float *w, float *m, const float *g, int n, float lr, float mom, float wd) {
  for (int i = 0; i < n; i++) {
    float gi = g[i] + wd * w[i];
    m[i] = mom * m[i] - lr * gi;
    w[i] = w[i] + m[i];
  }
}

static void grads(float *g, int n, int step, int r) {
  for (int i = 0; i < n; i++) {
    g[i] = (float)((r + 1) * (i + 1 + step)) * 0.25f;
  }
}

static void state(mpiar_kv_t *kv, mpiar_kv_key_t key, float *out, int n) {
  const void *p = NULL;
  KV_OK(mpiar_kv_lookup(kv, key, NULL, NULL, &p));
  memcpy(out, p, (size_t)n * sizeof(float));
}

static char dir[256];

static void test_optimizer_checkpoint(void) {
  enum { N = 33 };
  const float lr = 0.05f, mom = 0.9f, wd = 0.01f;
  mpiar_kv_t *kv = store(256, MPIAR_SUM);
  float w0[N], wref[N], mref[N] = {0}, g[N], gavg[N];
  for (int i = 0; i < N; i++) {
    w0[i] = (float)i * 0.125f - 1.0f + (float)rank; /* worker 0's value wins at init */
  }
  KV_OK(mpiar_kv_init(kv, MPIAR_KV_STR("w"), MPIAR_FLOAT32, N, w0));
  KV_OK(mpiar_kv_init(kv, MPIAR_KV_INT(2), MPIAR_FLOAT32, N, w0));
  memcpy(wref, w0, sizeof wref);
  KV_OK(mpiar_kv_set_optimizer(kv, &MPIAR_KV_SGD(lr, mom, wd)));
  float ws[N], wb[N];
  for (int step = 0; step < 3; step++) {
    grads(g, N, step, rank);
    float g2[N];
    memcpy(g2, g, sizeof g2);
    KV_OK(mpiar_kv_step(kv, MPIAR_KV_STR("w"), g));
    mpiar_kv_key_t k = MPIAR_KV_INT(2);
    void *gs[1] = {g2};
    KV_OK(mpiar_kv_step_batch(kv, 1, &k, gs));
    /* The average over workers is exact: sum_r (r+1) = p(p+1)/2, times a multiple of 1/4. */
    for (int i = 0; i < N; i++) {
      gavg[i] = (float)((double)(nranks + 1) / 2.0 * (double)(i + 1 + step) * 0.25);
    }
    KV_EXPECT(memcmp(g, gavg, sizeof g) == 0, "step %d: the averaged gradient", step);
    sgd_ref(wref, mref, gavg, N, lr, mom, wd);
    state(kv, MPIAR_KV_STR("w"), ws, N);
    state(kv, MPIAR_KV_INT(2), wb, N);
    KV_EXPECT(memcmp(ws, wref, sizeof ws) == 0,
              "step %d: weights differ from the reference (%g vs %g)", step, ws[0], wref[0]);
    KV_EXPECT(memcmp(wb, wref, sizeof wb) == 0, "step %d: step_batch differs from step", step);
    expect_same_everywhere(ws, sizeof ws, "weights after a step");
  }

  /* Checkpoint after 3 steps, train 2 more, load, train the same 2 again: the same bits. */
  char path[320];
  snprintf(path, sizeof path, "%s/opt.ckpt", dir);
  KV_OK(mpiar_kv_save(kv, path));
  float saved[N], after2[N], again[N];
  state(kv, MPIAR_KV_STR("w"), saved, N);
  for (int step = 3; step < 5; step++) {
    grads(g, N, step, rank);
    KV_OK(mpiar_kv_step(kv, MPIAR_KV_STR("w"), g));
  }
  state(kv, MPIAR_KV_STR("w"), after2, N);
  KV_EXPECT(memcmp(after2, saved, sizeof saved) != 0, "training did not move the weights");
  KV_OK(mpiar_kv_load(kv, path));
  state(kv, MPIAR_KV_STR("w"), again, N);
  KV_EXPECT(memcmp(again, saved, sizeof saved) == 0, "load did not restore the weights");
  for (int step = 3; step < 5; step++) {
    grads(g, N, step, rank);
    KV_OK(mpiar_kv_step(kv, MPIAR_KV_STR("w"), g));
  }
  state(kv, MPIAR_KV_STR("w"), again, N);
  KV_EXPECT(memcmp(again, after2, sizeof again) == 0, "resumed training differs (momentum lost?)");
  expect_same_everywhere(again, sizeof again, "weights after resuming");

  /* A fresh store with the same keys (other values) loads the file on every worker. */
  mpiar_kv_t *kv2 = store(MPIAR_KV_FUSION_AUTO, MPIAR_SUM);
  float z[N] = {0};
  KV_OK(mpiar_kv_init(kv2, MPIAR_KV_INT(2), MPIAR_FLOAT32, N, z));
  KV_OK(mpiar_kv_init(kv2, MPIAR_KV_STR("w"), MPIAR_FLOAT32, N, z));
  KV_OK(mpiar_kv_load(kv2, path));
  state(kv2, MPIAR_KV_STR("w"), again, N);
  KV_EXPECT(memcmp(again, saved, sizeof saved) == 0, "a fresh store did not load the weights");
  KV_OK(mpiar_kv_destroy(kv2));
  KV_OK(mpiar_kv_barrier(kv));
  if (rank == 0) {
    unlink(path);
  }
  KV_OK(mpiar_kv_destroy(kv));

  /* Plain SGD (no momentum) on float64. */
  kv = store(MPIAR_KV_FUSION_AUTO, MPIAR_SUM);
  double dw[4] = {1, 2, 3, 4}, dg[4];
  KV_OK(mpiar_kv_init(kv, MPIAR_KV_INT(9), MPIAR_FLOAT64, 4, dw));
  KV_OK(mpiar_kv_set_optimizer(kv, &MPIAR_KV_SGD(0.5, 0.0, 0.0)));
  for (int i = 0; i < 4; i++) {
    dg[i] = (double)rank;
  }
  KV_OK(mpiar_kv_step(kv, MPIAR_KV_INT(9), dg));
  const double *dv = NULL;
  KV_OK(mpiar_kv_lookup(kv, MPIAR_KV_INT(9), NULL, NULL, (const void **)&dv));
  double ga = (double)(nranks - 1) / 2.0;
  KV_EXPECT(dv[0] == 1 - 0.5 * ga && dv[3] == 4 - 0.5 * ga, "plain SGD on float64: %g", dv[0]);
  KV_OK(mpiar_kv_destroy(kv));
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  algorithm = argc > 1 ? argv[1] : "auto";
  char buf[256] = {0};
  if (rank == 0) {
    snprintf(buf, sizeof buf, "/tmp/mpiar_kv_ops_XXXXXX");
    KV_EXPECT(mkdtemp(buf) != NULL, "mkdtemp");
  }
  KV_OK(mpiar_bcast(buf, sizeof buf, MPIAR_UINT8, 0, MPI_COMM_WORLD));
  snprintf(dir, sizeof dir, "%s", buf);

  test_basics();
  test_batch();
  /* Again with the store's allreduces cut into pieces of 24 bytes (6 float32, 3 float64, 12
   * halves): the pieces must change no bit, fused or not. */
  size_t saved_chunk = mpiar__kv_chunk_bytes;
  mpiar__kv_chunk_bytes = 24;
  test_batch();
  mpiar__kv_chunk_bytes = saved_chunk;
  test_optimizer_checkpoint();

  if (rank == 0) {
    rmdir(dir);
    printf("kv ops (%s): all checks passed on %d workers\n", algorithm, nranks);
  }
  MPI_Finalize();
  return 0;
}
