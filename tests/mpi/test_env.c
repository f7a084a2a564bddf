/*
 * Environment handling, one setting per run (the environment is read once per process):
 *   test_env EXPECTED_ERROR_NAME [VARIABLE_NAMED_IN_DETAIL] [ALGORITHM_AUTO_MUST_PICK]
 * runs one allreduce and checks its return code, that the detail names the variable, and what
 * mpiar_select() reports.
 */
#include "mpi_test.h"

int main(int argc, char **argv) {
  mt_init(&argc, &argv);
  if (argc < 2) {
    fprintf(stderr, "usage: test_env EXPECTED_ERROR_NAME [VARIABLE] [ALGORITHM]\n");
    MPI_Finalize();
    return 2;
  }
  const char *expect = argv[1];
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  double v[100];
  for (int i = 0; i < 100; i++) {
    v[i] = 1.0;
  }
  int rc = mpiar_allreduce(MPIAR_IN_PLACE, v, 100, MPIAR_FLOAT64, MPIAR_SUM, MPI_COMM_WORLD);
  MT_CHECK(strcmp(mpiar_err_name(rc), expect) == 0, "got %s (%s), expected %s", mpiar_err_name(rc),
           mpiar_last_error(), expect);
  if (argc > 2 && strcmp(argv[2], "-") != 0) {
    MT_CHECK(strstr(mpiar_last_error(), argv[2]) != NULL, "detail '%s' does not name %s",
             mpiar_last_error(), argv[2]);
  }
  if (rc == MPIAR_SUCCESS) {
    MT_CHECK(v[99] == (double)size, "sum %g", v[99]);
  } else {
    /* A malformed setting is an error wherever it is read: also when the call names an
     * algorithm (which MPIAR_ALGORITHM would not decide), and for the other entry points. */
    mpiar_options_t opts = MPIAR_OPTIONS_INIT;
    opts.algorithm = "ring";
    int rc2 = mpiar_allreduce_ex(MPIAR_IN_PLACE, v, 100, MPIAR_FLOAT64, MPIAR_SUM, MPI_COMM_WORLD,
                                 &opts);
    MT_CHECK(rc2 == rc, "with the algorithm named: %s (%s)", mpiar_err_name(rc2),
             mpiar_last_error());
    MT_CHECK(mpiar_bcast(v, 100, MPIAR_FLOAT64, 0, MPI_COMM_WORLD) == rc, "bcast: %s",
             mpiar_last_error());
    const char *alg = NULL;
    size_t seg = 0;
    MT_CHECK(mpiar_select(1024, size, &alg, &seg) == rc, "select: %s", mpiar_last_error());
  }
  if (argc > 3) {
    const char *alg = NULL;
    size_t seg = 0;
    MT_RC(MPIAR_SUCCESS, mpiar_select(1 << 20, size, &alg, &seg));
    MT_CHECK(alg != NULL && strcmp(alg, argv[3]) == 0, "auto picked %s, expected %s",
             alg ? alg : "(null)", argv[3]);
    /* A per-call option beats the environment. */
    mpiar_options_t opts = MPIAR_OPTIONS_INIT;
    opts.algorithm = "recursive_doubling";
    MT_RC(MPIAR_SUCCESS, mpiar_allreduce_ex(MPIAR_IN_PLACE, v, 100, MPIAR_FLOAT64, MPIAR_SUM,
                                            MPI_COMM_WORLD, &opts));
  }
  return mt_finish("env");
}
