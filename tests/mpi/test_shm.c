/*
 * Node-shared buffers and the zero-copy allreduce (docs/shm.md):
 *   test_shm            allocation errors, every dtype/op at sizes 1 .. 1M + 3 in and out of
 *                       place against mpiar_reduce_canonical and the MPI path in reproducible
 *                       mode, nonblocking and persistent requests, calls on ordinary buffers in
 *                       between, a rank on the MPI path (an error on every rank), a rank that
 *                       never arrives (a deadline), frees and reuse
 *   test_shm --stress N N back-to-back calls of random sizes, in place or not, blocking or not,
 *                       each checked (the flags' stress test; run under ASan and TSan builds)
 *   test_shm --quick    fewer sizes (oversubscribed runs, sanitizer builds)
 */
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "mpi_test.h"

static int rank, size;

/* Rank @p r's input element @p i of @p dtype: random bits, floats kept finite and of one sign
 * class so that the order of the reduction shows in the bits. */
static void fill(void *buf, size_t count, mpiar_dtype_t dtype, int r, uint64_t seed) {
  size_t es = mpiar_dtype_size(dtype);
  for (size_t i = 0; i < count; i++) {
    uint64_t x = test_mix64(seed * 1000003u + (uint64_t)r * 7919u + i);
    char *e = (char *)buf + i * es;
    switch (dtype) {
      case MPIAR_FLOAT32: {
        float f = (float)((double)(x >> 11) / (double)(1ull << 53) * 2.0 - 1.0);
        memcpy(e, &f, 4);
        break;
      }
      case MPIAR_FLOAT64: {
        double d = (double)(x >> 11) / (double)(1ull << 53) * 2.0 - 1.0;
        memcpy(e, &d, 8);
        break;
      }
      case MPIAR_FLOAT16: {
        uint16_t h = (uint16_t)((x & 0x8000) | ((10 + (x >> 16) % 10) << 10) | ((x >> 32) & 0x3ff));
        memcpy(e, &h, 2);
        break;
      }
      case MPIAR_BFLOAT16: {
        uint16_t h = (uint16_t)((x & 0x8000) | ((120 + (x >> 16) % 10) << 7) | ((x >> 32) & 0x7f));
        memcpy(e, &h, 2);
        break;
      }
      default:
        memcpy(e, &x, es);
    }
  }
}

static int valid(mpiar_dtype_t t, mpiar_op_t op) {
  int fl = t == MPIAR_FLOAT16 || t == MPIAR_BFLOAT16 || t == MPIAR_FLOAT32 || t == MPIAR_FLOAT64;
  if (op == MPIAR_AVG) {
    return fl;
  }
  if (op == MPIAR_BAND || op == MPIAR_BOR || op == MPIAR_BXOR) {
    return !fl;
  }
  return 1;
}

/* The canonical result of every rank's input (each rank makes every input itself). */
static void expected(void *dst, size_t count, mpiar_dtype_t dtype, mpiar_op_t op, uint64_t seed) {
  size_t es = mpiar_dtype_size(dtype);
  const void **in = malloc((size_t)size * sizeof *in);
  char *all = malloc((size_t)size * count * es + 1);
  for (int r = 0; r < size; r++) {
    fill(all + (size_t)r * count * es, count, dtype, r, seed);
    in[r] = all + (size_t)r * count * es;
  }
  int rc = mpiar_reduce_canonical(dst, in, size, count, dtype, op);
  MT_CHECK(rc == MPIAR_SUCCESS, "mpiar_reduce_canonical: %s", mpiar_last_error());
  free(all);
  free(in);
}

/* One allreduce on shared buffers (in place or not), checked against the canonical bits, and
 * (with @p vs_mpi) against the MPI path in reproducible mode on ordinary buffers. */
