/*
 * Fault injection: the k-th call of MPI_Isend, MPI_Irecv, MPI_Testsome, MPI_Test, MPI_Improbe or
 * MPI_Imrecv on one rank fails (faults.c). For every such call and k over the calls a round of
 * collectives makes, the round must end with an error on every rank (MPIAR_ERR_MPI where the
 * fault fired; MPIAR_ERR_COMM_BROKEN, or success followed by MPIAR_ERR_COMM_BROKEN on the next
 * call, elsewhere), release every context and request when the communicator is freed, and leave
 * the job able to finalize.
 *
 *   test_faults [CALL ...]   (default: all six)
 */
#include <limits.h>

#include "core/inspect.h"
#include "faults.h"
#include "mpi_test.h"

static int rank, size;

/* A round: small and large allreduces (posted and probed receives), a broadcast, two requests
 * outstanding at once, and an argument check. @return the first error, or MPIAR_SUCCESS. */
static int round_of_calls(MPI_Comm comm) {
  enum { BIG = 16384 };
  static float big[BIG], big2[BIG];
  double small[4] = {1, 2, 3, 4};
  mpiar_options_t o = MPIAR_OPTIONS_INIT;
  o.timeout_ms = 20000; /* no case may hang the suite */
  int rc = mpiar_allreduce_ex(MPIAR_IN_PLACE, small, 4, MPIAR_FLOAT64, MPIAR_SUM, comm, &o);
  if (rc == MPIAR_SUCCESS) {
    rc = mpiar_allreduce_ex(MPIAR_IN_PLACE, big, BIG, MPIAR_FLOAT32, MPIAR_SUM, comm, &o);
  }
  if (rc == MPIAR_SUCCESS) {
    rc = mpiar_bcast_ex(big, BIG, MPIAR_FLOAT32, size - 1, comm, &o);
  }
  if (rc == MPIAR_SUCCESS) {
    mpiar_request_t reqs[2];
    o.algorithm = "ring";
    rc = mpiar_iallreduce(MPIAR_IN_PLACE, big, BIG, MPIAR_FLOAT32, MPIAR_SUM, comm, &o, &reqs[0]);
    o.algorithm = NULL;
    if (rc == MPIAR_SUCCESS) {
      rc = mpiar_iallreduce(MPIAR_IN_PLACE, big2, BIG, MPIAR_FLOAT32, MPIAR_MAX, comm, &o,
                            &reqs[1]);
      int rc2 = rc == MPIAR_SUCCESS ? mpiar_waitall(2, reqs) : mpiar_wait(&reqs[0]);
      rc = rc != MPIAR_SUCCESS ? rc : rc2;
    }
  }
  if (rc == MPIAR_SUCCESS) {
    o.check = 1;
    rc = mpiar_allreduce_ex(MPIAR_IN_PLACE, small, 4, MPIAR_FLOAT64, MPIAR_SUM, comm, &o);
  }
  return rc;
}

static void run_call(const char *call) {
  /* How many calls of it a clean round makes on each rank. */
  MPI_Comm c;
  MPI_Comm_dup(MPI_COMM_WORLD, &c);
  MT_RC(MPIAR_SUCCESS, mpiar_comm_init(c, NULL));
  fault_arm(call, LONG_MAX);
  MT_RC(MPIAR_SUCCESS, round_of_calls(c));
  long made = fault_seen;
  fault_arm(NULL, 0);
  MPI_Comm_free(&c);
  long most = 0;
  MPI_Allreduce(&made, &most, 1, MPI_LONG, MPI_MAX, MPI_COMM_WORLD);
  int contexts = mpiar__inspect_live_contexts();
  long requests = mpiar__inspect_requests_live();
  int cases = 0, fired_cases = 0;
  const long tries = 24;
  for (long i = 0; i < tries && i < most; i++) {
    long k = most <= tries ? i + 1 : 1 + i * most / tries;
    int victim = (int)(k % size);
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    /* A fast victim may fail its first call (and tell the others) while a slower rank is still
     * creating the context: that creation then fails with the broken communicator. */
    int irc = mpiar_comm_init(c, NULL);
    MT_CHECK(irc == MPIAR_SUCCESS || irc == MPIAR_ERR_COMM_BROKEN, "comm_init: %s (%s)",
             mpiar_err_name(irc), mpiar_last_error());
    fault_arm(rank == victim ? call : NULL, k);
    int rc = round_of_calls(c);
    int fired = fault_fired;
    fault_arm(NULL, 0);
    int any = 0;
    MPI_Allreduce(&fired, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (!any) {
      MT_CHECK(rc == MPIAR_SUCCESS, "%s #%ld not reached, yet %s (%s)", call, k,
               mpiar_err_name(rc), mpiar_last_error());
    } else if (fired) {
      /* The failed call's own error, or, when the fault hit an operation already started while
       * a later call was being made, that later call's MPIAR_ERR_COMM_BROKEN naming it. */
      char me[32];
      snprintf(me, sizeof me, "rank %d: MPI_", rank);
      MT_CHECK(rc == MPIAR_ERR_MPI ||
                   (rc == MPIAR_ERR_COMM_BROKEN && strstr(mpiar_last_error(), me) != NULL),
               "%s #%ld failed here: %s (%s)", call, k, mpiar_err_name(rc), mpiar_last_error());
    } else if (rc == MPIAR_SUCCESS) {
      float x = 1.0f;
      mpiar_options_t o = MPIAR_OPTIONS_INIT;
      o.timeout_ms = 20000;
      int again = mpiar_allreduce_ex(MPIAR_IN_PLACE, &x, 1, MPIAR_FLOAT32, MPIAR_SUM, c, &o);
      MT_CHECK(again == MPIAR_ERR_COMM_BROKEN, "%s #%ld on rank %d: next call %s (%s)", call, k,
               victim, mpiar_err_name(again), mpiar_last_error());
    } else {
      MT_CHECK(rc == MPIAR_ERR_COMM_BROKEN, "%s #%ld on rank %d: %s (%s)", call, k, victim,
               mpiar_err_name(rc), mpiar_last_error());
    }
    MPI_Comm_free(&c);
    /* Everything the failure left is released with the communicator. */
    MT_CHECK(mpiar__inspect_live_contexts() == contexts, "%s #%ld: %d contexts live, expected %d",
             call, k, mpiar__inspect_live_contexts(), contexts);
    MT_CHECK(mpiar__inspect_requests_live() == requests,
             "%s #%ld: %ld requests live, expected %ld", call, k, mpiar__inspect_requests_live(),
             requests);
    cases++;
    fired_cases += any;
  }
  if (rank == 0) {
    printf("%s: %ld calls per round, %d cases, %d with the fault reached\n", call, most, cases,
           fired_cases);
  }
  MT_CHECK(fired_cases > 0, "%s: no case reached the fault", call);
}

int main(int argc, char **argv) {
  mt_init(&argc, &argv);
  rank = mt_rank;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  static const char *const all[] = {"Isend", "Irecv", "Testsome", "Test", "Improbe", "Imrecv"};
  if (argc > 1) {
    for (int i = 1; i < argc; i++) {
      run_call(argv[i]);
    }
  } else {
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
      run_call(all[i]);
    }
  }
  return mt_finish("faults");
}
