/*
 * Interrupt checks (mpiar_set_interrupt): a wait for a late rank is abandoned when the check asks,
 * with MPIAR_ERR_INTERRUPTED on that rank and MPIAR_ERR_COMM_BROKEN naming the interruption on
 * the others, never a wait for the late rank. The last rank is late by 3 s; rank 0's check asks
 * to stop after 0.3 s. Bounds are seconds wide.
 *   test_interrupt blocking|creation|wait|waitall|never
 */
#include <unistd.h>

#include "mpi_test.h"

static double started;
static int calls;

static int stop_after(void *arg) {
  calls++;
  return MPI_Wtime() - started > *(const double *)arg;
}

int main(int argc, char **argv) {
  mt_init(&argc, &argv);
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const char *c = argc > 1 ? argv[1] : "";
  const int late = mt_rank == size - 1;
  enum { N = 1000 };
  static float v[N];
  for (int i = 0; i < N; i++) {
    v[i] = 1.0f;
  }
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  if (strcmp(c, "creation") != 0) {
    MT_RC(MPIAR_SUCCESS, mpiar_allreduce(MPIAR_IN_PLACE, v, N, MPIAR_FLOAT32, MPIAR_SUM, comm));
  }
  double limit = strcmp(c, "never") == 0 ? 1e9 : 0.3;
  if (mt_rank == 0) {
    MT_RC(MPIAR_SUCCESS, mpiar_set_interrupt(stop_after, &limit));
  }
  if (late) {
    sleep(3);
  }
  started = MPI_Wtime();
  int rc = MPIAR_SUCCESS;
  if (strcmp(c, "creation") == 0) {
    /* The late rank's creation waits for rank 0, which gave up: its deadline ends it (as for a
     * rank late for the first call, see test_hardening). */
    mpiar_options_t opts = MPIAR_OPTIONS_INIT;
    opts.timeout_ms = late ? 1500 : 0;
    rc = mpiar_allreduce_ex(MPIAR_IN_PLACE, v, N, MPIAR_FLOAT32, MPIAR_SUM, comm, &opts);
  } else if (strcmp(c, "blocking") == 0 || strcmp(c, "never") == 0) {
    rc = mpiar_allreduce(MPIAR_IN_PLACE, v, N, MPIAR_FLOAT32, MPIAR_SUM, comm);
  } else if (strcmp(c, "wait") == 0 || strcmp(c, "waitall") == 0) {
    mpiar_request_t r[2] = {MPIAR_REQUEST_NULL, MPIAR_REQUEST_NULL};
    static float w[N];
    MT_RC(MPIAR_SUCCESS,
          mpiar_iallreduce(MPIAR_IN_PLACE, v, N, MPIAR_FLOAT32, MPIAR_SUM, comm, NULL, &r[0]));
    MT_RC(MPIAR_SUCCESS,
          mpiar_iallreduce(MPIAR_IN_PLACE, w, N, MPIAR_FLOAT32, MPIAR_SUM, comm, NULL, &r[1]));
    if (strcmp(c, "wait") == 0) {
      rc = mpiar_wait(&r[0]);
      int rc2 = mpiar_wait(&r[1]);
      if (mt_rank == 0) {
        MT_CHECK(rc2 == MPIAR_ERR_COMM_BROKEN, "the second request: %s (%s)", mpiar_err_name(rc2),
                 mpiar_last_error());
      }
    } else {
      rc = mpiar_waitall(2, r);
    }
    MT_CHECK(r[0] == MPIAR_REQUEST_NULL && r[1] == MPIAR_REQUEST_NULL, "requests left");
  } else {
    fprintf(stderr, "unknown case '%s'\n", c);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  double spent = MPI_Wtime() - started;
  if (strcmp(c, "never") == 0) {
    MT_RC(MPIAR_SUCCESS, rc);
    if (mt_rank == 0) {
      MT_CHECK(calls >= 10, "the check ran %d times in a 3 s wait", calls);
    }
  } else if (mt_rank == 0) {
    MT_CHECK(rc == MPIAR_ERR_INTERRUPTED, "rank 0: %s (%s)", mpiar_err_name(rc),
             mpiar_last_error());
    MT_CHECK(strstr(mpiar_last_error(), "interrupt") != NULL, "detail '%s'", mpiar_last_error());
    MT_CHECK(spent < 2.0, "rank 0 returned after %.2f s", spent);
  } else if (strcmp(c, "creation") == 0) {
    MT_CHECK(rc != MPIAR_SUCCESS, "rank %d's first call succeeded", mt_rank);
  } else {
    /* Told by rank 0's notice; a rank that had received all it needed before rank 0 gave up
     * (two ranks: rank 0's data left first) may complete its call. */
    MT_CHECK(rc == MPIAR_SUCCESS ||
                 (rc == MPIAR_ERR_COMM_BROKEN && strstr(mpiar_last_error(), "interrupt") != NULL),
             "rank %d: %s (%s)", mt_rank, mpiar_err_name(rc), mpiar_last_error());
  }
  if (strcmp(c, "never") != 0) {
    /* Later calls on the communicator fail at once. */
    MT_CHECK(mpiar_allreduce(MPIAR_IN_PLACE, v, N, MPIAR_FLOAT32, MPIAR_SUM, comm) != MPIAR_SUCCESS,
             "a call after the interruption succeeded");
  }
  mpiar_set_interrupt(NULL, NULL);
  MPI_Comm_free(&comm);
  return mt_finish(c);
}
