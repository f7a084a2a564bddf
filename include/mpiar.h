/**
 * @file mpiar.h
 * @brief mpiar: MPI allreduce built by hand from nonblocking point-to-point messages.
 *
 * Every public name carries the prefix `mpiar_` (types `mpiar_*_t`, constants `MPIAR_*`).
 * Every function that can fail returns an error code: `MPIAR_SUCCESS` (0) or a negative
 * `MPIAR_ERR_*` value. No function aborts the process. `mpiar_strerror()` names a code and
 * `mpiar_last_error()` gives the detail of the last failure on the calling thread.
 */
#ifndef MPIAR_H
#define MPIAR_H

#include <stddef.h>
#include <stdint.h>

#include <mpi.h>

#include "mpiar_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Pass as sendbuf to reduce in place: recvbuf holds the input and receives the result. */
#define MPIAR_IN_PLACE ((const void *)MPI_IN_PLACE)

/**
 * Per-call options. Always initialise with MPIAR_OPTIONS_INIT so that fields added later get
 * their defaults.
 */
typedef struct mpiar_options {
  /** Algorithm: NULL or "auto" to select by size and rank count, else a registry name. */
  const char *algorithm;
  /** Segment size in bytes for pipelined algorithms; 0 = the selector's choice. */
  size_t segment_bytes;
  /** Deadline in milliseconds; 0 = MPIAR_TIMEOUT_MS or none; negative = none. */
  int timeout_ms;
} mpiar_options_t;

/** Default options: automatic algorithm, automatic segment size, deadline from the environment. */
#define MPIAR_OPTIONS_INIT \
  { NULL, 0, 0 }

/**
 * Allreduce: every rank of @p comm receives in @p recvbuf the reduction of all ranks' @p sendbuf.
 *
 * Runs on a private duplicate of @p comm, so it never matches the caller's messages. Collective:
 * every rank must call it with the same count, dtype, op and algorithm. Every rank ends with
 * bitwise identical results. On failure nothing is written to @p recvbuf when the failure is
 * found before communication starts (argument checks); a failure during communication (a
 * deadline, an MPI error) marks the communicator's context broken, so that later calls on it
 * return MPIAR_ERR_COMM_BROKEN instead of mismatching messages.
 *
 * @param sendbuf input of this rank, or MPIAR_IN_PLACE to take the input from @p recvbuf
 * @param recvbuf result (count elements); must not partially overlap @p sendbuf
 * @return MPIAR_SUCCESS or a negative MPIAR_ERR_* code, with mpiar_last_error() set
 */
int mpiar_allreduce(const void *sendbuf, void *recvbuf, size_t count, mpiar_dtype_t dtype,
                    mpiar_op_t op, MPI_Comm comm);

/** mpiar_allreduce() with per-call options (NULL = MPIAR_OPTIONS_INIT). */
int mpiar_allreduce_ex(const void *sendbuf, void *recvbuf, size_t count, mpiar_dtype_t dtype,
                       mpiar_op_t op, MPI_Comm comm, const mpiar_options_t *opts);

/**
 * Broadcast @p count elements of @p buf from @p root to every rank of @p comm.
 * Small messages use a binomial tree; large ones a scatter followed by a ring allgather.
 * Same context, error and deadline rules as mpiar_allreduce().
 */
int mpiar_bcast(void *buf, size_t count, mpiar_dtype_t dtype, int root, MPI_Comm comm);

/** mpiar_bcast() with per-call options (algorithm: NULL/"auto", "binomial" or "scatter_allgather").
 */
int mpiar_bcast_ex(void *buf, size_t count, mpiar_dtype_t dtype, int root, MPI_Comm comm,
                   const mpiar_options_t *opts);

/**
 * The algorithm and segment size that "auto" would pick for @p bytes on @p nranks ranks in this
 * process (environment and tuning file included).
 * @return MPIAR_SUCCESS or an error (MPIAR_ERR_ENV, MPIAR_ERR_UNKNOWN_ALGORITHM, ...).
 */
int mpiar_select(size_t bytes, int nranks, const char **algorithm, size_t *segment_bytes);

#ifdef __cplusplus
}
#endif

#endif /* MPIAR_H */
