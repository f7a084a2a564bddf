/*
 * mpiar_reduce_canonical(): argument errors, and every element against the documented order
 * evaluated literally, one element at a time with mpiar_reduce_local() (the recursion written as
 * in the header, independent of the library's stack evaluation), for 1..70, 100, 127, 128 and
 * 1000 ranks, every dtype and op, counts across the chunk boundary, special values, and dst
 * aliasing an input.
 */
#include "kernel_test_util.h"

/* y_i of the definition for element i: the fold of ranks 2i, 2i+1 for i < rem, else x_{i+rem}. */
static void leaf(unsigned char *out, const void *const *in, int p, int i, size_t e,
                 mpiar_dtype_t dt, mpiar_op_t op) {
  const size_t es = mpiar_dtype_size(dt);
  int pof2 = 1;
  while (pof2 * 2 <= p) {
    pof2 *= 2;
  }
  const int rem = p - pof2;
  if (i < rem) {
    CHECK(mpiar_reduce_local(out, (const unsigned char *)in[2 * i] + e * es,
                             (const unsigned char *)in[2 * i + 1] + e * es, 1, dt,
                             op) == MPIAR_SUCCESS);
  } else {
    memcpy(out, (const unsigned char *)in[i + rem] + e * es, es);
  }
}

/* Y(lo, hi) = Y(lo, mid) op Y(mid, hi), mid = (lo + hi) / 2, over the leaves. */
static void tree(unsigned char *out, const void *const *in, int p, int lo, int hi, size_t e,
                 mpiar_dtype_t dt, mpiar_op_t op) {
  if (hi - lo == 1) {
    leaf(out, in, p, lo, e, dt, op);
    return;
  }
  unsigned char a[8], b[8];
  tree(a, in, p, lo, (lo + hi) / 2, e, dt, op);
  tree(b, in, p, (lo + hi) / 2, hi, e, dt, op);
  CHECK(mpiar_reduce_local(out, a, b, 1, dt, op) == MPIAR_SUCCESS);
}

/* AVG: the canonical SUM divided once by p in the element type (16-bit types through f32). */
static void divide(unsigned char *v, mpiar_dtype_t dt, int p) {
  switch (dt) {
  case MPIAR_FLOAT64: {
    double x;
    memcpy(&x, v, 8);
    x = x / (double)p;
    memcpy(v, &x, 8);
    break;
  }
  case MPIAR_FLOAT32: {
    float x;
    memcpy(&x, v, 4);
    x = x / (float)p;
    memcpy(v, &x, 4);
    break;
  }
  default: {
    uint16_t h;
    memcpy(&h, v, 2);
    float x = dt == MPIAR_FLOAT16 ? mpiar__f16_to_f32(h) : mpiar__bf16_to_f32(h);
    x = x / (float)p;
    h = dt == MPIAR_FLOAT16 ? mpiar__f32_to_f16(x) : mpiar__f32_to_bf16(x);
    memcpy(v, &h, 2);
    break;
  }
  }
}

static void literal(unsigned char *out, const void *const *in, int p, size_t e, mpiar_dtype_t dt,
                    mpiar_op_t op) {
  const size_t es = mpiar_dtype_size(dt);
  if (p == 1) {
    memcpy(out, (const unsigned char *)in[0] + e * es, es);
    return;
  }
  int pof2 = 1;
  while (pof2 * 2 <= p) {
    pof2 *= 2;
  }
  tree(out, in, p, 0, pof2, e, dt, op == MPIAR_AVG ? MPIAR_SUM : op);
  if (op == MPIAR_AVG) {
    divide(out, dt, p);
  }
}

static void check_one(int p, size_t count, mpiar_dtype_t dt, mpiar_op_t op, int alias) {
  const size_t es = mpiar_dtype_size(dt);
  unsigned char *mem = malloc((size_t)p * count * es + 1), *got = malloc(count * es + 1);
  unsigned char *want = malloc(count * es + 1);
  const void **in = malloc((size_t)p * sizeof *in);
  if (!mem || !got || !want || !in) {
    fprintf(stderr, "out of memory\n");
    exit(2);
  }
  for (int r = 0; r < p; r++) {
    in[r] = mem + (size_t)r * count * es;
    fill_values(mem + (size_t)r * count * es, count, dt);
  }
  for (size_t e = 0; e < count; e++) {
    literal(want + e * es, in, p, e, dt, op);
  }
  /* alias: the result overwrites input 0 or the last input, as dst may be one of them. */
  void *dst = alias == 0 ? (void *)got : (void *)in[alias == 1 ? 0 : p - 1];
  int rc = mpiar_reduce_canonical(dst, in, p, count, dt, op);
  CHECK_EQ_HEX(rc, MPIAR_SUCCESS);
  for (size_t e = 0; e < count && rc == MPIAR_SUCCESS; e++) {
    if (memcmp((unsigned char *)dst + e * es, want + e * es, es) != 0) {
      uint64_t g = 0, w = 0;
      memcpy(&g, (unsigned char *)dst + e * es, es);
      memcpy(&w, want + e * es, es);
      fprintf(stderr, "p=%d count=%zu %s %s alias=%d: element %zu is 0x%llx, expected 0x%llx\n", p,
              count, mpiar_dtype_name(dt), mpiar_op_name(op), alias, e, (unsigned long long)g,
              (unsigned long long)w);
      failures++;
      break;
    }
  }
  free(mem);
  free(got);
  free(want);
  free(in);
}

