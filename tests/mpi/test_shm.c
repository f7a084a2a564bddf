/*
 * Node-shared buffers and the zero-copy collectives (docs/shm.md):
 *   test_shm            allocation errors, every dtype/op at sizes 1 .. 1M + 3 in and out of
 *                       place against mpiar_reduce_canonical and the MPI path in reproducible
 *                       mode, reduce-scatter, allgather and broadcast likewise, nonblocking and
 *                       persistent requests, calls on ordinary buffers in between, a rank on the
 *                       MPI path and mismatched collectives (an error on every rank), a rank
 *                       that never arrives (a deadline), frees and reuse
 *   test_shm --stress N N back-to-back calls of random sizes and collectives, in place or not,
 *                       blocking or not, each checked (the flags' stress test; run under ASan)
 *   test_shm --quick    fewer sizes and datatypes (oversubscribed runs)
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
 * the starts finish the oldest), inline and not, completed in reverse; a persistent allreduce
 * on shared buffers (the zero-copy path; test_persistent has the rest). */
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

/* A reduce-scatter, allgather or broadcast on shared buffers (blocking or nonblocking, in place
 * or not), checked against the exact result and, with @p vs_mpi, against the MPI path on
 * ordinary buffers (reproducible mode: the same bits). */
static void one_coll(int coll, char *sh_in, char *sh_out, size_t count, mpiar_dtype_t dtype,
                     mpiar_op_t op, int in_place, int nonblocking, int vs_mpi, uint64_t seed) {
  size_t es = mpiar_dtype_size(dtype), n = count * es, all = n * (size_t)size;
  char *want = malloc(all + 1), *plain = malloc(all + 1);
  mpiar_options_t o = MPIAR_OPTIONS_INIT;
  o.reproducible = 1;
  mpiar_request_t req = MPIAR_REQUEST_NULL;
  int rc = MPIAR_SUCCESS, root = (int)(seed % (uint64_t)size);
  size_t out_bytes = n;
  const char *what = "bcast";
  if (coll == 0) { /* reduce-scatter: block `rank` of the canonical reduction */
    what = "reduce_scatter_block";
    char *sum = malloc(all + 1);
    expected(sum, count * (size_t)size, dtype, op, seed);
    memcpy(want, sum + (size_t)rank * n, n);
    free(sum);
    fill(in_place ? sh_out : sh_in, count * (size_t)size, dtype, rank, seed);
    if (!in_place) {
      memset(sh_out, 0x5a, n);
    }
    sh_out[in_place ? all : n] = 0x77;
    const void *src = in_place ? MPIAR_IN_PLACE : sh_in;
    rc = nonblocking ? mpiar_ireduce_scatter_block(src, sh_out, count, dtype, op, MPI_COMM_WORLD,
                                                   NULL, &req)
                     : mpiar_reduce_scatter_block(src, sh_out, count, dtype, op, MPI_COMM_WORLD);
    if (vs_mpi) {
      fill(plain, count * (size_t)size, dtype, rank, seed);
      MT_RC(MPIAR_SUCCESS, mpiar_reduce_scatter_block_ex(MPIAR_IN_PLACE, plain, count, dtype, op,
                                                         MPI_COMM_WORLD, &o));
    }
  } else if (coll == 1) { /* allgather: every rank's block in rank order */
    what = "allgather";
    for (int q = 0; q < size; q++) {
      fill(want + (size_t)q * n, count, dtype, q, seed);
    }
    out_bytes = all;
    memset(sh_out, 0x5a, all);
    fill(in_place ? sh_out + (size_t)rank * n : sh_in, count, dtype, rank, seed);
    sh_out[all] = 0x77;
    const void *src = in_place ? MPIAR_IN_PLACE : sh_in;
    rc = nonblocking
             ? mpiar_iallgather(src, sh_out, count, dtype, MPI_COMM_WORLD, NULL, &req)
             : mpiar_allgather(src, sh_out, count, dtype, MPI_COMM_WORLD);
    if (vs_mpi) {
      fill(plain + (size_t)rank * n, count, dtype, rank, seed);
      MT_RC(MPIAR_SUCCESS,
            mpiar_allgather_ex(MPIAR_IN_PLACE, plain, count, dtype, MPI_COMM_WORLD, &o));
    }
  } else { /* broadcast from root */
    fill(want, count, dtype, root, seed);
    if (rank == root) {
      fill(sh_out, count, dtype, rank, seed);
    } else {
      memset(sh_out, 0x5a, n);
    }
    sh_out[n] = 0x77;
    rc = nonblocking ? mpiar_ibcast(sh_out, count, dtype, root, MPI_COMM_WORLD, NULL, &req)
                     : mpiar_bcast(sh_out, count, dtype, root, MPI_COMM_WORLD);
    if (vs_mpi) {
      if (rank == root) {
        fill(plain, count, dtype, rank, seed);
      } else {
        memset(plain, 0x5a, n);
      }
      MT_RC(MPIAR_SUCCESS, mpiar_bcast_ex(plain, count, dtype, root, MPI_COMM_WORLD, &o));
    }
  }
  if (rc == MPIAR_SUCCESS && nonblocking) {
    rc = mpiar_wait(&req);
  }
  MT_CHECK(rc == MPIAR_SUCCESS, "%s count %zu %s %s: %s: %s", what, count,
           mpiar_dtype_name(dtype), mpiar_op_name(op), mpiar_err_name(rc), mpiar_last_error());
  MT_CHECK(memcmp(sh_out, want, out_bytes) == 0, "%s count %zu %s %s in_place %d nb %d: wrong bits",
           what, count, mpiar_dtype_name(dtype), mpiar_op_name(op), in_place, nonblocking);
  MT_CHECK((unsigned char)sh_out[coll == 0 && in_place ? all : out_bytes] == 0x77,
           "%s count %zu: the byte after the buffer changed", what, count);
  if (coll != 2 && !in_place) {
    char *again = malloc(all + 1);
    fill(again, coll == 0 ? count * (size_t)size : count, dtype, rank, seed);
    MT_CHECK(memcmp(again, sh_in, coll == 0 ? all : n) == 0, "%s count %zu: the send buffer changed",
             what, count);
    free(again);
  }
  if (vs_mpi) {
    MT_CHECK(memcmp(plain, sh_out, out_bytes) == 0,
             "%s count %zu %s %s: the MPI path's reproducible bits differ", what, count,
             mpiar_dtype_name(dtype), mpiar_op_name(op));
  }
  free(plain);
  free(want);
}

