/* Fault injection for the MPI tests (see faults.c). */
#ifndef MPIAR_TEST_FAULTS_H
#define MPIAR_TEST_FAULTS_H

#include <mpi.h>

extern const char *fault_call;
extern long fault_at, fault_seen;
extern int fault_fired;

/* Make the @p at-th call of @p call ("Isend", "Irecv", "Testsome", "Test", "Improbe", "Imrecv")
 * from now on fail; fault_arm(NULL, 0) disarms. */
void fault_arm(const char *call, long at);

#endif /* MPIAR_TEST_FAULTS_H */