static void one(MPI_Comm comm, char *sh_in, char *sh_out, size_t count, mpiar_dtype_t dtype,
                mpiar_op_t op, int in_place, int vs_mpi, uint64_t seed) {
  size_t es = mpiar_dtype_size(dtype);
  size_t bytes = count * es;
  char *want = malloc(bytes + 1);
  expected(want, count, dtype, op, seed);
  if (in_place) {
    fill(sh_out, count, dtype, rank, seed);
  } else {
    fill(sh_in, count, dtype, rank, seed);
    memset(sh_out, 0x5a, bytes);
  }
  sh_out[bytes] = 0x77; /* the element after the output stays */
  int rc = mpiar_allreduce(in_place ? MPIAR_IN_PLACE : sh_in, sh_out, count, dtype, op, comm);
  MT_CHECK(rc == MPIAR_SUCCESS, "count %zu %s %s: %s: %s", count, mpiar_dtype_name(dtype),
           mpiar_op_name(op), mpiar_err_name(rc), mpiar_last_error());
  MT_CHECK(memcmp(sh_out, want, bytes) == 0, "count %zu %s %s in_place %d: not the canonical bits",
           count, mpiar_dtype_name(dtype), mpiar_op_name(op), in_place);
  MT_CHECK((unsigned char)sh_out[bytes] == 0x77, "count %zu: the byte after the output changed",
           count);
  if (!in_place) {
    char *again = malloc(bytes + 1);
    fill(again, count, dtype, rank, seed);
    MT_CHECK(memcmp(again, sh_in, bytes) == 0, "count %zu: the send buffer changed", count);
    free(again);
  }
  if (vs_mpi) {
    char *mine = malloc(bytes + 1);
    fill(mine, count, dtype, rank, seed);
    mpiar_options_t o = MPIAR_OPTIONS_INIT;
    o.reproducible = 1;
    rc = mpiar_allreduce_ex(MPIAR_IN_PLACE, mine, count, dtype, op, comm, &o);
    MT_CHECK(rc == MPIAR_SUCCESS && memcmp(mine, sh_out, bytes) == 0,
             "count %zu %s %s: the MPI path's reproducible bits differ (%s)", count,
             mpiar_dtype_name(dtype), mpiar_op_name(op), mpiar_last_error());
    free(mine);
  }
  free(want);
}

static void test_alloc_errors(void) {
  void *p = NULL;
  /* A bad argument on one rank fails the allocation on every rank. */
  int rc = mpiar_alloc(MPI_COMM_WORLD, 64, rank == size - 1 ? NULL : &p);
  MT_CHECK(rc == MPIAR_ERR_INVALID_ARG && p == NULL, "NULL result pointer on rank %d: %s",
           size - 1, mpiar_err_name(rc));
  rc = mpiar_alloc(MPI_COMM_WORLD, rank == 0 ? ((size_t)1 << 60) : 64, &p);
  MT_CHECK(rc == MPIAR_ERR_INVALID_ARG && p == NULL, "2^60 bytes on rank 0: %s",
           mpiar_err_name(rc));
  MT_RC(MPIAR_ERR_COMM, mpiar_alloc(MPI_COMM_NULL, 64, &p));
  MT_RC(MPIAR_SUCCESS, mpiar_free(NULL));
  int local = 0;
  MT_RC(MPIAR_ERR_INVALID_ARG, mpiar_free(&local));
  /* Sizes 0 and different sizes per rank; the memory is aligned and writable. */
  void *a = NULL, *b = NULL;
  MT_RC(MPIAR_SUCCESS, mpiar_alloc(MPI_COMM_WORLD, 0, &a));
  MT_RC(MPIAR_SUCCESS, mpiar_alloc(MPI_COMM_WORLD, 100 + (size_t)rank * 4096, &b));
  MT_CHECK(a != NULL && b != NULL && ((uintptr_t)b & 63) == 0, "pointers %p %p", a, b);
  if (b != NULL) {
    memset(b, 1, 100 + (size_t)rank * 4096);
    MT_RC(MPIAR_ERR_INVALID_ARG, mpiar_free((char *)b + 8)); /* not the start */
  }
  MT_RC(MPIAR_SUCCESS, mpiar_free(a));
  MT_RC(MPIAR_ERR_INVALID_ARG, mpiar_free(a)); /* twice */
  MT_RC(MPIAR_SUCCESS, mpiar_free(b));
}

