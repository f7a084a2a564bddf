/*
 * Reproducible mode under MPI: with reproducible = 1, every algorithm, size, segment size,
 * in-place or not, blocking or nonblocking, whole vector or pieces of it, gives for every element
 * the bits of mpiar_reduce_canonical() over the ranks' inputs (which every rank can generate),
 * for f32, f64, f16 and bf16 with values over most of each type's range, and for NaN payloads,
 * infinities, subnormals and signed zeros. The kvstore fused and per-key with a named ring agree
 * in this mode. Without the mode, ring and Rabenseifner differ at p >= 3 (the control).
 *
 *   test_reproducible [--quick]
 */
#include <math.h>
#include <stdint.h>

#include "mpi_test.h"
#include "mpiar_kv.h"
#include "reduce_kernels/kernels.h"

static int rank, size, quick;

/* Element i of rank r's input: wide exponents, both signs; with @p special, NaN payloads naming
 * the rank, infinities, subnormals and zeros too. */
static void make_input(mpiar_dtype_t t, int r, size_t n, int special, void *out) {
  for (size_t i = 0; i < n; i++) {
    uint64_t h = test_mix64((uint64_t)r * 1000003u + i * 7919u + (uint64_t)t);
    double mant = (double)(h >> 11) / 9007199254740992.0 + 0.5;
    int range = t == MPIAR_FLOAT16 ? 12 : t == MPIAR_BFLOAT16 || t == MPIAR_FLOAT32 ? 60 : 300;
    int e = (int)((h >> 3) % (uint64_t)(2 * range)) - range;
    double v = ldexp(mant, e) * ((h & 1) ? -1 : 1);
    int kind = special ? (int)((h >> 40) % 16) : 15;
    switch (t) {
    case MPIAR_FLOAT32: {
      float f = (float)v;
      uint32_t bits;
      memcpy(&bits, &f, 4);
      if (kind == 0) bits = 0x7fc00000u | (uint32_t)(r + 1) << 8 | (uint32_t)(i & 0xff);
      if (kind == 1) bits = (h & 2) ? 0xff800000u : 0x7f800000u;
      if (kind == 2) bits = (uint32_t)(h >> 41) & 0x007fffffu;
      if (kind == 3) bits = (h & 2) ? 0x80000000u : 0;
      memcpy((char *)out + 4 * i, &bits, 4);
      break;
    }
    case MPIAR_FLOAT64: {
      uint64_t bits;
      memcpy(&bits, &v, 8);
      if (kind == 0) bits = 0x7ff8000000000000ull | (uint64_t)(r + 1) << 20 | (i & 0xff);
      if (kind == 1) bits = (h & 2) ? 0xfff0000000000000ull : 0x7ff0000000000000ull;
      if (kind == 2) bits = (h >> 12) & 0x000fffffffffffffull;
      if (kind == 3) bits = (h & 2) ? 0x8000000000000000ull : 0;
      memcpy((char *)out + 8 * i, &bits, 8);
      break;
    }
    default: {
      uint16_t bits =
          t == MPIAR_FLOAT16 ? mpiar__f32_to_f16((float)v) : mpiar__f32_to_bf16((float)v);
      uint16_t exp_mask = t == MPIAR_FLOAT16 ? 0x7c00 : 0x7f80;
      if (kind == 0) bits = (uint16_t)(exp_mask | 0x0040 | (uint16_t)((r + 1) & 0x1f));
      if (kind == 1) bits = (uint16_t)((h & 2) ? 0x8000 | exp_mask : exp_mask);
      if (kind == 2) bits = (uint16_t)((h >> 41) & (t == MPIAR_FLOAT16 ? 0x03ff : 0x007f));
      if (kind == 3) bits = (h & 2) ? 0x8000 : 0;
      memcpy((char *)out + 2 * i, &bits, 2);
      break;
    }
    }
  }
}

/* The canonical result of all ranks' inputs, computed here. */
static void *reference(mpiar_dtype_t t, mpiar_op_t op, size_t n, int special) {
  size_t es = mpiar_dtype_size(t);
  void **in = calloc((size_t)size, sizeof *in);
  for (int r = 0; r < size; r++) {
    in[r] = malloc(n * es + 1);
    make_input(t, r, n, special, in[r]);
  }
  void *want = malloc(n * es + 1);
  MT_RC(MPIAR_SUCCESS,
        mpiar_reduce_canonical(want, (const void *const *)in, size, n, t, op));
  for (int r = 0; r < size; r++) {
    free(in[r]);
  }
  free(in);
  return want;
}

