/*
 * The optimized kernels of one ISA level (argv[1]: avx2, avx512, or avx512_base for the AVX-512
 * level without its BF16/FP16 extensions) against the reference kernels, bit for bit: every
 * length 0..300 and some long ones, unaligned starts, odd byte addresses, dst aliasing a and b,
 * special values. A level this CPU lacks exits with 77, which CTest reports as skipped.
 */
#include "kernel_test_util.h"

static mpiar__kernel_table_t ref;

/* Scratch: inputs and results live at chosen byte offsets inside 64-byte aligned blocks. */
typedef struct {
  unsigned char *a, *b, *d, *want, *alias;
  size_t cap;
} bufs_t;

static void *xalloc(size_t n) {
  void *p = NULL;
  if (posix_memalign(&p, 64, n + 128) != 0) {
    fprintf(stderr, "out of memory\n");
    exit(1);
  }
  return p;
}

static int report(const char *lvl, mpiar_dtype_t dt, const char *op, size_t n, const char *how,
                  const unsigned char *got, const unsigned char *want, size_t esize) {
  for (size_t i = 0; i < n; i++) {
    if (memcmp(got + i * esize, want + i * esize, esize) != 0) {
      unsigned long long g = 0, w = 0;
      memcpy(&g, got + i * esize, esize);
      memcpy(&w, want + i * esize, esize);
      fprintf(stderr, "%s %s %s n=%zu %s: element %zu = 0x%llx, reference 0x%llx\n", lvl,
              mpiar_dtype_name(dt), op, n, how, i, g, w);
      break;
    }
  }
  failures++;
  return 1;
}

/* One kernel, one length: three offset patterns, odd byte offsets, and both aliasings. */
static void check_one(const char *lvl, mpiar_dtype_t dt, mpiar_op_t op, mpiar__kernel_fn fn,
                      mpiar__kernel_fn rfn, size_t n, bufs_t *B) {
  size_t es = mpiar_dtype_size(dt);
  size_t bytes = n * es;
  const char *opn = mpiar_op_name(op);
  /* Reference on aligned copies at offset 0. */
  fill_values(B->a, n, dt);
  fill_values(B->b, n, dt);
  rfn(B->want, B->a, B->b, n);
  static const size_t offs[][3] = {{0, 0, 0}, {1, 2, 3}, {3, 1, 2}, {2, 3, 1}};
  unsigned char *ua = B->a + B->cap, *ub = B->b + B->cap, *ud = B->d;
  for (size_t k = 0; k < NELEMS(offs); k++) {
    /* Element offsets, then (for wide types) an odd byte offset on all three pointers. */
    for (int odd = 0; odd <= (es > 1); odd++) {
      size_t oa = offs[k][0] * es + (size_t)odd, ob = offs[k][1] * es + (size_t)odd;
      size_t od = offs[k][2] * es + (size_t)odd * 3;
      memcpy(ua + oa, B->a, bytes);
      memcpy(ub + ob, B->b, bytes);
      memset(ud, 0xa5, bytes + 64);
      fn(ud + od, ua + oa, ub + ob, n);
      if (memcmp(ud + od, B->want, bytes) != 0) {
        report(lvl, dt, opn, n, odd ? "odd byte offsets" : "element offsets", ud + od, B->want, es);
        return;
      }
      /* Nothing outside the span may be written. */
      for (size_t i = 0; i < od; i++) {
        if (ud[i] != 0xa5) {
          fprintf(stderr, "%s %s %s n=%zu: wrote before dst\n", lvl, mpiar_dtype_name(dt), opn, n);
          failures++;
          return;
        }
      }
      for (size_t i = od + bytes; i < bytes + 64; i++) {
        if (ud[i] != 0xa5) {
          fprintf(stderr, "%s %s %s n=%zu: wrote past dst\n", lvl, mpiar_dtype_name(dt), opn, n);
          failures++;
          return;
        }
      }
    }
  }
  /* dst == a, then dst == b. */
  memcpy(B->alias + es, B->a, bytes);
  fn(B->alias + es, B->alias + es, B->b, n);
  if (memcmp(B->alias + es, B->want, bytes) != 0) {
    report(lvl, dt, opn, n, "dst == a", B->alias + es, B->want, es);
  }
  memcpy(B->alias + es, B->b, bytes);
  fn(B->alias + es, B->a, B->alias + es, n);
  if (memcmp(B->alias + es, B->want, bytes) != 0) {
    report(lvl, dt, opn, n, "dst == b", B->alias + es, B->want, es);
  }
}