static void test_matrix(int quick) {
  const size_t big = quick ? 100003 : ((size_t)1 << 20) + 3;
  const size_t counts[] = {1, 2, 7, 63, 1000, 4099, big};
  const int ncounts = sizeof counts / sizeof counts[0];
  size_t cap = big * 8 + 64;
  char *in = NULL, *out = NULL;
  MT_RC(MPIAR_SUCCESS, mpiar_alloc(MPI_COMM_WORLD, cap, (void **)&in));
  MT_RC(MPIAR_SUCCESS, mpiar_alloc(MPI_COMM_WORLD, cap, (void **)&out));
  uint64_t seed = 1;
  for (int t = 0; t <= (int)MPIAR_FLOAT64; t++) {
    for (int op = 0; op <= (int)MPIAR_AVG; op++) {
      if (!valid((mpiar_dtype_t)t, (mpiar_op_t)op)) {
        continue;
      }
      for (int k = 0; k < ncounts; k++) {
        if (counts[k] == big && op != MPIAR_SUM && op != MPIAR_AVG) {
          continue;
        }
        /* An odd offset into the allocation (shares then start off cache lines). */
        size_t off = (size_t)(k % 3) * mpiar_dtype_size((mpiar_dtype_t)t);
        int vs_mpi = k % 2 == 0 || counts[k] == big;
        one(MPI_COMM_WORLD, in + off, out + off, counts[k], (mpiar_dtype_t)t, (mpiar_op_t)op,
            (k + op) % 2, vs_mpi, seed++);
      }
    }
  }
  /* Count 0 (the MPI path on every rank) and a call on ordinary memory in between. */
  MT_RC(MPIAR_SUCCESS, mpiar_allreduce(in, out, 0, MPIAR_FLOAT32, MPIAR_SUM, MPI_COMM_WORLD));
  float plain[5] = {1, 2, 3, 4, 5};
  MT_RC(MPIAR_SUCCESS,
        mpiar_allreduce(MPIAR_IN_PLACE, plain, 5, MPIAR_FLOAT32, MPIAR_SUM, MPI_COMM_WORLD));
  MT_CHECK(plain[4] == 5.0f * (float)size, "ordinary buffers: %g", (double)plain[4]);
  one(MPI_COMM_WORLD, in, out, 333, MPIAR_INT32, MPIAR_SUM, 0, 0, seed++);
  MT_RC(MPIAR_SUCCESS, mpiar_free(out));
  MT_RC(MPIAR_SUCCESS, mpiar_free(in));
}

/* Nonblocking calls on shared buffers, more outstanding than a rank's window (SHM_WINDOW, 16:
 * the starts finish the oldest), inline and not, completed in reverse; a persistent request on
 * shared buffers (the MPI path on every rank). */
static void test_requests(void) {
  enum { K = 40, N = 5003 };
  int32_t *buf = NULL;
  MT_RC(MPIAR_SUCCESS, mpiar_alloc(MPI_COMM_WORLD, K * N * sizeof(int32_t), (void **)&buf));
  mpiar_request_t req[K];
  for (int k = 0; k < K; k++) {
    for (int i = 0; i < N; i++) {
      buf[k * N + i] = (rank + 1) * (k + 1) + i;
    }
    MT_RC(MPIAR_SUCCESS, mpiar_iallreduce(MPIAR_IN_PLACE, buf + k * N, k % 3 ? N : 7,
                                          MPIAR_INT32, MPIAR_SUM, MPI_COMM_WORLD, NULL, &req[k]));
  }
  for (int k = K - 1; k >= 0; k--) {
    MT_RC(MPIAR_SUCCESS, mpiar_wait(&req[k]));
    MT_CHECK(req[k] == MPIAR_REQUEST_NULL, "request %d not released", k);
  }
  int bad = 0;
  for (int k = 0; k < K; k++) {
    for (int i = 0; i < (k % 3 ? N : 7); i++) {
      bad += buf[k * N + i] != (k + 1) * size * (size + 1) / 2 + size * i;
    }
  }
  MT_CHECK(bad == 0, "nonblocking: %d wrong elements", bad);
  mpiar_request_t p;
  MT_RC(MPIAR_SUCCESS, mpiar_allreduce_init(MPIAR_IN_PLACE, buf, N, MPIAR_INT32, MPIAR_MAX,
                                            MPI_COMM_WORLD, NULL, &p));
  for (int it = 0; it < 3; it++) {
    buf[7] = rank + it;
    MT_RC(MPIAR_SUCCESS, mpiar_start(&p));
    MT_RC(MPIAR_SUCCESS, mpiar_wait(&p));
    MT_CHECK(buf[7] == size - 1 + it, "persistent: %d", buf[7]);
  }
  MT_RC(MPIAR_SUCCESS, mpiar_request_free(&p));
  MT_RC(MPIAR_SUCCESS, mpiar_free(buf));
}