/* Persistent requests on shared buffers take the zero-copy path: one rank's persistent
 * allreduce meets the others' blocking calls (on the MPI path it would be a mismatch); the
 * persistent broadcast, reduce-scatter and allgather run again and again, alone and together;
 * once their memory is freed, a start is an error on every rank. */
static void test_persistent(int32_t *a) {
  enum { N = 3001 };
  int32_t *g = NULL;
  MT_RC(MPIAR_SUCCESS, mpiar_alloc(MPI_COMM_WORLD, (size_t)N * 4 * (size_t)size * sizeof(int32_t),
                                   (void **)&g));
  mpiar_request_t p = MPIAR_REQUEST_NULL;
  if (rank == 0) {
    MT_RC(MPIAR_SUCCESS, mpiar_allreduce_init(MPIAR_IN_PLACE, a, N, MPIAR_INT32, MPIAR_MAX,
                                              MPI_COMM_WORLD, NULL, &p));
  }
  for (int it = 0; it < 2; it++) {
    for (int i = 0; i < N; i++) {
      a[i] = rank * 3 + it + i;
    }
    if (rank == 0) {
      MT_RC(MPIAR_SUCCESS, mpiar_start(&p));
      MT_RC(MPIAR_SUCCESS, mpiar_wait(&p));
    } else {
      MT_RC(MPIAR_SUCCESS, mpiar_allreduce(MPIAR_IN_PLACE, a, N, MPIAR_INT32, MPIAR_MAX,
                                           MPI_COMM_WORLD));
    }
    MT_CHECK(a[0] == (size - 1) * 3 + it && a[N - 1] == (size - 1) * 3 + it + N - 1,
             "persistent allreduce %d: %d", it, a[0]);
  }
  if (rank == 0) {
    MT_RC(MPIAR_SUCCESS, mpiar_request_free(&p));
  }
  /* A broadcast of a's first N elements, an in-place reduce-scatter at g's start, an allgather
   * from a + N into g's second half. */
  int32_t *b = a, *ag_in = a + N, *rs = g, *ag_out = g + (size_t)N * (size_t)size;
  enum { RS_N = 1001, AG_N = 777 };
  mpiar_request_t r[3];
  MT_RC(MPIAR_SUCCESS, mpiar_bcast_init(b, N, MPIAR_INT32, size - 1, MPI_COMM_WORLD, NULL, &r[0]));
  MT_RC(MPIAR_SUCCESS, mpiar_reduce_scatter_block_init(MPIAR_IN_PLACE, rs, RS_N, MPIAR_INT32,
                                                       MPIAR_SUM, MPI_COMM_WORLD, NULL, &r[1]));
  MT_RC(MPIAR_SUCCESS,
        mpiar_allgather_init(ag_in, ag_out, AG_N, MPIAR_INT32, MPI_COMM_WORLD, NULL, &r[2]));
  for (int it = 0; it < 3; it++) {
    for (int i = 0; i < N; i++) {
      b[i] = rank == size - 1 ? it * 7 + i : -1;
    }
    for (int i = 0; i < RS_N * size; i++) {
      rs[i] = rank + it * i;
    }
    for (int i = 0; i < AG_N; i++) {
      ag_in[i] = rank * 100000 + it + i;
    }
    if (it < 2) { /* one by one, then all together */
      for (int k = 0; k < 3; k++) {
        MT_RC(MPIAR_SUCCESS, mpiar_start(&r[k]));
        MT_RC(MPIAR_SUCCESS, mpiar_wait(&r[k]));
      }
    } else {
      MT_RC(MPIAR_SUCCESS, mpiar_startall(3, r));
      MT_RC(MPIAR_SUCCESS, mpiar_waitall(3, r));
    }
    int bad = 0;
    for (int i = 0; i < N; i++) {
      bad += b[i] != it * 7 + i;
    }
    for (int i = 0; i < RS_N; i++) {
      bad += rs[i] != size * (size - 1) / 2 + size * it * (rank * RS_N + i);
    }
    for (int q = 0; q < size; q++) {
      for (int i = 0; i < AG_N; i++) {
        bad += ag_out[q * AG_N + i] != q * 100000 + it + i;
      }
    }
    MT_CHECK(bad == 0, "persistent bcast / reduce-scatter / allgather, round %d: %d wrong", it,
             bad);
  }
  MT_RC(MPIAR_SUCCESS, mpiar_free(g));
  /* Their memory is gone: every rank's start fails (mpiar_free is collective). */
  MT_RC(MPIAR_ERR_INVALID_ARG, mpiar_start(&r[1]));
  MT_RC(MPIAR_SUCCESS, mpiar_start(&r[0]));
  MT_RC(MPIAR_SUCCESS, mpiar_wait(&r[0]));
  for (int k = 0; k < 3; k++) {
    MT_RC(MPIAR_SUCCESS, mpiar_request_free(&r[k]));
  }
}

