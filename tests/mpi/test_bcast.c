/*
 * Broadcast: every root, counts {0, 1, p-1, p, p+1, a prime, 1 MiB}, both algorithms and auto,
 * several datatypes; every rank must end with the root's bits. Also interleaved with allreduce
 * on the same communicator, and a bad algorithm name.
 */
#include <stdint.h>

#include "mpi_test.h"

static int rank, size;

static unsigned char pattern(int root, size_t i) {
  return (unsigned char)((i * 131u + (size_t)root * 17u + (i >> 8)) & 0xff);
}

static void run_case(const char *alg, mpiar_dtype_t t, size_t count, int root) {
  size_t bytes = count * mpiar_dtype_size(t);
  unsigned char *buf = malloc(bytes + 16);
  for (size_t i = 0; i < bytes + 16; i++) {
    buf[i] = rank == root ? pattern(root, i) : 0xEE;
  }
  mpiar_options_t opts = MPIAR_OPTIONS_INIT;
  opts.algorithm = alg;
  int rc = mpiar_bcast_ex(buf, count, t, root, MPI_COMM_WORLD, &opts);
  MT_CHECK(rc == MPIAR_SUCCESS, "%s %s count %zu root %d: %s: %s", alg, mpiar_dtype_name(t), count,
           root, mpiar_err_name(rc), mpiar_last_error());
  for (size_t i = 0; i < bytes; i++) {
    if (buf[i] != pattern(root, i)) {
      MT_CHECK(0, "%s %s count %zu root %d: byte %zu = %u, expected %u", alg, mpiar_dtype_name(t),
               count, root, i, buf[i], pattern(root, i));
      break;
    }
  }
  for (size_t i = bytes; i < bytes + 16; i++) {
    if (buf[i] != (rank == root ? pattern(root, i) : 0xEE)) {
      MT_CHECK(0, "%s wrote past the end (count %zu)", alg, count);
      break;
    }
  }
  free(buf);
}

int main(int argc, char **argv) {
  mt_init(&argc, &argv);
  rank = mt_rank;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  size_t p = (size_t)size;
  size_t counts[] = {0, 1, p - 1, p, p + 1, 1009, (size_t)1 << 18};
  const char *algs[] = {"binomial", "scatter_allgather", "auto"};
  mpiar_dtype_t types[] = {MPIAR_UINT8, MPIAR_BFLOAT16, MPIAR_FLOAT32, MPIAR_FLOAT64};
  int oversubscribed = size > 2;
  for (size_t a = 0; a < 3; a++) {
    for (int root = 0; root < size; root++) {
      for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
        for (size_t t = 0; t < 4; t++) {
          /* Oversubscribed: every root and count, one datatype per (root, count). */
          if (oversubscribed && (t != (c + (size_t)root) % 4)) {
            continue;
          }
          size_t count = counts[c];
          if (c == 6) {
            count /= mpiar_dtype_size(types[t]); /* 1 MiB whatever the type */
            count *= 4;
          }
          run_case(algs[a], types[t], count, root);
        }
      }
    }
  }
  /* Interleaved with allreduce on the same communicator. */
  for (int i = 0; i < 5; i++) {
    int32_t v = rank + 1;
    MT_RC(MPIAR_SUCCESS,
          mpiar_allreduce(MPIAR_IN_PLACE, &v, 1, MPIAR_INT32, MPIAR_SUM, MPI_COMM_WORLD));
    MT_CHECK(v == size * (size + 1) / 2, "allreduce between broadcasts: %d", v);
    run_case("auto", MPIAR_INT32, 100 + (size_t)i, i % size);
  }
  /* Bad algorithm name: a clear error on every rank, buffer untouched. */
  int32_t x = 7;
  mpiar_options_t opts = MPIAR_OPTIONS_INIT;
  opts.algorithm = "ring";
  MT_RC(MPIAR_ERR_UNKNOWN_ALGORITHM, mpiar_bcast_ex(&x, 1, MPIAR_INT32, 0, MPI_COMM_WORLD, &opts));
  MT_CHECK(x == 7, "buffer changed by a refused broadcast");
  MT_RC(MPIAR_ERR_NULL_BUFFER, mpiar_bcast(NULL, 5, MPIAR_INT32, 0, MPI_COMM_WORLD));
  return mt_finish("bcast");
}