static void check_div(const char *lvl, mpiar_dtype_t dt, mpiar__div_fn fn, mpiar__div_fn rfn,
                      size_t n, bufs_t *B) {
  static const double divisors[] = {1, 2, 3, 7, 1000, 0.1};
  size_t es = mpiar_dtype_size(dt);
  fill_values(B->a, n, dt);
  for (size_t k = 0; k < NELEMS(divisors); k++) {
    rfn(B->want, B->a, n, divisors[k]);
    fn(B->d + es, B->a, n, divisors[k]);
    if (memcmp(B->d + es, B->want, n * es) != 0) {
      report(lvl, dt, "div", n, "divide", B->d + es, B->want, es);
      return;
    }
    memcpy(B->alias, B->a, n * es);
    fn(B->alias, B->alias, n, divisors[k]);
    if (memcmp(B->alias, B->want, n * es) != 0) {
      report(lvl, dt, "div", n, "divide in place", B->alias, B->want, es);
      return;
    }
  }
}

static void check_table(const char *lvl, const mpiar__kernel_table_t *t, size_t maxn) {
  bufs_t B;
  B.cap = maxn * 8 + 128;
  B.a = xalloc(2 * B.cap);
  B.b = xalloc(2 * B.cap);
  B.d = xalloc(B.cap);
  B.want = xalloc(B.cap);
  B.alias = xalloc(B.cap);
  static const size_t longs[] = {4099, 65536 + 17, (1u << 20) + 3};
  int checked = 0;
  for (int dt = 0; dt < MPIAR__DTYPE_COUNT; dt++) {
    for (int op = 0; op < MPIAR__OP_COUNT; op++) {
      mpiar__kernel_fn fn = t->fn[dt][op];
      CHECK((fn != NULL) == mpiar_op_supported((mpiar_dtype_t)dt, (mpiar_op_t)op));
      if (fn == NULL || fn == ref.fn[dt][op]) {
        continue;
      }
      checked++;
      rng_seed(1000u + (unsigned)dt * 16u + (unsigned)op);
      int before = failures;
      for (size_t n = 0; n <= 300 && failures == before; n++) {
        check_one(lvl, (mpiar_dtype_t)dt, (mpiar_op_t)op, fn, ref.fn[dt][op], n, &B);
      }
      for (size_t k = 0; k < NELEMS(longs) && longs[k] <= maxn && failures == before; k++) {
        check_one(lvl, (mpiar_dtype_t)dt, (mpiar_op_t)op, fn, ref.fn[dt][op], longs[k], &B);
      }
    }
    if (t->div[dt] != NULL && t->div[dt] != ref.div[dt]) {
      checked++;
      rng_seed(77u + (unsigned)dt);
      int before = failures;
      for (size_t n = 0; n <= 300 && failures == before; n++) {
        check_div(lvl, (mpiar_dtype_t)dt, t->div[dt], ref.div[dt], n, &B);
      }
      check_div(lvl, (mpiar_dtype_t)dt, t->div[dt], ref.div[dt], 4099, &B);
    }
  }
  printf("%s: %d optimized kernels checked against the reference\n", lvl, checked);
  /* An optimized level that replaced nothing would make this test vacuous. */
  CHECK(t->isa == MPIAR__ISA_REFERENCE || checked > 20);
  free(B.a);
  free(B.b);
  free(B.d);
  free(B.want);
  free(B.alias);
}

/*
 * Spans long enough for the non-temporal store path of the AVX-512 kernels, starting at an
 * aligned and at an unaligned dst.
 */