static int cases;

/* One call (method 0 blocking, 1 nonblocking, 2 in 3 pieces) compared with @p want. */
static void one(const char *alg, size_t seg, mpiar_dtype_t t, mpiar_op_t op, size_t n,
                int in_place, int method, int special, const void *want) {
  size_t es = mpiar_dtype_size(t);
  unsigned char *send = malloc(n * es + 1), *recv = malloc(n * es + 1);
  make_input(t, rank, n, special, send);
  if (in_place) {
    memcpy(recv, send, n * es);
  }
  mpiar_options_t o = MPIAR_OPTIONS_INIT;
  o.algorithm = alg;
  o.segment_bytes = seg;
  o.reproducible = 1;
  o.timeout_ms = 60000;
  int rc = MPIAR_SUCCESS;
  if (method == 1) {
    mpiar_request_t r;
    rc = mpiar_iallreduce(in_place ? MPIAR_IN_PLACE : send, recv, n, t, op, MPI_COMM_WORLD, &o, &r);
    if (rc == MPIAR_SUCCESS) {
      rc = mpiar_wait(&r);
    }
  } else if (method == 2) {
    /* Pieces of the vector (as fusion and the kvstore's pieces cut it): the same bits. */
    size_t cuts[4] = {0, n / 3, n / 3 + n / 5 + 1, n};
    for (int k = 0; k < 3 && rc == MPIAR_SUCCESS; k++) {
      if (cuts[k + 1] <= cuts[k] || cuts[k + 1] > n) {
        continue;
      }
      size_t len = cuts[k + 1] - cuts[k];
      rc = mpiar_allreduce_ex(in_place ? MPIAR_IN_PLACE : send + cuts[k] * es,
                              recv + cuts[k] * es, len, t, op, MPI_COMM_WORLD, &o);
    }
  } else {
    rc = mpiar_allreduce_ex(in_place ? MPIAR_IN_PLACE : send, recv, n, t, op, MPI_COMM_WORLD, &o);
  }
  MT_CHECK(rc == MPIAR_SUCCESS, "%s seg %zu %s %s n %zu: %s", alg, seg, mpiar_dtype_name(t),
           mpiar_op_name(op), n, mpiar_last_error());
  if (rc == MPIAR_SUCCESS && memcmp(recv, want, n * es) != 0) {
    size_t i = 0;
    while (memcmp(recv + i * es, (const char *)want + i * es, es) == 0) {
      i++;
    }
    MT_CHECK(0, "%s seg %zu %s %s n %zu in_place %d method %d special %d: element %zu differs "
                "from the canonical result",
             alg, seg, mpiar_dtype_name(t), mpiar_op_name(op), n, in_place, method, special, i);
  }
  cases++;
  free(send);
  free(recv);
}

static void matrix(void) {
  const mpiar_dtype_t types[] = {MPIAR_FLOAT32, MPIAR_FLOAT64, MPIAR_FLOAT16, MPIAR_BFLOAT16};
  const mpiar_op_t ops[] = {MPIAR_SUM, MPIAR_AVG, MPIAR_PROD};
  size_t p = (size_t)size;
  const size_t counts[] = {0, 1, p + 1, 1009, quick ? 20011 : 150001};
  int nalg = mpiar_algorithm_count();
  for (size_t ti = 0; ti < 4; ti++) {
    for (size_t oi = 0; oi < 3; oi++) {
      if (ops[oi] == MPIAR_PROD && ti > 1) {
        continue; /* products of many halves overflow at once: sum and avg cover 16-bit types */
      }
      for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++) {
        size_t n = counts[ci];
        void *want = reference(types[ti], ops[oi], n, 0);
        for (int a = 0; a <= nalg; a++) {
          const char *alg = a < nalg ? mpiar_algorithm_name(a) : "auto";
          int segmented = strcmp(alg, "ring") == 0;
          const size_t segs[] = {0, 4096, 65536};
          for (int s = 0; s < (segmented ? 3 : 1); s++) {
            int v = (int)(ti + oi + ci + (size_t)a + (size_t)s);
            one(alg, segs[s], types[ti], ops[oi], n, v % 2, v % 3, 0, want);
          }
        }
        free(want);
      }
    }
  }
  /* NaN payloads, infinities, subnormals and zeros. */
  for (size_t ti = 0; ti < 4; ti++) {
    size_t n = 4099;
    void *want = reference(types[ti], MPIAR_SUM, n, 1);
    for (int a = 0; a <= nalg; a++) {
      const char *alg = a < nalg ? mpiar_algorithm_name(a) : "auto";
      one(alg, 0, types[ti], MPIAR_SUM, n, a % 2, a % 3, 1, want);
    }
    free(want);
  }
}

