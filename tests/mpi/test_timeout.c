/*
 * Deadline: the last rank arrives 2 s late; the others, with a 300 ms deadline, return within
 * seconds (never before the deadline): MPIAR_ERR_TIMEOUT with a detail naming the waiting step and
 * the peer, or MPIAR_ERR_COMM_BROKEN when another rank timed out first and told them (its detail
 * then names that rank's timeout). The broken communicator then refuses further calls, and a
 * fresh one works.
 */
#include <unistd.h>

#include "mpi_test.h"

int main(int argc, char **argv) {
  mt_init(&argc, &argv);
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  enum { N = 4096 };
  static float v[N];
  for (int i = 0; i < N; i++) {
    v[i] = 1.0f;
  }
  /* Create the context everywhere first so that the late rank is late for the data only. */
  MT_RC(MPIAR_SUCCESS, mpiar_allreduce(MPIAR_IN_PLACE, v, 1, MPIAR_FLOAT32, MPIAR_SUM, comm));
  int late = size - 1;
  mpiar_options_t opts = MPIAR_OPTIONS_INIT;
  opts.timeout_ms = 300;
  if (mt_rank == late) {
    sleep(2);
    /* Its partners have given up: it may finish (their first messages reached it) or time
     * out; either way it must return. */
    int rc = mpiar_allreduce_ex(MPIAR_IN_PLACE, v, N, MPIAR_FLOAT32, MPIAR_SUM, comm, &opts);
    MT_CHECK(rc == MPIAR_SUCCESS || rc == MPIAR_ERR_TIMEOUT || rc == MPIAR_ERR_COMM_BROKEN,
             "late rank: %s", mpiar_err_name(rc));
  } else {
    double t0 = MPI_Wtime();
    int rc = mpiar_allreduce_ex(MPIAR_IN_PLACE, v, N, MPIAR_FLOAT32, MPIAR_SUM, comm, &opts);
    double elapsed = MPI_Wtime() - t0;
    MT_CHECK(rc == MPIAR_ERR_TIMEOUT || rc == MPIAR_ERR_COMM_BROKEN,
             "expected a timeout, got %s", mpiar_err_name(rc));
    /* Seconds of slack: the suite runs on busy machines and under sanitizers. */
    MT_CHECK(elapsed >= 0.29 && elapsed < 5.0, "returned after %.3f s", elapsed);
    const char *d = mpiar_last_error();
    char me[32];
    snprintf(me, sizeof me, "rank %d", mt_rank);
    if (rc == MPIAR_ERR_TIMEOUT) {
      MT_CHECK(strstr(d, me) != NULL && strstr(d, "step") != NULL && strstr(d, "timed out"),
               "detail: %s", d);
    } else {
      MT_CHECK(strstr(d, "failed") != NULL && strstr(d, "timed out") != NULL, "detail: %s", d);
    }
    /* Whoever it waits on, the detail names a peer rank. */
    MT_CHECK(strstr(d, "from rank") != NULL || strstr(d, "to rank") != NULL, "detail: %s", d);
    if (mt_rank == 0) {
      printf("timeout detail: %s\n", d);
    }
    /* The context is broken now: no silent mismatch. */
    MT_RC(MPIAR_ERR_COMM_BROKEN,
          mpiar_allreduce(MPIAR_IN_PLACE, v, N, MPIAR_FLOAT32, MPIAR_SUM, comm));
  }
  MPI_Comm_free(&comm);
  /* A fresh communicator works. */
  MPI_Comm fresh;
  MPI_Comm_dup(MPI_COMM_WORLD, &fresh);
  for (int i = 0; i < N; i++) {
    v[i] = 2.0f;
  }
  MT_RC(MPIAR_SUCCESS, mpiar_allreduce(MPIAR_IN_PLACE, v, N, MPIAR_FLOAT32, MPIAR_SUM, fresh));
  MT_CHECK(v[N - 1] == 2.0f * size, "fresh communicator: %g", v[N - 1]);
  MPI_Comm_free(&fresh);
  return mt_finish("timeout");
}
