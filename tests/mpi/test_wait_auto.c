/*
 * MPIAR_WAIT=auto decides per communicator whether waiting ranks give their core away: they do
 * exactly when their node has more ranks than CPUs among all of them (the union of the ranks'
 * affinity masks). Each case pins this process (sched_setaffinity) and then creates a new
 * communicator's context: as launched; one CPU per rank, distinct while the node's CPUs last (ranks
 * pinned one per core are not oversubscribed, although each may use one CPU only); every rank on
 * one CPU. The expectation is computed here from the masks the node's ranks report.
 */
#include <sched.h>
#include <string.h>

#include "core/inspect.h"
#include "mpi_test.h"

/* The CPUs of @p set in order (at most @p max). */
static int cpus_of(const cpu_set_t *set, int *list, int max) {
  int n = 0;
  for (int c = 0; c < CPU_SETSIZE && n < max; c++) {
    if (CPU_ISSET(c, set)) {
      list[n++] = c;
    }
  }
  return n;
}

/* 1 if the node (communicator @p node) has more ranks than CPUs in the union of their masks. */
static int oversubscribed(MPI_Comm node) {
  int local = 0;
  MPI_Comm_size(node, &local);
  cpu_set_t mine;
  CPU_ZERO(&mine);
  MT_CHECK(sched_getaffinity(0, sizeof mine, &mine) == 0, "sched_getaffinity");
  cpu_set_t *all = malloc((size_t)local * sizeof *all);
  MPI_Allgather(&mine, (int)sizeof mine, MPI_BYTE, all, (int)sizeof mine, MPI_BYTE, node);
  cpu_set_t both;
  CPU_ZERO(&both);
  for (int r = 0; r < local; r++) {
    CPU_OR(&both, &both, &all[r]);
  }
  free(all);
  return local > CPU_COUNT(&both);
}

static void check_case(const char *what, MPI_Comm node) {
  int want = oversubscribed(node);
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  int32_t v = 1;
  MT_RC(MPIAR_SUCCESS, mpiar_allreduce(MPIAR_IN_PLACE, &v, 1, MPIAR_INT32, MPIAR_SUM, comm));
  int size = 0;
  MPI_Comm_size(comm, &size);
  MT_CHECK(v == size, "%s: sum %d, expected %d", what, v, size);
  mpiar__inspect_context_t info;
  MT_RC(MPIAR_SUCCESS, mpiar__inspect_context(comm, &info));
  int yield = info.yield, cpus = info.node_cpus, local = info.local_ranks;
  MT_CHECK(yield == want, "%s: %d ranks on the node with %d CPUs among them: yield %d, expected %d",
           what, local, cpus, yield, want);
  MPI_Comm_free(&comm);
}

int main(int argc, char **argv) {
  mt_init(&argc, &argv);
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  int local_rank = 0;
  MPI_Comm_rank(node, &local_rank);
  cpu_set_t launched;
  CPU_ZERO(&launched);
  MT_CHECK(sched_getaffinity(0, sizeof launched, &launched) == 0, "sched_getaffinity");
  int list[CPU_SETSIZE];
  int n = cpus_of(&launched, list, CPU_SETSIZE);

  check_case("as launched", node);

  /* One CPU each, the node's ranks spread over the CPUs this rank was given. */
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(list[local_rank % n], &one);
  MT_CHECK(sched_setaffinity(0, sizeof one, &one) == 0, "sched_setaffinity");
  check_case("one CPU per rank", node);

  /* Every rank on the first CPU. */
  CPU_ZERO(&one);
  CPU_SET(list[0], &one);
  MT_CHECK(sched_setaffinity(0, sizeof one, &one) == 0, "sched_setaffinity");
  check_case("every rank on one CPU", node);

  MT_CHECK(sched_setaffinity(0, sizeof launched, &launched) == 0, "sched_setaffinity");
  MPI_Comm_free(&node);
  return mt_finish("wait_auto");
}