/* The kvstore: fused and per-key with a named ring agree with the canonical result. */
static void kvstore(void) {
  enum { NK = 6 };
  mpiar_kv_options_t o = MPIAR_KV_OPTIONS_INIT;
  o.algorithm = "ring";
  o.reproducible = 1;
  o.fusion_bytes = 64 << 10;
  mpiar_kv_t *kv = NULL;
  MT_RC(MPIAR_SUCCESS, mpiar_kv_create(MPI_COMM_WORLD, &o, &kv));
  size_t n[NK];
  float *in[NK], *fused[NK], *alone[NK];
  mpiar_kv_key_t keys[NK];
  for (int k = 0; k < NK; k++) {
    n[k] = (size_t)(k * 1777 % 9000) + 3;
    keys[k] = MPIAR_KV_INT(k);
    in[k] = malloc(n[k] * 4);
    fused[k] = malloc(n[k] * 4);
    alone[k] = malloc(n[k] * 4);
    make_input(MPIAR_FLOAT32, rank, n[k], 0, in[k]);
    MT_RC(MPIAR_SUCCESS, mpiar_kv_init(kv, keys[k], MPIAR_FLOAT32, n[k], alone[k]));
  }
  const void *ins[NK];
  void *outs[NK];
  for (int k = 0; k < NK; k++) {
    ins[k] = in[k];
    outs[k] = fused[k];
    MT_RC(MPIAR_SUCCESS, mpiar_kv_pushpull(kv, keys[k], in[k], alone[k]));
  }
  MT_RC(MPIAR_SUCCESS, mpiar_kv_pushpull_batch(kv, NK, keys, ins, outs));
  for (int k = 0; k < NK; k++) {
    void *want = reference(MPIAR_FLOAT32, MPIAR_SUM, n[k], 0);
    MT_CHECK(memcmp(alone[k], want, n[k] * 4) == 0, "kvstore key %d per key is not canonical", k);
    MT_CHECK(memcmp(fused[k], want, n[k] * 4) == 0, "kvstore key %d fused is not canonical", k);
    free(want);
    free(in[k]);
    free(fused[k]);
    free(alone[k]);
  }
  MT_RC(MPIAR_SUCCESS, mpiar_kv_destroy(kv));
}

/* Without the mode the ring's order depends on the position: at p >= 3 it differs somewhere. */
static void control(void) {
  if (size < 3) {
    return;
  }
  size_t n = 20000;
  float *a = malloc(n * 4), *b = malloc(n * 4);
  make_input(MPIAR_FLOAT32, rank, n, 0, a);
  memcpy(b, a, n * 4);
  mpiar_options_t o = MPIAR_OPTIONS_INIT;
  o.reproducible = 0;
  o.algorithm = "ring";
  MT_RC(MPIAR_SUCCESS, mpiar_allreduce_ex(MPIAR_IN_PLACE, a, n, MPIAR_FLOAT32, MPIAR_SUM,
                                          MPI_COMM_WORLD, &o));
  o.algorithm = "rabenseifner";
  MT_RC(MPIAR_SUCCESS, mpiar_allreduce_ex(MPIAR_IN_PLACE, b, n, MPIAR_FLOAT32, MPIAR_SUM,
                                          MPI_COMM_WORLD, &o));
  MT_CHECK(memcmp(a, b, n * 4) != 0, "ring and rabenseifner agree bit for bit without the mode");
  free(a);
  free(b);
}

int main(int argc, char **argv) {
  mt_init(&argc, &argv);
  rank = mt_rank;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
  matrix();
  kvstore();
  control();
  if (rank == 0) {
    printf("%d reproducible cases\n", cases);
  }
  return mt_finish("reproducible");
}
