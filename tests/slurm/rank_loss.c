/*
 * A rank lost in the middle of a job, as a node failure or the OOM killer leaves it: the last
 * rank raises SIGKILL after a few allreduces; the others go on calling mpiar_allreduce with a
 * deadline and must return its error (MPIAR_ERR_TIMEOUT, or MPIAR_ERR_COMM_BROKEN when a peer
 * that timed out first told them), not wait forever. Each survivor prints one line,
 *   rank R: survivor: MPIAR_ERR_...: detail
 * and exits with 3 without MPI_Finalize (a finalize needs the lost rank too), so the launcher
 * ends the job with an error. A survivor that sees anything else exits with 1.
 *
 *   rank_loss [TIMEOUT_MS]   (default 2000)
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <mpi.h>
#include <mpiar.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int timeout_ms = argc > 1 ? atoi(argv[1]) : 2000;
  if (size < 2 || timeout_ms <= 0) {
    fprintf(stderr, "rank_loss: needs at least 2 ranks and a positive deadline\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  enum { N = 1 << 14, ROUNDS_BEFORE = 5, ROUNDS = 1000 };
  static float v[N];
  mpiar_options_t opts = MPIAR_OPTIONS_INIT;
  opts.timeout_ms = timeout_ms;
  double t0 = 0;
  for (int round = 0; round < ROUNDS; round++) {
    if (rank == size - 1 && round == ROUNDS_BEFORE) {
      printf("rank %d: killing itself after %d allreduces\n", rank, round);
      fflush(stdout);
      raise(SIGKILL);
    }
    for (int i = 0; i < N; i++) {
      v[i] = 1.0f;
    }
    t0 = MPI_Wtime();
    int rc = mpiar_allreduce_ex(MPIAR_IN_PLACE, v, N, MPIAR_FLOAT32, MPIAR_SUM, MPI_COMM_WORLD,
                                &opts);
    if (rc == MPIAR_ERR_TIMEOUT || rc == MPIAR_ERR_COMM_BROKEN) {
      printf("rank %d: survivor: %s: after %.1f s in round %d: %s\n", rank, mpiar_err_name(rc),
             MPI_Wtime() - t0, round, mpiar_last_error());
      fflush(stdout);
      _exit(3);
    }
    if (rc != MPIAR_SUCCESS || v[0] != (float)size) {
      printf("rank %d: unexpected: %s in round %d (%s), v[0] = %g\n", rank, mpiar_err_name(rc),
             round, mpiar_last_error(), (double)v[0]);
      fflush(stdout);
      _exit(1);
    }
  }
  printf("rank %d: no error after %d rounds although a rank was killed\n", rank, ROUNDS);
  fflush(stdout);
  _exit(1);
}
