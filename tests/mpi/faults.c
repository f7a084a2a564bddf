/*
 * Fault injection for the MPI tests: this file defines MPI_Isend, MPI_Irecv, MPI_Testsome,
 * MPI_Test, MPI_Improbe and MPI_Imrecv, which the library linked into the same program calls
 * instead of MPI's own (the profiling interface: each forwards to PMPI_*). When armed, the k-th
 * call of one of them fails with MPI_ERR_OTHER without reaching MPI, so that tests can walk every
 * error path of the executor.
 */
#include <string.h>

#include "faults.h"

const char *fault_call = NULL; /* which call fails, NULL: none */
long fault_at = 0;             /* the k-th call (1-based) of it, counted from fault_arm() */
long fault_seen = 0;           /* calls of fault_call since arming */
int fault_fired = 0;

void fault_arm(const char *call, long at) {
  fault_call = call;
  fault_at = at;
  fault_seen = 0;
  fault_fired = 0;
}

static int fail_now(const char *name) {
  if (fault_call == NULL || strcmp(fault_call, name) != 0) {
    return 0;
  }
  if (++fault_seen == fault_at) {
    fault_fired = 1;
    return 1;
  }
  return 0;
}

int MPI_Isend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
              MPI_Request *req) {
  return fail_now("Isend") ? MPI_ERR_OTHER : PMPI_Isend(buf, count, type, dest, tag, comm, req);
}

int MPI_Irecv(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
              MPI_Request *req) {
  return fail_now("Irecv") ? MPI_ERR_OTHER : PMPI_Irecv(buf, count, type, source, tag, comm, req);
}

int MPI_Testsome(int n, MPI_Request reqs[], int *outcount, int indices[], MPI_Status statuses[]) {
  return fail_now("Testsome") ? MPI_ERR_OTHER
                              : PMPI_Testsome(n, reqs, outcount, indices, statuses);
}

int MPI_Test(MPI_Request *req, int *flag, MPI_Status *status) {
  return fail_now("Test") ? MPI_ERR_OTHER : PMPI_Test(req, flag, status);
}

int MPI_Improbe(int source, int tag, MPI_Comm comm, int *flag, MPI_Message *msg,
                MPI_Status *status) {
  return fail_now("Improbe") ? MPI_ERR_OTHER
                             : PMPI_Improbe(source, tag, comm, flag, msg, status);
}

int MPI_Imrecv(void *buf, int count, MPI_Datatype type, MPI_Message *msg, MPI_Request *req) {
  return fail_now("Imrecv") ? MPI_ERR_OTHER : PMPI_Imrecv(buf, count, type, msg, req);
}