/* Reduce-scatter, allgather and broadcast on shared buffers: every datatype (with an operation
 * that applies), counts from 1 to beyond the inline payload and the streaming threshold. */
static void test_colls(int quick) {
  const size_t big = quick ? 20011 : 300007;
  const size_t counts[] = {1, 1000, 4099, big, 7};
  const int ncounts = sizeof counts / sizeof counts[0];
  size_t cap = big * 8 * (size_t)size + 64;
  char *in = NULL, *out = NULL;
  MT_RC(MPIAR_SUCCESS, mpiar_alloc(MPI_COMM_WORLD, cap, (void **)&in));
  MT_RC(MPIAR_SUCCESS, mpiar_alloc(MPI_COMM_WORLD, cap, (void **)&out));
  const mpiar_op_t ops[] = {MPIAR_SUM, MPIAR_MAX, MPIAR_AVG, MPIAR_BXOR, MPIAR_MIN, MPIAR_PROD};
  uint64_t seed = 9001;
  int i = 0;
  /* Quick: every other datatype (8, 32 and 16 bits, floats of 16 and 64), the first 4 counts. */
  for (int t = 0; t <= (int)MPIAR_FLOAT64; t += quick ? 2 : 1) {
    for (int k = 0; k < ncounts - quick; k++, i++) {
      mpiar_op_t op = ops[i % 6];
      while (!valid((mpiar_dtype_t)t, op)) {
        op = ops[++i % 6];
      }
      if (counts[k] == big && t != MPIAR_FLOAT32 && t != MPIAR_FLOAT16 && t != MPIAR_INT64) {
        continue;
      }
      size_t off = (size_t)(k % 3) * mpiar_dtype_size((mpiar_dtype_t)t);
      for (int coll = 0; coll < 3; coll++) {
        /* Against the MPI path: every other count of the reduce-scatter (the order of the
         * reduction), one count of the copies (whose exact result is checked every time). */
        int vs_mpi = coll == 0 ? k % 2 == 0 || counts[k] == big : k == 0;
        one_coll(coll, in + off, out + off, counts[k], (mpiar_dtype_t)t, op, (k + t + coll) % 2,
                 (k + coll) % 3 == 0, vs_mpi, seed++);
      }
    }
  }
  test_persistent((int32_t *)(void *)in); /* 4 x 3001 elements of the same allocation */
  MT_RC(MPIAR_SUCCESS, mpiar_free(out));
  MT_RC(MPIAR_SUCCESS, mpiar_free(in));
}