static void check_errors(void) {
  float a[2] = {1, 2}, b[2] = {3, 4}, d[2];
  const void *in[2] = {a, b}, *holes[2] = {a, NULL};
  CHECK_EQ_HEX(mpiar_reduce_canonical(d, in, 0, 2, MPIAR_FLOAT32, MPIAR_SUM),
               MPIAR_ERR_INVALID_ARG);
  CHECK_EQ_HEX(mpiar_reduce_canonical(d, in, 2, 2, MPIAR__DTYPE_COUNT, MPIAR_SUM),
               MPIAR_ERR_INVALID_ARG);
  CHECK_EQ_HEX(mpiar_reduce_canonical(d, in, 2, 2, MPIAR_FLOAT32, MPIAR__OP_COUNT),
               MPIAR_ERR_INVALID_ARG);
  CHECK_EQ_HEX(mpiar_reduce_canonical(d, in, 2, 2, MPIAR_FLOAT32, MPIAR_BAND),
               MPIAR_ERR_BAD_DTYPE_OP);
  CHECK_EQ_HEX(mpiar_reduce_canonical(NULL, in, 2, 2, MPIAR_FLOAT32, MPIAR_SUM),
               MPIAR_ERR_NULL_BUFFER);
  CHECK_EQ_HEX(mpiar_reduce_canonical(d, NULL, 2, 2, MPIAR_FLOAT32, MPIAR_SUM),
               MPIAR_ERR_NULL_BUFFER);
  CHECK_EQ_HEX(mpiar_reduce_canonical(d, holes, 2, 2, MPIAR_FLOAT32, MPIAR_SUM),
               MPIAR_ERR_NULL_BUFFER);
  CHECK(strstr(mpiar_last_error(), "input 1") != NULL);
  CHECK_EQ_HEX(mpiar_reduce_canonical(NULL, NULL, 3, 0, MPIAR_FLOAT32, MPIAR_SUM), MPIAR_SUCCESS);
  CHECK_EQ_HEX(mpiar_reduce_canonical(d, in, 2, 2, MPIAR_FLOAT32, MPIAR_SUM), MPIAR_SUCCESS);
  CHECK(d[0] == 4.0f && d[1] == 6.0f && strcmp(mpiar_last_error(), "") == 0);
  CHECK_EQ_HEX(mpiar_reduce_canonical(d, in, 2, 2, MPIAR_FLOAT32, MPIAR_AVG), MPIAR_SUCCESS);
  CHECK(d[0] == 2.0f && d[1] == 3.0f);
  /* One rank: the input unchanged, AVG included (no division by 1 that would quiet a NaN). */
  const uint32_t snan = 0x7f800001u;
  float s;
  memcpy(&s, &snan, 4);
  const void *one[1] = {&s};
  uint32_t out = 0;
  CHECK_EQ_HEX(mpiar_reduce_canonical(&out, one, 1, 1, MPIAR_FLOAT32, MPIAR_AVG), MPIAR_SUCCESS);
  CHECK_EQ_HEX(out, snan);
  /* Order matters: 3 ranks are (x0 + x1) + x2, not x0 + (x1 + x2). */
  const float x[3] = {1.0f, 0x1p-24f, 0x1p-24f};
  const void *three[3] = {&x[0], &x[1], &x[2]};
  float r3;
  CHECK_EQ_HEX(mpiar_reduce_canonical(&r3, three, 3, 1, MPIAR_FLOAT32, MPIAR_SUM), MPIAR_SUCCESS);
  CHECK(r3 == 1.0f); /* 1 + 2^-24 rounds to 1, twice; the other order would give 1 + 2^-23 */
}

int main(void) {
  CHECK(mpiar__kernels_init() == MPIAR_SUCCESS);
  check_errors();
  rng_seed(42);
  int nps = 0, ps[80];
  for (int p = 1; p <= 70; p++) {
    ps[nps++] = p;
  }
  ps[nps++] = 100, ps[nps++] = 127, ps[nps++] = 128, ps[nps++] = 1000;
  int rot = 0;
  for (int i = 0; i < nps; i++) {
    const int p = ps[i];
    for (int dt = 0; dt < MPIAR__DTYPE_COUNT; dt++) {
      for (int op = 0; op < MPIAR__OP_COUNT; op++, rot++) {
        if (!mpiar_op_supported((mpiar_dtype_t)dt, (mpiar_op_t)op)) {
          continue;
        }
        /* Most runs short; some cross the 4096-element chunks of the implementation. */
        const size_t count = p <= 16 && rot % 7 == 0 ? 9001 : (size_t)(rot % 37) + 1;
        check_one(p, p >= 100 ? 3 : count, (mpiar_dtype_t)dt, (mpiar_op_t)op, rot % 3);
      }
    }
  }
  printf("%d failures\n", failures);
  return failures ? 1 : 0;
}
