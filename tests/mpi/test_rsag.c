/*
 * Reduce-scatter (mpiar_reduce_scatter_block) and allgather (mpiar_allgather): every algorithm of
 * both registries and auto, counts {0, 1, 5, 1000} per rank, in place and not, blocking,
 * nonblocking and persistent (started twice), rotating over datatype/operation pairs. Data are
 * small integers, so every order of the reduction gives the same exact result; the elements
 * around each output must stay untouched. Reproducible mode: each block bit for bit equal to
 * mpiar_reduce_canonical over the ranks' inputs. The argument check finds an operation mismatch
 * on every rank; local argument errors (null buffer, overlap, unknown algorithm) leave the
 * buffers alone. Interleaved with allreduce on the same communicator.
 *
 * Usage: test_rsag [timeout]: timeout runs the deadline case instead (the last rank arrives 2 s
 * late, the others with a 300 ms deadline return MPIAR_ERR_TIMEOUT or MPIAR_ERR_COMM_BROKEN).
 */
#include <math.h>
#include <stdint.h>
#include <unistd.h>

#include "mpi_test.h"

static int rank, size;

/* Rank r's input element i, a small integer (exact in every type and order). */
static double value(int r, size_t i) {
  return (double)((int)((r * 7 + i * 3) % 11) - 5);
}

static void put(void *buf, mpiar_dtype_t t, size_t i, double v) {
  switch (t) {
  case MPIAR_INT32:
    ((int32_t *)buf)[i] = (int32_t)v;
    break;
  case MPIAR_INT64:
    ((int64_t *)buf)[i] = (int64_t)v;
    break;
  case MPIAR_FLOAT32:
    ((float *)buf)[i] = (float)v;
    break;
  case MPIAR_FLOAT64:
    ((double *)buf)[i] = v;
    break;
  case MPIAR_UINT8:
    ((uint8_t *)buf)[i] = (uint8_t)(int)(v + 5);
    break;
  default: { /* bfloat16: small integers are exact */
    float f = (float)v;
    uint32_t b;
    memcpy(&b, &f, 4);
    ((uint16_t *)buf)[i] = (uint16_t)(b >> 16);
    break;
  }
  }
}

static double reduce_ref(mpiar_op_t op, mpiar_dtype_t t, size_t i) {
  double acc = t == MPIAR_UINT8 ? value(0, i) + 5 : value(0, i);
  for (int r = 1; r < size; r++) {
    double x = t == MPIAR_UINT8 ? value(r, i) + 5 : value(r, i);
    acc = op == MPIAR_MAX ? fmax(acc, x) : op == MPIAR_MIN ? fmin(acc, x) : acc + x;
  }
  return acc;
}

/* Run @p mode 0 blocking, 1 nonblocking, 2 persistent (started twice). */
static int run(int rs, int mode, const void *send, void *recv, size_t count, mpiar_dtype_t t,
               mpiar_op_t op, const mpiar_options_t *o) {
  mpiar_request_t req = MPIAR_REQUEST_NULL;
  int rc;
  if (mode == 0) {
    return rs ? mpiar_reduce_scatter_block_ex(send, recv, count, t, op, MPI_COMM_WORLD, o)
              : mpiar_allgather_ex(send, recv, count, t, MPI_COMM_WORLD, o);
  }
  if (mode == 1) {
    rc = rs ? mpiar_ireduce_scatter_block(send, recv, count, t, op, MPI_COMM_WORLD, o, &req)
            : mpiar_iallgather(send, recv, count, t, MPI_COMM_WORLD, o, &req);
    return rc != MPIAR_SUCCESS ? rc : mpiar_wait(&req);
  }
  rc = rs ? mpiar_reduce_scatter_block_init(send, recv, count, t, op, MPI_COMM_WORLD, o, &req)
          : mpiar_allgather_init(send, recv, count, t, MPI_COMM_WORLD, o, &req);
  if (rc != MPIAR_SUCCESS) {
    return rc;
  }
  /* Twice: the second run must give the same result from the same (in place: restored) input. */
  if ((rc = mpiar_start(&req)) == MPIAR_SUCCESS) {
    rc = mpiar_wait(&req);
  }
  if (rc == MPIAR_SUCCESS && send != MPIAR_IN_PLACE) {
    if ((rc = mpiar_start(&req)) == MPIAR_SUCCESS) {
      rc = mpiar_wait(&req);
    }
  }
  int frc = mpiar_request_free(&req);
  return rc != MPIAR_SUCCESS ? rc : frc;
}

enum { GUARD = 16 };

