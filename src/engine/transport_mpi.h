/*
 * The MPI transport (transport.h on MPI point-to-point): the only code of the library that
 * calls MPI's message functions (MPI_Isend, MPI_Irecv, MPI_Improbe, MPI_Imrecv, MPI_Mrecv,
 * MPI_Testsome, MPI_Test, MPI_Cancel).
 */
#ifndef MPIAR_TRANSPORT_MPI_H
#define MPIAR_TRANSPORT_MPI_H

#include <mpi.h>

#include "engine/transport.h"

extern const mpiar__transport_t mpiar__transport_mpi;

/*
 * A transport state on communicator @p comm (which stays the caller's: it is not freed by
 * close()); *tag_ub is the communicator's MPI_TAG_UB. @return MPIAR_SUCCESS or MPIAR_ERR_NOMEM.
 */
int mpiar__transport_mpi_open(MPI_Comm comm, void **state, long *tag_ub);

#endif /* MPIAR_TRANSPORT_MPI_H */