/* A rank whose buffers are ordinary memory while the others' are shared: an error on every rank
 * (the zero-copy ranks see its path; it hears of their failure), not a hang. */
static void test_mismatch(void) {
  if (size < 2) {
    return;
  }
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  float *sh = NULL;
  MT_RC(MPIAR_SUCCESS, mpiar_alloc(comm, 1024 * sizeof(float), (void **)&sh));
  float plain[1024];
  mpiar_options_t o = MPIAR_OPTIONS_INIT;
  o.timeout_ms = 20000;
  int rc = mpiar_allreduce_ex(MPIAR_IN_PLACE, rank == 0 ? plain : sh, 1024, MPIAR_FLOAT32,
                              MPIAR_SUM, comm, &o);
  MT_CHECK(rc == (rank == 0 ? MPIAR_ERR_COMM_BROKEN : MPIAR_ERR_MISMATCH),
           "mismatched paths: %s (%s)", mpiar_err_name(rc), mpiar_last_error());
  if (rank != 0) {
    MT_CHECK(strstr(mpiar_last_error(), "MPI path") != NULL, "detail: %s", mpiar_last_error());
  }
  MT_RC(MPIAR_ERR_COMM_BROKEN,
        mpiar_allreduce(MPIAR_IN_PLACE, sh, 4, MPIAR_FLOAT32, MPIAR_SUM, comm));
  MT_RC(MPIAR_SUCCESS, mpiar_free(sh));
  MPI_Comm_free(&comm);
}

/* A rank that does not arrive: the others time out; it fails when it comes. */
static void test_deadline(void) {
  if (size < 2) {
    return;
  }
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  double *sh = NULL;
  MT_RC(MPIAR_SUCCESS, mpiar_alloc(comm, 4096, (void **)&sh));
  mpiar_options_t o = MPIAR_OPTIONS_INIT;
  o.timeout_ms = 300;
  if (rank == size - 1) {
    usleep(800 * 1000);
  }
  double t0 = MPI_Wtime();
  int rc = mpiar_allreduce_ex(MPIAR_IN_PLACE, sh, 100, MPIAR_FLOAT64, MPIAR_SUM, comm, &o);
  double took = MPI_Wtime() - t0;
  if (rank == size - 1) {
    MT_CHECK(rc == MPIAR_ERR_COMM_BROKEN || rc == MPIAR_ERR_TIMEOUT, "the late rank: %s (%s)",
             mpiar_err_name(rc), mpiar_last_error());
  } else {
    MT_CHECK(rc == MPIAR_ERR_TIMEOUT || rc == MPIAR_ERR_COMM_BROKEN, "waiting rank: %s (%s)",
             mpiar_err_name(rc), mpiar_last_error());
    MT_CHECK(took < 3.0, "the deadline of 300 ms took %.2f s", took);
  }
  MT_RC(MPIAR_SUCCESS, mpiar_free(sh));
  MPI_Comm_free(&comm);
}

/* Back-to-back calls of random sizes (same seed on every rank), each checked: integers, so that
 * any stale or torn element shows. */