static void rs_case(const char *alg, int mode, size_t count, int in_place, mpiar_dtype_t t,
                    mpiar_op_t op) {
  const size_t es = mpiar_dtype_size(t), all = count * (size_t)size;
  unsigned char *send = malloc(all * es + 1);
  unsigned char *recv = malloc((in_place ? all : count) * es + 2 * GUARD);
  const size_t rlen = (in_place ? all : count) * es;
  memset(recv, 0xEE, rlen + 2 * GUARD);
  unsigned char *out = recv + GUARD;
  for (size_t i = 0; i < all; i++) {
    put(in_place ? out : send, t, i, value(rank, i));
  }
  mpiar_options_t o = MPIAR_OPTIONS_INIT;
  o.algorithm = alg;
  int rc = run(1, mode, in_place ? MPIAR_IN_PLACE : send, out, count, t, op, &o);
  MT_CHECK(rc == MPIAR_SUCCESS, "reduce-scatter %s mode %d count %zu in_place %d %s %s: %s: %s",
           alg, mode, count, in_place, mpiar_dtype_name(t), mpiar_op_name(op),
           mpiar_err_name(rc), mpiar_last_error());
  unsigned char *want = malloc(count * es + 1);
  for (size_t i = 0; i < count; i++) {
    double v = reduce_ref(op, t, (size_t)rank * count + i);
    if (t == MPIAR_UINT8) {
      v -= 5; /* put() adds it back */
    }
    put(want, t, i, v);
  }
  if (rc == MPIAR_SUCCESS && memcmp(out, want, count * es) != 0) {
    MT_CHECK(0, "reduce-scatter %s mode %d count %zu in_place %d %s %s: wrong result", alg, mode,
             count, in_place, mpiar_dtype_name(t), mpiar_op_name(op));
  }
  for (size_t i = 0; i < GUARD; i++) {
    if (recv[i] != 0xEE || recv[GUARD + rlen + i] != 0xEE) {
      MT_CHECK(0, "reduce-scatter %s wrote outside its buffer (count %zu)", alg, count);
      break;
    }
  }
  free(send);
  free(recv);
  free(want);
}

static void ag_case(const char *alg, int mode, size_t count, int in_place, mpiar_dtype_t t) {
  const size_t es = mpiar_dtype_size(t), all = count * (size_t)size;
  unsigned char *send = malloc(count * es + 1);
  unsigned char *recv = malloc(all * es + 2 * GUARD);
  memset(recv, 0xEE, all * es + 2 * GUARD);
  unsigned char *out = recv + GUARD;
  for (size_t i = 0; i < count; i++) {
    put(in_place ? out + (size_t)rank * count * es : send, t, i, value(rank, i));
  }
  mpiar_options_t o = MPIAR_OPTIONS_INIT;
  o.algorithm = alg;
  int rc = run(0, mode, in_place ? MPIAR_IN_PLACE : send, out, count, t, MPIAR_SUM, &o);
  MT_CHECK(rc == MPIAR_SUCCESS, "allgather %s mode %d count %zu in_place %d %s: %s: %s", alg, mode,
           count, in_place, mpiar_dtype_name(t), mpiar_err_name(rc), mpiar_last_error());
  unsigned char *want = malloc(all * es + 1);
  for (int r = 0; r < size; r++) {
    for (size_t i = 0; i < count; i++) {
      put(want + (size_t)r * count * es, t, i, value(r, i));
    }
  }
  if (rc == MPIAR_SUCCESS && memcmp(out, want, all * es) != 0) {
    MT_CHECK(0, "allgather %s mode %d count %zu in_place %d %s: wrong result", alg, mode, count,
             in_place, mpiar_dtype_name(t));
  }
  for (size_t i = 0; i < GUARD; i++) {
    if (recv[i] != 0xEE || recv[GUARD + all * es + i] != 0xEE) {
      MT_CHECK(0, "allgather %s wrote outside its buffer (count %zu)", alg, count);
      break;
    }
  }
  free(send);
  free(recv);
  free(want);
}

