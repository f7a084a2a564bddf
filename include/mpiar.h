/**
 * @file mpiar.h
 * @brief mpiar: MPI allreduce built by hand from nonblocking point-to-point messages.
 *
 * Every public name carries the prefix `mpiar_` (types `mpiar_*_t`, constants `MPIAR_*`).
 * Every function that can fail returns an error code: `MPIAR_SUCCESS` (0) or a negative
 * `MPIAR_ERR_*` value. No function aborts the process. `mpiar_strerror()` names a code and
 * `mpiar_last_error()` gives the detail of the last failure on the calling thread.
 *
 * Collectives and ordering: every collective call (blocking, nonblocking or persistent start) is
 * collective over its communicator, and, as in MPI, every rank starts the collectives of one
 * communicator in the same order with the same arguments (count, dtype, op, root, algorithm and
 * segment options). With MPIAR_CHECK=1 (or mpiar_options_t.check = 1) the ranks agree on the
 * arguments before any data moves, and a difference is an MPIAR_ERR_MISMATCH on every rank that
 * names the ranks and values that differ. Without it, a difference that changes the size of any
 * message is still an error on the ranks that receive such a message (sizes are checked before
 * receiving, so nothing is truncated or overwritten), and those ranks tell the others, which
 * then fail with MPIAR_ERR_COMM_BROKEN; a difference that changes no message size (a datatype
 * of the same size, another operation) is found only by the check.
 *
 * Threads: calls on different communicators may run concurrently from different threads (MPI
 * must provide MPI_THREAD_MULTIPLE). The calls on one communicator (starting operations,
 * testing, waiting and freeing its requests) come from one thread at a time: a second thread
 * entering a call on a communicator while another thread is inside one on the same
 * communicator gets MPIAR_ERR_CONCURRENT. Requests of one communicator may be completed from
 * another thread than the one that started them, one thread at a time.
 *
 * Failures: a failure during communication (a deadline, a message of the wrong size, an MPI
 * error) breaks the communicator's context: every outstanding request on it fails, the other
 * ranks are told (their calls on the communicator then fail with MPIAR_ERR_COMM_BROKEN instead of
 * waiting), and later calls on it return MPIAR_ERR_COMM_BROKEN. Free the communicator and use a
 * new one. After a failed call, MPI may still read that call's send buffer until the
 * communicator is freed (or MPI_Finalize); receive buffers are no longer written once the call
 * has returned.
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
 * Per-call options. Always initialise with MPIAR_OPTIONS_INIT (C and C++) or
 * mpiar_options_init(): the first field holds the size of the structure the caller was compiled
 * with, so a program built against an older header, with fewer fields, still works with a newer
 * library (the missing fields take their defaults), and a structure that was never initialised is
 * refused with MPIAR_ERR_INVALID_ARG.
 */
typedef struct mpiar_options {
  /** sizeof(mpiar_options_t), set by MPIAR_OPTIONS_INIT. */
  size_t struct_size;
  /** Algorithm: NULL or "auto" to select by size and rank count, else a registry name. */
  const char *algorithm;
  /**
   * Segment size in bytes for pipelined algorithms; 0 = MPIAR_SEGMENT_BYTES or the selector's
   * choice. At least 4 KiB; a segment is also raised so that a ring block holds at most 1024.
   */
  size_t segment_bytes;
  /** Deadline in milliseconds; 0 = MPIAR_TIMEOUT_MS or none; negative = none. */
  int timeout_ms;
  /** Agree on the arguments before the collective: 1 on, 0 off, -1 = MPIAR_CHECK (default). */
  int check;
  /** Reproducible results (docs/reproducible.md): 1 on, 0 off, -1 = MPIAR_REPRODUCIBLE. */
  int reproducible;
} mpiar_options_t;

/** Default options: automatic algorithm and segment, deadline and checks from the environment. */
#define MPIAR_OPTIONS_INIT \
  { sizeof(mpiar_options_t), NULL, 0, 0, -1, -1 }

/** The default options, as a function (for languages and macros that cannot use the braces). */
static inline mpiar_options_t mpiar_options_init(void) {
  mpiar_options_t o = MPIAR_OPTIONS_INIT;
  return o;
}

/**
 * Create the communicator's context now (collective over @p comm). Optional: the first collective
 * on a communicator does it otherwise. The context holds a private duplicate of @p comm (made with
 * MPI_Comm_idup, so the deadline of @p opts or MPIAR_TIMEOUT_MS bounds the wait for the other
 * ranks), finds the ranks of each node, and is released when @p comm is freed or at
 * MPI_Finalize. Calling it again on a communicator that has a context does nothing.
 *
 * @return MPIAR_SUCCESS; MPIAR_ERR_TIMEOUT (a rank did not arrive in time: the communicator is
 *         then unusable with mpiar, and later calls return MPIAR_ERR_COMM_BROKEN);
 *         MPIAR_ERR_COMM; MPIAR_ERR_MPI_STATE; MPIAR_ERR_ENV; MPIAR_ERR_NOMEM; MPIAR_ERR_MPI.
 */