static void check_streaming(const char *lvl, const mpiar__kernel_table_t *t) {
  static const mpiar_dtype_t dts[] = {MPIAR_FLOAT32, MPIAR_BFLOAT16, MPIAR_FLOAT16};
  size_t maxbytes = MPIAR__STREAM_BYTES + 4096;
  unsigned char *a = xalloc(maxbytes), *b = xalloc(maxbytes), *d = xalloc(maxbytes + 64),
                *w = xalloc(maxbytes);
  for (size_t k = 0; k < NELEMS(dts); k++) {
    size_t es = mpiar_dtype_size(dts[k]);
    size_t n = (MPIAR__STREAM_BYTES + 1000) / es;
    rng_seed(4242u + k);
    fill_values(a, n, dts[k]);
    fill_values(b, n, dts[k]);
    ref.fn[dts[k]][MPIAR_SUM](w, a, b, n);
    for (size_t off = 0; off <= es; off += es) {
      t->fn[dts[k]][MPIAR_SUM](d + off, a, b, n);
      if (memcmp(d + off, w, n * es) != 0) {
        report(lvl, dts[k], "sum", n, "streaming span", d + off, w, es);
      }
    }
  }
  free(a);
  free(b);
  free(d);
  free(w);
}

/*
 * The fan-out forms (both destinations get the pair's reference bits): lengths 0..300 and some
 * long ones, both destinations aligned (the non-temporal path when streaming) or not, with and
 * without streaming, and in place (d0 = a, d1 = b). @return how many forms were checked.
 */
static int check_fans(const char *lvl, const mpiar__kernel_table_t *t) {
  static const size_t longs[] = {4099, 65536 + 17};
  size_t cap = (65536 + 17) * 8 + 256;
  unsigned char *a = xalloc(cap), *b = xalloc(cap), *w = xalloc(cap);
  unsigned char *d0 = xalloc(cap + 64), *d1 = xalloc(cap + 64);
  unsigned char *ia = xalloc(cap), *ib = xalloc(cap);
  int checked = 0;
  for (int dt = 0; dt < MPIAR__DTYPE_COUNT; dt++) {
    for (int op = 0; op < MPIAR__OP_COUNT; op++) {
      mpiar__fan_fn fan = t->fan[dt][op];
      if (fan == NULL) {
        continue;
      }
      CHECK(t->fn[dt][op] != NULL);
      checked++;
      size_t es = mpiar_dtype_size((mpiar_dtype_t)dt);
      const char *opn = mpiar_op_name((mpiar_op_t)op);
      rng_seed(9000u + (unsigned)dt * 16u + (unsigned)op);
      int before = failures;
      for (size_t m = 0; m < 301 + NELEMS(longs) && failures == before; m++) {
        size_t n = m <= 300 ? m : longs[m - 301];
        fill_values(a, n, (mpiar_dtype_t)dt);
        fill_values(b, n, (mpiar_dtype_t)dt);
        ref.fn[dt][op](w, a, b, n);
        if (op == MPIAR_AVG) {
          /* The zero-copy path's avg at p = 2 is the pair's avg: the sum halved, bit for bit. */
          ref.fn[dt][MPIAR_SUM](ia, a, b, n);
          ref.div[dt](ia, ia, n, 2.0);
          if (memcmp(ia, w, n * es) != 0) {
            report(lvl, (mpiar_dtype_t)dt, opn, n, "avg against the sum divided by 2", ia, w, es);
          }
        }
        for (int stream = 0; stream <= 1; stream++) {
          for (size_t off = 0; off <= es; off += es) { /* both aligned, then both not */
            fan(d0 + off, d1 + off, a, b, n, stream);
            if (memcmp(d0 + off, w, n * es) != 0) {
              report(lvl, (mpiar_dtype_t)dt, opn, n, "fan-out, first output", d0 + off, w, es);
            }
            if (memcmp(d1 + off, w, n * es) != 0) {
              report(lvl, (mpiar_dtype_t)dt, opn, n, "fan-out, second output", d1 + off, w, es);
            }
          }
          memcpy(ia, a, n * es);
          memcpy(ib, b, n * es);
          fan(ia, ib, ia, ib, n, stream);
          if (memcmp(ia, w, n * es) != 0 || memcmp(ib, w, n * es) != 0) {
            report(lvl, (mpiar_dtype_t)dt, opn, n, "fan-out in place",
                   memcmp(ia, w, n * es) != 0 ? ia : ib, w, es);
          }
        }
      }
    }
  }
  printf("%s: %d fan-out forms checked against the reference\n", lvl, checked);
  free(a);
  free(b);
  free(w);
  free(d0);
  free(d1);
  free(ia);
  free(ib);
  return checked;
}