/* Reproducible mode: floats of mixed magnitude, each block against the canonical reduction. */
static void repro_case(const char *alg, size_t count, int in_place) {
  const size_t all = count * (size_t)size;
  float *in = malloc((size_t)size * all * sizeof *in + 4);
  const void **ins = malloc((size_t)size * sizeof *ins);
  uint64_t st = 0x9e3779b97f4a7c15ull;
  for (size_t i = 0; i < (size_t)size * all; i++) {
    st ^= st << 13, st ^= st >> 7, st ^= st << 17;
    in[i] = (float)((double)(st % 20001) - 10000.0) * ldexpf(1.0f, (int)(st >> 40) % 24 - 12);
  }
  for (int r = 0; r < size; r++) {
    ins[r] = in + (size_t)r * all;
  }
  float *want = malloc(all * sizeof *want + 4);
  MT_RC(MPIAR_SUCCESS, mpiar_reduce_canonical(want, ins, size, all, MPIAR_FLOAT32, MPIAR_SUM));
  float *send = malloc(all * sizeof *send + 4), *recv = malloc(all * sizeof *recv + 4);
  memcpy(in_place ? recv : send, in + (size_t)rank * all, all * sizeof *send);
  mpiar_options_t o = MPIAR_OPTIONS_INIT;
  o.algorithm = alg;
  o.reproducible = 1;
  int rc = mpiar_reduce_scatter_block_ex(in_place ? MPIAR_IN_PLACE : send, recv, count,
                                         MPIAR_FLOAT32, MPIAR_SUM, MPI_COMM_WORLD, &o);
  MT_CHECK(rc == MPIAR_SUCCESS, "reproducible %s: %s", alg, mpiar_last_error());
  if (rc == MPIAR_SUCCESS &&
      memcmp(recv, want + (size_t)rank * count, count * sizeof *recv) != 0) {
    MT_CHECK(0, "reproducible %s count %zu in_place %d: not the canonical bits", alg, count,
             in_place);
  }
  free(in);
  free(ins);
  free(want);
  free(send);
  free(recv);
}

static void errors(void) {
  int32_t a[64] = {0}, b[64] = {0};
  for (int i = 0; i < 64; i++) {
    b[i] = 42;
  }
  /* Local errors: the same on every rank, nothing written. */
  MT_RC(MPIAR_ERR_NULL_BUFFER, mpiar_reduce_scatter_block(a, NULL, 1, MPIAR_INT32, MPIAR_SUM,
                                                          MPI_COMM_WORLD));
  MT_RC(MPIAR_ERR_NULL_BUFFER, mpiar_allgather(NULL, b, 1, MPIAR_INT32, MPI_COMM_WORLD));
  if (size <= 32) {
    /* The send buffer is the receive buffer: an overlap for an allgather, which is refused. */
    MT_RC(MPIAR_ERR_OVERLAP, mpiar_allgather(b, b, 2, MPIAR_INT32, MPI_COMM_WORLD));
    /* Send elements [0, 2p), receive [1, 3): a partial overlap. */
    MT_RC(MPIAR_ERR_OVERLAP, mpiar_reduce_scatter_block(b, b + 1, 2, MPIAR_INT32, MPIAR_SUM,
                                                        MPI_COMM_WORLD));
  }
  MT_CHECK(b[0] == 42 && b[1] == 42, "a refused call wrote its buffer");
  mpiar_options_t o = MPIAR_OPTIONS_INIT;
  o.algorithm = "bruck"; /* an allgather's, not a reduce-scatter's */
  MT_RC(MPIAR_ERR_UNKNOWN_ALGORITHM,
        mpiar_reduce_scatter_block_ex(a, b, 1, MPIAR_INT32, MPIAR_SUM, MPI_COMM_WORLD, &o));
  o.algorithm = "recursive_halving";
  MT_RC(MPIAR_ERR_UNKNOWN_ALGORITHM, mpiar_allgather_ex(a, b, 1, MPIAR_INT32, MPI_COMM_WORLD, &o));
  MT_RC(MPIAR_ERR_BAD_DTYPE_OP, mpiar_reduce_scatter_block(a, b, 1, MPIAR_UINT8, MPIAR_AVG,
                                                           MPI_COMM_WORLD));
  /* The argument check: rank 0 asks for another operation; every rank is told. */
  if (size > 1) {
    mpiar_options_t c = MPIAR_OPTIONS_INIT;
    c.check = 1;
    int rc = mpiar_reduce_scatter_block_ex(a, b, 1, MPIAR_INT32, rank == 0 ? MPIAR_MAX : MPIAR_SUM,
                                           MPI_COMM_WORLD, &c);
    MT_CHECK(rc == MPIAR_ERR_MISMATCH, "operation mismatch: %s", mpiar_err_name(rc));
    MT_CHECK(strstr(mpiar_last_error(), "operation") != NULL, "detail: %s", mpiar_last_error());
    /* A count mismatch of an allgather, also found by the check. */
    rc = mpiar_allgather_ex(a, b, rank == 0 ? 2 : 1, MPIAR_INT32, MPI_COMM_WORLD, &c);
    MT_CHECK(rc == MPIAR_ERR_MISMATCH, "count mismatch: %s", mpiar_err_name(rc));
    MT_CHECK(strstr(mpiar_last_error(), "allgather") != NULL || strstr(mpiar_last_error(), "count"),
             "detail: %s", mpiar_last_error());
  }
}

