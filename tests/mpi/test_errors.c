/*
 * Bad input: each case returns a clear error code with a detail, writes nothing to the receive
 * buffer and never aborts. Also: MPI not initialised and already finalised.
 */
#include "mpi_test.h"

#define N 64

static int untouched(const int *buf) {
  for (int i = 0; i < N; i++) {
    if (buf[i] != 0x5a5a5a5a) {
      return 0;
    }
  }
  return 1;
}

int main(int argc, char **argv) {
  /* Before MPI_Init: a clear error, not a crash. */
  int early[N] = {0};
  int early_out[N] = {0};
  int rc = mpiar_allreduce(early, early_out, N, MPIAR_INT32, MPIAR_SUM, MPI_COMM_WORLD);
  int before_init_ok = rc == MPIAR_ERR_MPI_STATE && strstr(mpiar_last_error(), "not initialized");

  mt_init(&argc, &argv);
  MT_CHECK(before_init_ok, "before MPI_Init: %s (%s)", mpiar_err_name(rc), mpiar_last_error());

  int in[N], out[N];
  for (int i = 0; i < N; i++) {
    in[i] = i;
    out[i] = 0x5a5a5a5a;
  }
  /* NULL buffers with count > 0. */
  MT_RC(MPIAR_ERR_NULL_BUFFER,
        mpiar_allreduce(in, NULL, N, MPIAR_INT32, MPIAR_SUM, MPI_COMM_WORLD));
  MT_RC(MPIAR_ERR_NULL_BUFFER,
        mpiar_allreduce(NULL, out, N, MPIAR_INT32, MPIAR_SUM, MPI_COMM_WORLD));
  MT_CHECK(strstr(mpiar_last_error(), "NULL") != NULL, "detail: %s", mpiar_last_error());
  MT_CHECK(untouched(out), "recvbuf written after a NULL send buffer");
  /* NULL with count 0 is fine. */
  MT_RC(MPIAR_SUCCESS, mpiar_allreduce(NULL, NULL, 0, MPIAR_INT32, MPIAR_SUM, MPI_COMM_WORLD));
  /* Unsupported pair: bxor on float32, avg on int32. */
  float fin[N], fout[N];
  memset(fin, 0, sizeof fin);
  memset(fout, 0x5a, sizeof fout);
  MT_RC(MPIAR_ERR_BAD_DTYPE_OP,
        mpiar_allreduce(fin, fout, N, MPIAR_FLOAT32, MPIAR_BXOR, MPI_COMM_WORLD));
  MT_CHECK(strstr(mpiar_last_error(), "bxor") && strstr(mpiar_last_error(), "float32"),
           "detail: %s", mpiar_last_error());
  MT_RC(MPIAR_ERR_BAD_DTYPE_OP,
        mpiar_allreduce(in, out, N, MPIAR_INT32, MPIAR_AVG, MPI_COMM_WORLD));
  MT_CHECK(untouched(out), "recvbuf written after an unsupported pair");
  /* Invalid enums. */
  MT_RC(MPIAR_ERR_INVALID_ARG,
        mpiar_allreduce(in, out, N, (mpiar_dtype_t)99, MPIAR_SUM, MPI_COMM_WORLD));
  MT_RC(MPIAR_ERR_INVALID_ARG,
        mpiar_allreduce(in, out, N, MPIAR_INT32, (mpiar_op_t)-1, MPI_COMM_WORLD));
  /* MPI_COMM_NULL. */
  MT_RC(MPIAR_ERR_COMM, mpiar_allreduce(in, out, N, MPIAR_INT32, MPIAR_SUM, MPI_COMM_NULL));
  MT_CHECK(strstr(mpiar_last_error(), "MPI_COMM_NULL") != NULL, "detail: %s", mpiar_last_error());
  /* An intercommunicator between two halves (needs at least 2 ranks). */
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size >= 2) {
    MPI_Comm half, inter;
    int color = mt_rank % 2;
    MPI_Comm_split(MPI_COMM_WORLD, color, mt_rank, &half);
    MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, color ? 0 : 1, 77, &inter);
    MT_RC(MPIAR_ERR_COMM, mpiar_allreduce(in, out, N, MPIAR_INT32, MPIAR_SUM, inter));
    MT_CHECK(strstr(mpiar_last_error(), "intercommunicator") != NULL, "detail: %s",
             mpiar_last_error());
    MPI_Comm_free(&inter);
    MPI_Comm_free(&half);
  }
  MT_CHECK(untouched(out), "recvbuf written after a bad communicator");
  /* Partial overlap of send and receive buffers (identical pointers mean in place). */
  int shared[2 * N];
  for (int i = 0; i < 2 * N; i++) {
    shared[i] = 0x5a5a5a5a;
  }
  MT_RC(MPIAR_ERR_OVERLAP,
        mpiar_allreduce(shared, shared + 1, N, MPIAR_INT32, MPIAR_SUM, MPI_COMM_WORLD));
  MT_RC(MPIAR_ERR_OVERLAP,
        mpiar_allreduce(shared + N - 1, shared, N, MPIAR_INT32, MPIAR_SUM, MPI_COMM_WORLD));
  MT_CHECK(untouched(shared) && untouched(shared + N), "overlapping buffers were written");
  /* Unknown algorithm name. */
  mpiar_options_t opts = MPIAR_OPTIONS_INIT;
  opts.algorithm = "bogus";
  MT_RC(MPIAR_ERR_UNKNOWN_ALGORITHM,
        mpiar_allreduce_ex(in, out, N, MPIAR_INT32, MPIAR_SUM, MPI_COMM_WORLD, &opts));
  MT_CHECK(strstr(mpiar_last_error(), "bogus") != NULL, "detail: %s", mpiar_last_error());
  MT_CHECK(untouched(out), "recvbuf written after an unknown algorithm");
  /* Bad broadcast root. */
  MT_RC(MPIAR_ERR_INVALID_ARG, mpiar_bcast(in, N, MPIAR_INT32, size, MPI_COMM_WORLD));
  MT_RC(MPIAR_ERR_INVALID_ARG, mpiar_bcast(in, N, MPIAR_INT32, -1, MPI_COMM_WORLD));
  /* The error helpers. */
  MT_CHECK(strcmp(mpiar_err_name(MPIAR_ERR_TIMEOUT), "MPIAR_ERR_TIMEOUT") == 0, "err_name");
  MT_CHECK(strcmp(mpiar_strerror(MPIAR_SUCCESS), "success") == 0, "strerror");
  MT_CHECK(strcmp(mpiar_err_name(12345), "MPIAR_ERR_UNKNOWN") == 0, "unknown err_name");
  /* After all these failures the communicator still works. */
  for (int i = 0; i < N; i++) {
    out[i] = 0;
  }
  MT_RC(MPIAR_SUCCESS, mpiar_allreduce(in, out, N, MPIAR_INT32, MPIAR_SUM, MPI_COMM_WORLD));
  MT_CHECK(out[5] == 5 * size, "out[5] = %d", out[5]);

  int failures = 0;
  MPI_Allreduce(&mt_failures, &failures, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Finalize();
  /* After MPI_Finalize. */
  rc = mpiar_allreduce(in, out, N, MPIAR_INT32, MPIAR_SUM, MPI_COMM_WORLD);
  if (rc != MPIAR_ERR_MPI_STATE || strstr(mpiar_last_error(), "finalized") == NULL) {
    fprintf(stderr, "rank %d: after MPI_Finalize: %s (%s)\n", mt_rank, mpiar_err_name(rc),
            mpiar_last_error());
    failures++;
  }
  if (mt_rank == 0) {
    printf("errors: %s\n", failures ? "FAILED" : "passed");
  }
  return failures ? 1 : 0;
}