/* CTest's SKIP_RETURN_CODE: the level cannot run on this CPU. */
#define SKIPPED 77

int main(int argc, char **argv) {
  if (argc != 2 || (strcmp(argv[1], "avx2") != 0 && strcmp(argv[1], "avx512") != 0 &&
                    strcmp(argv[1], "avx512_base") != 0)) {
    fprintf(stderr, "usage: %s avx2 | avx512 | avx512_base\n", argv[0]);
    return 2;
  }
  CHECK(mpiar__kernel_table_fill(MPIAR__ISA_REFERENCE, &ref) == MPIAR_SUCCESS);
  size_t maxn = (1u << 20) + 3;
  unsigned feats = mpiar__cpu_features();
  printf("CPU features: avx2=%d avx512=%d avx512_bf16=%d avx512_fp16=%d\n",
         !!(feats & MPIAR__FEAT_AVX2), !!(feats & MPIAR__FEAT_AVX512),
         !!(feats & MPIAR__FEAT_AVX512_BF16), !!(feats & MPIAR__FEAT_AVX512_FP16));
  const mpiar__isa_t isa = strcmp(argv[1], "avx2") == 0 ? MPIAR__ISA_AVX2 : MPIAR__ISA_AVX512;
  mpiar__kernel_table_t t;
  if (!mpiar__isa_supported(isa)) {
    /* The level must refuse to fill its table; its kernels cannot be run here. */
    CHECK(mpiar__kernel_table_fill(isa, &t) == MPIAR_ERR_ISA_UNAVAILABLE);
    printf("SKIPPED: this CPU (or its OS) does not support %s\n", mpiar__isa_name(isa));
    return failures ? 1 : SKIPPED;
  }
  if (strcmp(argv[1], "avx512_base") == 0) {
    /* The AVX-512 level as a CPU without the BF16 and FP16 extensions would run it. */
    if (!(feats & (MPIAR__FEAT_AVX512_BF16 | MPIAR__FEAT_AVX512_FP16))) {
      printf("SKIPPED: this CPU has neither AVX-512 BF16 nor FP16, so the avx512 test already "
             "runs the base table\n");
      return SKIPPED;
    }
    mpiar__kernel_table_t full;
    CHECK(mpiar__kernel_table_fill(MPIAR__ISA_AVX512, &full) == MPIAR_SUCCESS);
    mpiar__kernels_disable_features(MPIAR__FEAT_AVX512_BF16 | MPIAR__FEAT_AVX512_FP16);
    CHECK(mpiar__kernel_table_fill(MPIAR__ISA_AVX512, &t) == MPIAR_SUCCESS);
    CHECK(memcmp(full.fn, t.fn, sizeof full.fn) != 0);
    check_table("avx512 (no bf16/fp16 extensions)", &t, 4099);
  } else {
    CHECK(mpiar__kernel_table_fill(isa, &t) == MPIAR_SUCCESS);
    CHECK(t.isa == isa);
    check_table(mpiar__isa_name(isa), &t, maxn);
    check_streaming(mpiar__isa_name(isa), &t);
    /* AVX-512 has the fan-out forms of float32/float64 sum, prod, min, max, avg and of the
     * integer sums; other levels none (the zero-copy path reduces and copies there). */
    int fans = check_fans(mpiar__isa_name(isa), &t);
    CHECK(isa == MPIAR__ISA_AVX512 ? fans == 14 : fans == 0);
    CHECK(ref.fan[MPIAR_FLOAT32][MPIAR_SUM] == NULL);
  }
  if (failures != 0) {
    fprintf(stderr, "%d failures\n", failures);
    return 1;
  }
  printf("%s: all kernels match the reference\n", argv[1]);
  return 0;
}
