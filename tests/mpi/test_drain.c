/*
 * Release after a failure ends when every rank has released: rank 0's call times out while the
 * last rank is away (sleeping, as a stopped or descheduled process would be), the last rank's own
 * call then succeeds (the data it needs had arrived), and both finalize. Rank 0's MPI_Finalize
 * must wait for the last rank's release, not the drain's whole limit (5 s): the last rank, whose
 * calls all succeeded, still takes part in the drain. The bound is seconds wide.
 */
#include <time.h>
#include <unistd.h>

#include "mpi_test.h"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
  mt_init(&argc, &argv);
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  float v[1000];
  for (int i = 0; i < 1000; i++) {
    v[i] = 1.0f;
  }
  MT_RC(MPIAR_SUCCESS,
        mpiar_allreduce(MPIAR_IN_PLACE, v, 1000, MPIAR_FLOAT32, MPIAR_SUM, MPI_COMM_WORLD));
  /* Agree on the verdict of the part that can still use MPI. */
  int failures = 0;
  MPI_Allreduce(&mt_failures, &failures, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  mpiar_options_t opts = MPIAR_OPTIONS_INIT;
  opts.timeout_ms = 500;
  if (mt_rank == size - 1) {
    sleep(1);
  }
  int rc = mpiar_allreduce_ex(MPIAR_IN_PLACE, v, 1000, MPIAR_FLOAT32, MPIAR_SUM, MPI_COMM_WORLD,
                              &opts);
  if (mt_rank == 0) {
    /* Its own deadline, or another waiting rank's failure notice (three ranks or more). */
    MT_CHECK(rc == MPIAR_ERR_TIMEOUT || rc == MPIAR_ERR_COMM_BROKEN, "rank 0's call: %s (%s)",
             mpiar_err_name(rc), mpiar_last_error());
  }
  double t0 = now();
  MPI_Finalize();
  double spent = now() - t0;
  if (mt_rank == 0) {
    MT_CHECK(spent < 4.0, "MPI_Finalize took %.2f s (the drain waited out its limit)", spent);
  }
  printf("drain: rank %d: call %s, MPI_Finalize %.2f s: %s\n", mt_rank, mpiar_err_name(rc), spent,
         mt_failures + failures ? "FAILED" : "passed");
  return mt_failures + failures ? 1 : 0;
}