int mpiar_comm_init(MPI_Comm comm, const mpiar_options_t *opts);

/**
 * Allreduce: every rank of @p comm receives in @p recvbuf the reduction of all ranks' @p sendbuf.
 *
 * Runs on a private duplicate of @p comm, so it never matches the caller's messages. Collective
 * (see the ordering rules above). Every rank ends with bitwise identical results. On failure
 * nothing is written to @p recvbuf when the failure is found before communication starts
 * (argument checks).
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
 * Reduce-scatter with equal blocks (MPI_Reduce_scatter_block): the ranks' @p sendbuf vectors of
 * @p recvcount * p elements (p = the size of @p comm) are reduced element by element, and rank r
 * receives block r (elements [r recvcount, (r + 1) recvcount) of the reduction) in @p recvbuf.
 * With MPIAR_IN_PLACE as @p sendbuf, @p recvbuf holds the input (recvcount * p elements) and
 * receives the result at its start (as MPI defines it); the rest of it is then undefined.
 * Algorithms (options.algorithm): "ring", "recursive_halving", "direct", "repro_direct" or
 * NULL/"auto" (the cost model; MPIAR_ALGORITHM and tuning files are allreduce's and do not apply
 * here). In reproducible mode every element is the canonical reduction (mpiar_reduce_canonical())
 * whatever the algorithm. Same context, argument check, deadline and failure rules as
 * mpiar_allreduce(); @p sendbuf and @p recvbuf must not overlap unless in place.
 */
int mpiar_reduce_scatter_block(const void *sendbuf, void *recvbuf, size_t recvcount,
                               mpiar_dtype_t dtype, mpiar_op_t op, MPI_Comm comm);

/** mpiar_reduce_scatter_block() with per-call options (NULL = MPIAR_OPTIONS_INIT). */
int mpiar_reduce_scatter_block_ex(const void *sendbuf, void *recvbuf, size_t recvcount,
                                  mpiar_dtype_t dtype, mpiar_op_t op, MPI_Comm comm,
                                  const mpiar_options_t *opts);

/**
 * Allgather with equal blocks (MPI_Allgather): rank r's @p count elements of @p sendbuf land in
 * every rank's @p recvbuf at element r * count (@p recvbuf holds count * p elements). With
 * MPIAR_IN_PLACE as @p sendbuf, each rank's block is already in @p recvbuf at r * count.
 * Algorithms: "ring", "recursive_doubling", "bruck", "direct" or NULL/"auto" (the cost model).
 * Every rank ends with bitwise identical results. Same rules as mpiar_allreduce().
 */
int mpiar_allgather(const void *sendbuf, void *recvbuf, size_t count, mpiar_dtype_t dtype,
                    MPI_Comm comm);

/** mpiar_allgather() with per-call options (NULL = MPIAR_OPTIONS_INIT). */
int mpiar_allgather_ex(const void *sendbuf, void *recvbuf, size_t count, mpiar_dtype_t dtype,
                       MPI_Comm comm, const mpiar_options_t *opts);

/** A request: an operation in progress or a persistent operation (opaque handle). */
typedef struct mpiar_request *mpiar_request_t;

/** The null request: waiting on it or testing it returns at once. */
#define MPIAR_REQUEST_NULL ((mpiar_request_t)0)

/**
 * Nonblocking allreduce: starts the operation and returns a request in @p req. The buffers must
 * not be touched until the request completes (mpiar_test / mpiar_wait and friends). Several
 * operations may be outstanding on one communicator; each has its own message space, and they
 * may complete in any order. Progress happens inside the test and wait calls of any request of
 * the communicator (each advances every outstanding operation of it), and in a progress thread
 * with MPIAR_PROGRESS=thread. Argument errors are returned here and no request is made.
 *
 * @return MPIAR_SUCCESS or an error code; *req is MPIAR_REQUEST_NULL on error.
 */
int mpiar_iallreduce(const void *sendbuf, void *recvbuf, size_t count, mpiar_dtype_t dtype,
                     mpiar_op_t op, MPI_Comm comm, const mpiar_options_t *opts,
                     mpiar_request_t *req);

/** Nonblocking broadcast (see mpiar_iallreduce() and mpiar_bcast_ex()). */
int mpiar_ibcast(void *buf, size_t count, mpiar_dtype_t dtype, int root, MPI_Comm comm,
                 const mpiar_options_t *opts, mpiar_request_t *req);