static void test_stress(int calls) {
  const size_t maxn = 1 << 16;
  int64_t *a = NULL, *b = NULL;
  MT_RC(MPIAR_SUCCESS, mpiar_alloc(MPI_COMM_WORLD, 4 * maxn * sizeof(int64_t), (void **)&a));
  MT_RC(MPIAR_SUCCESS, mpiar_alloc(MPI_COMM_WORLD, maxn * sizeof(int64_t), (void **)&b));
  uint64_t s = 12345;
  int bad = 0;
  for (int c = 0; c < calls && bad == 0; c++) {
    uint64_t x = test_splitmix64(&s);
    /* Sizes: one in 8 up to 64 Ki elements, three in 8 within the inline payload, else <= 300. */
    size_t n = 1 + (size_t)(x % 8 == 0 ? (x >> 8) % maxn : x % 8 < 4 ? (x >> 8) % 24 : (x >> 8) % 300);
    int mode = (int)((x >> 4) % 4); /* 0 blocking in place, 1 not, 2 nonblocking x2, 3 mixed */
    int64_t *v = a + (size_t)(c % 3) * 7;
    for (size_t i = 0; i < n; i++) {
      v[i] = (int64_t)(c * 31 + rank * 1000 + (int)i);
    }
    int64_t want0 = (int64_t)size * c * 31 + 1000 * (int64_t)size * (size - 1) / 2;
    if (mode == 0) {
      MT_RC(MPIAR_SUCCESS, mpiar_allreduce(MPIAR_IN_PLACE, v, n, MPIAR_INT64, MPIAR_SUM,
                                           MPI_COMM_WORLD));
    } else if (mode == 1) {
      MT_RC(MPIAR_SUCCESS, mpiar_allreduce(v, b, n, MPIAR_INT64, MPIAR_SUM, MPI_COMM_WORLD));
      memcpy(v, b, n * sizeof *v);
    } else {
      int64_t *w = a + 2 * maxn;
      size_t m = 1 + (x >> 20) % 97;
      for (size_t i = 0; i < m; i++) {
        w[i] = rank;
      }
      mpiar_request_t r[2];
      MT_RC(MPIAR_SUCCESS, mpiar_iallreduce(MPIAR_IN_PLACE, v, n, MPIAR_INT64, MPIAR_SUM,
                                            MPI_COMM_WORLD, NULL, &r[0]));
      if (mode == 2) {
        MT_RC(MPIAR_SUCCESS, mpiar_iallreduce(MPIAR_IN_PLACE, w, m, MPIAR_INT64, MPIAR_MAX,
                                              MPI_COMM_WORLD, NULL, &r[1]));
      } else { /* ordinary memory in between: the MPI path */
        MT_RC(MPIAR_SUCCESS, mpiar_iallreduce(MPIAR_IN_PLACE, b + 0, 0, MPIAR_INT64, MPIAR_MAX,
                                              MPI_COMM_WORLD, NULL, &r[1]));
        int64_t plain = rank;
        MT_RC(MPIAR_SUCCESS, mpiar_allreduce(MPIAR_IN_PLACE, &plain, 1, MPIAR_INT64, MPIAR_MAX,
                                             MPI_COMM_WORLD));
        MT_CHECK(plain == size - 1, "plain %lld", (long long)plain);
        w[0] = size - 1;
        m = 1;
      }
      MT_RC(MPIAR_SUCCESS, mpiar_waitall(2, r));
      for (size_t i = 0; i < m; i++) {
        bad += w[i] != size - 1;
      }
    }
    for (size_t i = 0; i < n; i++) {
      bad += v[i] != want0 + (int64_t)size * (int64_t)i;
    }
    MT_CHECK(bad == 0, "call %d (n %zu, mode %d): %d wrong elements", c, n, mode, bad);
  }
  MT_RC(MPIAR_SUCCESS, mpiar_free(b));
  MT_RC(MPIAR_SUCCESS, mpiar_free(a));
}

int main(int argc, char **argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  mt_rank = rank;
  int quick = 0, stress = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--quick") == 0) {
      quick = 1;
    } else if (strcmp(argv[i], "--stress") == 0 && i + 1 < argc) {
      stress = atoi(argv[++i]);
    }
  }
  if (stress > 0) {
    test_stress(stress);
    return mt_finish("shm stress");
  }
  test_alloc_errors();
  test_matrix(quick);
  test_requests();
  test_stress(200);
  /* Allocations left live: MPI_Finalize frees them. */
  void *left = NULL;
  MT_RC(MPIAR_SUCCESS, mpiar_alloc(MPI_COMM_WORLD, 1000, &left));
  test_mismatch();
  test_deadline();
  return mt_finish("shm");
}