static int timeout_case(void) {
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  const size_t count = 1024;
  float *send = calloc(count * (size_t)size, sizeof *send), *recv = calloc(count, sizeof *recv);
  MT_RC(MPIAR_SUCCESS, mpiar_comm_init(comm, NULL));
  mpiar_options_t o = MPIAR_OPTIONS_INIT;
  o.timeout_ms = 300;
  const int late = size - 1;
  for (int rs = 1; rs >= 0; rs--) {
    if (rank == late) {
      if (rs) {
        sleep(2);
      }
      int rc = rs ? mpiar_reduce_scatter_block_ex(send, recv, count, MPIAR_FLOAT32, MPIAR_SUM,
                                                  comm, &o)
                  : mpiar_allgather_ex(recv, send, count, MPIAR_FLOAT32, comm, &o);
      MT_CHECK(rc == MPIAR_SUCCESS || rc == MPIAR_ERR_TIMEOUT || rc == MPIAR_ERR_COMM_BROKEN,
               "late rank: %s", mpiar_err_name(rc));
      continue;
    }
    double t0 = MPI_Wtime();
    int rc = rs ? mpiar_reduce_scatter_block_ex(send, recv, count, MPIAR_FLOAT32, MPIAR_SUM, comm,
                                                &o)
                : mpiar_allgather_ex(recv, send, count, MPIAR_FLOAT32, comm, &o);
    double elapsed = MPI_Wtime() - t0;
    if (rs) {
      MT_CHECK(rc == MPIAR_ERR_TIMEOUT || rc == MPIAR_ERR_COMM_BROKEN,
               "reduce-scatter: expected a timeout, got %s", mpiar_err_name(rc));
      /* Never before its own deadline when it timed out itself; a notice from a rank that entered
       * earlier may end the wait sooner. Seconds of slack for loaded machines and sanitizers. */
      MT_CHECK((rc != MPIAR_ERR_TIMEOUT || elapsed >= 0.29) && elapsed < 10.0,
               "%s after %.3f s", mpiar_err_name(rc), elapsed);
    } else {
      /* The context is broken now: later calls are refused. */
      MT_CHECK(rc == MPIAR_ERR_COMM_BROKEN, "allgather after the failure: %s",
               mpiar_err_name(rc));
    }
  }
  MPI_Comm_free(&comm);
  free(send);
  free(recv);
  return mt_finish("rsag_timeout");
}

int main(int argc, char **argv) {
  mt_init(&argc, &argv);
  rank = mt_rank;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (argc > 1 && strcmp(argv[1], "timeout") == 0) {
    return timeout_case();
  }
  const size_t counts[] = {0, 1, 5, 1000};
  const char *rs_algs[] = {"ring", "recursive_halving", "direct", "repro_direct", "auto"};
  const char *ag_algs[] = {"ring", "recursive_doubling", "bruck", "direct", "auto"};
  const struct {
    mpiar_dtype_t t;
    mpiar_op_t op;
  } pairs[] = {{MPIAR_INT32, MPIAR_SUM},   {MPIAR_FLOAT32, MPIAR_SUM}, {MPIAR_FLOAT64, MPIAR_MAX},
               {MPIAR_INT64, MPIAR_MIN},   {MPIAR_UINT8, MPIAR_MAX},   {MPIAR_BFLOAT16, MPIAR_SUM}};
  int i = 0;
  for (int a = 0; a < 5; a++) {
    for (size_t c = 0; c < 4; c++) {
      for (int ip = 0; ip < 2; ip++, i++) {
        rs_case(rs_algs[a], i % 3, counts[c], ip, pairs[i % 6].t, pairs[i % 6].op);
        ag_case(ag_algs[a], (i + 1) % 3, counts[c], ip, pairs[(i + 2) % 6].t);
      }
    }
  }
  for (int a = 0; a < 5; a++) {
    repro_case(rs_algs[a], 7, a % 2);
  }
  /* Interleaved with allreduce on the same communicator. */
  for (int k = 0; k < 3; k++) {
    int32_t v = rank + 1;
    MT_RC(MPIAR_SUCCESS,
          mpiar_allreduce(MPIAR_IN_PLACE, &v, 1, MPIAR_INT32, MPIAR_SUM, MPI_COMM_WORLD));
    MT_CHECK(v == size * (size + 1) / 2, "allreduce between: %d", v);
    rs_case("auto", 0, 3 + (size_t)k, 0, MPIAR_INT32, MPIAR_SUM);
    ag_case("auto", 0, 3 + (size_t)k, 0, MPIAR_INT32);
  }
  errors();
  return mt_finish("rsag");
}