/* Mismatched broadcast roots (ranks 0 and 1), and ranks that gather while those broadcast
 * (ranks 2 and up), on shared buffers: an error on every rank, not a wrong result. */
static void test_coll_mismatch(void) {
  if (size < 2) {
    return;
  }
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  int32_t *sh = NULL;
  MT_RC(MPIAR_SUCCESS, mpiar_alloc(comm, 64 * (size_t)size * sizeof(int32_t), (void **)&sh));
  int rc = rank < 2 ? mpiar_bcast(sh, 64, MPIAR_INT32, rank, comm)
                    : mpiar_allgather(MPIAR_IN_PLACE, sh, 64, MPIAR_INT32, comm);
  MT_CHECK(rc == MPIAR_ERR_MISMATCH || rc == MPIAR_ERR_COMM_BROKEN, "mismatch: %s (%s)",
           mpiar_err_name(rc), mpiar_last_error());
  MT_RC(MPIAR_ERR_COMM_BROKEN, mpiar_allgather(MPIAR_IN_PLACE, sh, 4, MPIAR_INT32, comm));
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
    /* 0 blocking in place, 1 not, 2 nonblocking x2, 3 mixed, 4 allgather, 5 reduce-scatter in
     * place and a broadcast */
    int mode = (int)((x >> 4) % 6);
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
    } else if (mode == 4) {
      size_t m = n < maxn / (size_t)size ? n : maxn / (size_t)size;
      MT_RC(MPIAR_SUCCESS, mpiar_allgather(v, b, m, MPIAR_INT64, MPI_COMM_WORLD));
      for (int q = 0; q < size; q++) {
        for (size_t i = 0; i < m; i++) {
          bad += b[(size_t)q * m + i] != (int64_t)(c * 31 + q * 1000 + (int)i);
        }
      }
      n = 0; /* v is this rank's input still */
    } else if (mode == 5) {
      int64_t *w = a + 2 * maxn;
      size_t m = n < 2 * maxn / (size_t)size ? n : 2 * maxn / (size_t)size;
      for (size_t j = 0; j < m * (size_t)size; j++) {
        w[j] = (int64_t)(c * 31 + rank * 1000) + (int64_t)j;
      }
      MT_RC(MPIAR_SUCCESS, mpiar_reduce_scatter_block(MPIAR_IN_PLACE, w, m, MPIAR_INT64, MPIAR_SUM,
                                                      MPI_COMM_WORLD));
      for (size_t i = 0; i < m; i++) {
        bad += w[i] != want0 + (int64_t)size * (int64_t)((size_t)rank * m + i);
      }
      int root = c % size;
      MT_RC(MPIAR_SUCCESS, mpiar_bcast(v, n, MPIAR_INT64, root, MPI_COMM_WORLD));
      for (size_t i = 0; i < n; i++) {
        bad += v[i] != (int64_t)(c * 31 + root * 1000 + (int)i);
      }
      n = 0;
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
  test_colls(quick);
  test_stress(200);
  /* Allocations left live: MPI_Finalize frees them. */
  void *left = NULL;
  MT_RC(MPIAR_SUCCESS, mpiar_alloc(MPI_COMM_WORLD, 1000, &left));
  test_mismatch();
  test_coll_mismatch();
  test_deadline();
  return mt_finish("shm");
}
