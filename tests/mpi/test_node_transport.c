/*
 * The node transport (engine/transport_node.h) under MPI, forced on by MPIAR_TRANSPORT=auto
 * whatever the suite's pass sets (the ranks of a test share this node):
 *   stress    the context's transport is the node transport (MPI on one rank); then rounds of 40 nonblocking allreduces in flight at once (more than the
 *             engine's slots and the rings' slots: sends wait for room, receives find their
 *             messages queued) with counts on both sides of the rings' bound and one rank late
 *             at every other round; every result is the exact sum
 *   deadline  the last rank never runs a call: the others (300 ms deadline) fail within seconds
 *             with MPIAR_ERR_TIMEOUT or MPIAR_ERR_COMM_BROKEN, never a hang
 *   exit      the last rank finalizes and exits without the call: the others fail as above
 */
#include <unistd.h>

#include "core/inspect.h"
#include "mpi_test.h"

enum { OPS = 40, ROUNDS = 6 };

static const size_t counts[] = {0, 1, 7, 64, 1000, 2047, 2048, 2049, 4096, 300};

static int32_t value(int rank, size_t i, int k) {
  return (int32_t)((rank + 1) * 1000 + (int)(i % 997) - k);
}

static void stress(int size) {
  mpiar__inspect_context_t ic;
  MT_RC(MPIAR_SUCCESS, mpiar__inspect_context(MPI_COMM_WORLD, &ic));
  const char *want = ic.local_ranks < 2 ? "mpi" : "node";
  MT_CHECK(strcmp(ic.transport, want) == 0, "transport %s, expected %s (%d ranks on this node)",
           ic.transport, want, ic.local_ranks);
  int32_t *buf[OPS];
  mpiar_request_t req[OPS];
  for (int k = 0; k < OPS; k++) {
    buf[k] = malloc(4096 * sizeof(int32_t) + 4);
  }
  for (int round = 0; round < ROUNDS; round++) {
    if (round % 2 == 1 && mt_rank == round % size) {
      usleep(20000); /* the others' messages wait in the rings and this rank's queues */
    }
    for (int k = 0; k < OPS; k++) {
      size_t n = counts[(size_t)(k + round) % (sizeof counts / sizeof *counts)];
      for (size_t i = 0; i < n; i++) {
        buf[k][i] = value(mt_rank, i, k);
      }
      MT_RC(MPIAR_SUCCESS, mpiar_iallreduce(MPIAR_IN_PLACE, buf[k], n, MPIAR_INT32, MPIAR_SUM,
                                            MPI_COMM_WORLD, NULL, &req[k]));
    }
    MT_RC(MPIAR_SUCCESS, mpiar_waitall(OPS, req));
    for (int k = 0; k < OPS; k++) {
      size_t n = counts[(size_t)(k + round) % (sizeof counts / sizeof *counts)];
      for (size_t i = 0; i < n; i++) {
        int32_t want_v = 0;
        for (int r = 0; r < size; r++) {
          want_v += value(r, i, k);
        }
        if (buf[k][i] != want_v) {
          MT_CHECK(0, "round %d op %d (%zu elements): element %zu is %d, expected %d", round, k,
                   n, i, buf[k][i], want_v);
          break;
        }
      }
    }
  }
  for (int k = 0; k < OPS; k++) {
    free(buf[k]);
  }
}

/* The others' call with the last rank absent: an error within seconds. */
static void absent_peer(const char *what) {
  static int32_t v[64];
  mpiar_options_t opts = MPIAR_OPTIONS_INIT;
  opts.timeout_ms = 300;
  double t0 = MPI_Wtime();
  int rc = mpiar_allreduce_ex(MPIAR_IN_PLACE, v, 64, MPIAR_INT32, MPIAR_SUM, MPI_COMM_WORLD, &opts);
  double elapsed = MPI_Wtime() - t0;
  MT_CHECK(rc == MPIAR_ERR_TIMEOUT || rc == MPIAR_ERR_COMM_BROKEN, "%s: got %s (%s)", what,
           mpiar_err_name(rc), mpiar_last_error());
  MT_CHECK(elapsed >= 0.29 && elapsed < 5.0, "%s: returned after %.3f s", what, elapsed);
}

int main(int argc, char **argv) {
  setenv("MPIAR_TRANSPORT", "auto", 1); /* read at the first call */
  mt_init(&argc, &argv);
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const char *mode = argc >= 2 ? argv[1] : "stress";
  int32_t one = 1;
  /* The context first, everywhere, so that an absent rank is absent from the data only. */
  MT_RC(MPIAR_SUCCESS, mpiar_allreduce(MPIAR_IN_PLACE, &one, 1, MPIAR_INT32, MPIAR_SUM,
                                       MPI_COMM_WORLD));
  MT_CHECK(one == size, "sum of ones %d", one);
  if (strcmp(mode, "stress") == 0) {
    stress(size);
  } else if (strcmp(mode, "deadline") == 0) {
    if (mt_rank != size - 1) {
      absent_peer("deadline");
    }
  } else if (strcmp(mode, "exit") == 0) {
    if (mt_rank == size - 1) {
      /* Gone: finalized (its context released) and exited, with the others' call pending. */
      MPI_Finalize();
      return 0;
    }
    absent_peer("exit");
    int failed = mt_failures;
    printf("node transport exit: rank %d %s\n", mt_rank, failed ? "FAILED" : "passed");
    MPI_Finalize();
    return failed ? 1 : 0;
  } else {
    fprintf(stderr, "usage: test_node_transport [stress|deadline|exit]\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  return mt_finish("node transport");
}
