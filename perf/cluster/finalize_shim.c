/*
 * libmpiar_cluster_finalize.so: an MPI_Finalize that ends with a barrier, for MPICH jobs across
 * the emulated cluster (perf/cluster/cluster.sh preloads it into every rank of an MPICH job).
 *
 * Why: with MPICH 4.0.2 over UCX 1.13's TCP transport, MPI_Finalize of three or more processes
 * hangs in a good share of the runs: the UCX netmod closes every endpoint in flush mode and
 * then waits in a PMI barrier; a rank whose close still needs an answer from a peer that
 * already sits in that barrier (a blocking read of the PMI socket, no UCX progress) waits
 * forever, and the peer waits for it. (Upstream MPICH later dropped that barrier.)
 *
 * What it does instead: a barrier on MPI_COMM_WORLD, so that every message of the program has
 * been received, then it flushes stdio and returns success without tearing MPI down. The
 * process then exits with the status the program returns; the kernel closes its sockets, which
 * UCX on the other side reads as a disconnected peer only after every rank has passed the
 * barrier. MPI_Finalized() keeps answering 0 afterwards, and attribute callbacks that MPI
 * would run at finalize (on MPI_COMM_SELF) do not run.
 *
 * It is not linked with the sanitizers on purpose: a preloaded instrumented library would come
 * before the sanitizer runtime in the library list, which AddressSanitizer refuses.
 */
#include <stdio.h>

#include <mpi.h>

int PMPI_Finalize(void) {
  int rc = PMPI_Barrier(MPI_COMM_WORLD);
  fflush(NULL);
  return rc;
}

/* PMPI_Finalize too, for a tool preloaded before this library whose MPI_Finalize ends with
 * PMPI_Finalize (the interposer, libmpiar_pmpi.so, after printing its statistics). */
int MPI_Finalize(void) {
  return PMPI_Finalize();
}