/** Nonblocking reduce-scatter (see mpiar_iallreduce() and mpiar_reduce_scatter_block()). */
int mpiar_ireduce_scatter_block(const void *sendbuf, void *recvbuf, size_t recvcount,
                                mpiar_dtype_t dtype, mpiar_op_t op, MPI_Comm comm,
                                const mpiar_options_t *opts, mpiar_request_t *req);

/** Nonblocking allgather (see mpiar_iallreduce() and mpiar_allgather()). */
int mpiar_iallgather(const void *sendbuf, void *recvbuf, size_t count, mpiar_dtype_t dtype,
                     MPI_Comm comm, const mpiar_options_t *opts, mpiar_request_t *req);

/**
 * Persistent allreduce: checks the arguments, selects the algorithm and builds (or finds) its plan
 * once, and returns an inactive request. mpiar_start() runs it again and again with the same
 * buffers (their contents may change between runs), without allocating or looking anything up;
 * test/wait complete each run, and mpiar_request_free() releases it. Creating the request is
 * collective only in that it may create the communicator's context.
 */
int mpiar_allreduce_init(const void *sendbuf, void *recvbuf, size_t count, mpiar_dtype_t dtype,
                         mpiar_op_t op, MPI_Comm comm, const mpiar_options_t *opts,
                         mpiar_request_t *req);

/** Persistent broadcast (see mpiar_allreduce_init()). */
int mpiar_bcast_init(void *buf, size_t count, mpiar_dtype_t dtype, int root, MPI_Comm comm,
                     const mpiar_options_t *opts, mpiar_request_t *req);

/** Persistent reduce-scatter (see mpiar_allreduce_init()). */
int mpiar_reduce_scatter_block_init(const void *sendbuf, void *recvbuf, size_t recvcount,
                                    mpiar_dtype_t dtype, mpiar_op_t op, MPI_Comm comm,
                                    const mpiar_options_t *opts, mpiar_request_t *req);

/** Persistent allgather (see mpiar_allreduce_init()). */
int mpiar_allgather_init(const void *sendbuf, void *recvbuf, size_t count, mpiar_dtype_t dtype,
                         MPI_Comm comm, const mpiar_options_t *opts, mpiar_request_t *req);

/**
 * Start an inactive persistent request (collective: every rank starts it, in the same order as
 * the other collectives of the communicator).
 * @return MPIAR_SUCCESS; MPIAR_ERR_INVALID_ARG (null, not persistent, or already active);
 *         MPIAR_ERR_COMM_BROKEN; MPIAR_ERR_CONCURRENT.
 */
int mpiar_start(mpiar_request_t *req);

/** mpiar_start() on each of @p n requests, in array order. */
int mpiar_startall(int n, mpiar_request_t reqs[]);

/**
 * Test a request: *done = 1 if it completed (a nonpersistent request is then released and set to
 * MPIAR_REQUEST_NULL; a persistent one becomes inactive), else 0. Advances every outstanding
 * operation of the request's communicator. MPIAR_REQUEST_NULL and inactive persistent requests
 * are complete.
 * @return the operation's result once complete (MPIAR_SUCCESS or its error), else MPIAR_SUCCESS.
 */
int mpiar_test(mpiar_request_t *req, int *done);

/** Wait until a request completes (see mpiar_test()). @return the operation's result. */
int mpiar_wait(mpiar_request_t *req);

/**
 * Wait for every request of @p reqs (the requests may belong to different communicators).
 * @return MPIAR_SUCCESS if all succeeded, else the first error in array order (each request is
 *         completed and released all the same).
 */
int mpiar_waitall(int n, mpiar_request_t reqs[]);

/**
 * Test whether any request of @p reqs has completed: *done = 1 and *index = its position if so
 * (it is then released as by mpiar_test()); *done = 1 and *index = -1 if every entry is
 * MPIAR_REQUEST_NULL or inactive; else *done = 0.
 * @return the completed operation's result, else MPIAR_SUCCESS.
 */
int mpiar_testany(int n, mpiar_request_t reqs[], int *index, int *done);

/** Wait until any request of @p reqs completes (see mpiar_testany()). */
int mpiar_waitany(int n, mpiar_request_t reqs[], int *index);

/**
 * Release a request and set it to MPIAR_REQUEST_NULL. An active request is first completed
 * (waited for), since its operation is collective and the other ranks depend on it.
 * @return MPIAR_SUCCESS or the result of the operation it had to complete.
 */
int mpiar_request_free(mpiar_request_t *req);

/**
 * An interrupt check: called by the waits of the calling thread (see mpiar_set_interrupt());
 * returns nonzero to abandon the wait.
 */
typedef int (*mpiar_interrupt_fn)(void *arg);

/**
 * Set the calling thread's interrupt check (NULL clears it). While a call of this thread waits
 * for other ranks (a blocking collective, the creation of a communicator's context, mpiar_wait
 * and mpiar_waitall/waitany), it calls @p fn(@p arg) at most every 20 ms; when @p fn returns
 * nonzero the wait is abandoned with MPIAR_ERR_INTERRUPTED, as a failure of this rank: the
 * operation fails, the communicator's context breaks, and the other ranks' calls on it fail with
 * MPIAR_ERR_COMM_BROKEN naming the interruption instead of waiting (free the communicator and
 * use a new one). A generalized request (the kvstore's mpiar_kv_pushpull_async) stays active.
 * Language bindings use it to let a program be interrupted (Ctrl-C) inside a call. @p fn runs
 * on the waiting thread, with no mpiar lock held; it must not call mpiar.
 * @return MPIAR_SUCCESS.
 */
int mpiar_set_interrupt(mpiar_interrupt_fn fn, void *arg);

/**
 * The algorithm and segment size that "auto" would pick for @p bytes of float32 on a
 * communicator of @p nranks ranks on one node in this process (MPIAR_ALGORITHM,
 * MPIAR_SEGMENT_BYTES and MPIAR_TUNING_FILE included). mpiar_select_comm() answers for a real
 * communicator, whose nodes decide whether a tuning table applies.
 * @return MPIAR_SUCCESS or an error (MPIAR_ERR_ENV, MPIAR_ERR_UNKNOWN_ALGORITHM, ...).
 */
int mpiar_select(size_t bytes, int nranks, const char **algorithm, size_t *segment_bytes);

/**
 * The algorithm and segment size that an allreduce of @p count elements of @p dtype on @p comm
 * runs when its options name none: MPIAR_ALGORITHM / MPIAR_SEGMENT_BYTES, else the table of
 * MPIAR_TUNING_FILE where it was measured on a communicator like @p comm, else the cost model.
 * @p algorithm is a registry name (in reproducible mode the call runs its reproducible
 * replacement). @p source, if not NULL, receives where the choice came from: "MPIAR_ALGORITHM",
 * "tuning table", "model with fitted parameters" or "model with built-in parameters".
 * Collective when @p comm has no mpiar context yet (it creates it, as any first call does).
 * @return MPIAR_SUCCESS or an error (MPIAR_ERR_ENV, MPIAR_ERR_COMM, ...).
 */
int mpiar_select_comm(MPI_Comm comm, size_t count, mpiar_dtype_t dtype, const char **algorithm,
                      size_t *segment_bytes, const char **source);

/**
 * Allocate @p bytes of node-shared memory (collective over @p comm, like
 * MPI_Win_allocate_shared): every rank gets its own segment, mapped by every rank of its node.
 * An allreduce on @p comm whose buffers (receive, and send unless in place) lie in such memory of
 * @p comm on every rank, with all ranks of @p comm on one node, runs zero-copy: each rank reduces
 * its share straight from every rank's buffers and writes the result into every rank's receive
 * buffer, with flags in shared memory instead of messages (docs/shm.md). Across nodes holding
 * the same number of ranks each, a blocking allreduce on such buffers (outside reproducible mode)
 * runs zero-copy inside each node and over MPI between them. Such a call must take
 * that path on every rank or on none: a rank whose buffers are ordinary memory (or a persistent
 * request) while another's are shared fails the call on every rank (MPIAR_ERR_MISMATCH, the
 * others MPIAR_ERR_COMM_BROKEN). The memory is 64-byte aligned; @p bytes may be 0 and may differ
 * between ranks. Free it with mpiar_free() (collective too); what is left is freed by
 * MPI_Finalize.
 *
 * @return MPIAR_SUCCESS; MPIAR_ERR_INVALID_ARG (@p ptr NULL or @p bytes above 2^48 on some rank:
 *         every rank fails); MPIAR_ERR_COMM; MPIAR_ERR_TIMEOUT; MPIAR_ERR_MPI; MPIAR_ERR_NOMEM.
 */
int mpiar_alloc(MPI_Comm comm, size_t bytes, void **ptr);

/**
 * Free memory from mpiar_alloc() (collective over the ranks of the node that allocated it).
 * NULL does nothing.
 * @return MPIAR_SUCCESS; MPIAR_ERR_INVALID_ARG (not the start of a live allocation);
 *         MPIAR_ERR_MPI_STATE (after MPI_Finalize, which freed it).
 */
int mpiar_free(void *ptr);

#ifdef __cplusplus
}
#endif

#endif /* MPIAR_H */
