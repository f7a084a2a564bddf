/*
 * The mpiar Python extension (module mpiar._mpiar): shared declarations.
 *
 * Layout: module.c (module init, the MPI library check), errors.c (exception classes made from
 * the C error list), args.c (argument parsing, communicators, operations, options), array.c
 * (NumPy arrays, buffer-protocol objects and torch tensors as typed memory), call.c (one prepared
 * collective call: validation, the cross-rank argument check, execution), collectives.c
 * (allreduce, bcast, select, and their nonblocking and persistent forms), request.c (the Request
 * type, waitall/waitany/testany), kvstore.c (the KVStore type) and shm.c (node-shared memory,
 * mpiar.alloc).
 *
 * A collective call is prepared into a pyar_call_t that owns everything the C call reads or
 * writes (references to the arrays, buffer views, temporary copies). A nonblocking call prepares
 * it inside a request object, which releases it when the operation completes.
 */
#ifndef PYAR_H
#define PYAR_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <mpi.h>

#include <mpiar.h>
#include <mpiar_kv.h>

/* ---- errors.c ---------------------------------------------------------------------------- */

/** Create mpiar.Error and one subclass per C error code; add them to @p module. */
int pyar_errors_init(PyObject *module);

/** Raise the exception class of @p rc with the library's detail (mpiar_last_error()). @return -1 */
int pyar_raise(int rc, const char *fname);

/** Install the interrupt check (Ctrl-C during a wait) for the calling thread (module import). */
void pyar_interrupts_init(void);


/** Raise the exception class of @p rc with a detail given by the caller. @return -1 */
int pyar_raise_detail(int rc, const char *fname, const char *detail);

/** Raise the exception class of @p rc with a detail made here. @return -1 */
int pyar_raise_code(int rc, const char *fmt, ...);

/** @return the class of @p rc (borrowed), mpiar.Error for codes without a class of their own. */
PyObject *pyar_error_class(int rc);

/* ---- args.c ------------------------------------------------------------------------------ */

#define PYAR_SIG_MAX 12

/** A function's parameters: names, how many are required, how many may be positional. */
typedef struct pyar_sig {
  const char *fname;
  int required;
  int max_positional;
  const char *names[PYAR_SIG_MAX + 1]; /* NULL-terminated */
  PyObject *interned[PYAR_SIG_MAX];    /* filled on first use */
} pyar_sig_t;

/**
 * Parse vectorcall arguments into out[i] (borrowed references; NULL when not given) in the order
 * of sig->names. @return 0, or -1 with TypeError set.
 */
int pyar_parse(pyar_sig_t *sig, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
               PyObject **out);

/** Set up the mpi4py C API (imports mpi4py.MPI). @return 0 or -1. */
int pyar_comm_init(void);

/** The MPI_Comm of an mpi4py intracommunicator (None: MPI.COMM_WORLD). @return 0 or -1. */
int pyar_get_comm(PyObject *obj, MPI_Comm *comm, const char *fname);

/** An operation: the C op and whether it was named as a logical one (land, lor, lxor). */
typedef struct pyar_op {
  mpiar_op_t op;
  int logical;
} pyar_op_t;

/** Parse an operation name (None: @p dflt). @return 0 or -1 with ValueError/TypeError. */
int pyar_get_op(PyObject *obj, mpiar_op_t dflt, pyar_op_t *op, const char *fname);

/** The name of an operation as the caller wrote it (logical names for logical ops). */
const char *pyar_op_name(pyar_op_t op);

/**
 * Per-call options from the keyword values (None or NULL: the default). The algorithm name
 * points into @p algorithm, which the caller keeps alive. @return 0 or -1.
 */
int pyar_get_options(PyObject *algorithm, PyObject *segment_bytes, PyObject *timeout_ms,
                     mpiar_options_t *opts, const char *fname);

/** A non-negative integer argument that fits size_t. @return 0 or -1. */
int pyar_get_size(PyObject *obj, size_t *v, const char *fname, const char *what);

/** An int argument. @return 0 or -1. */
int pyar_get_int(PyObject *obj, int *v, const char *fname, const char *what);

/** Whether MPI is initialised and not yet finalised (no exception is set). */
int pyar_mpi_usable(void);

/** Whether a registry algorithm (or "auto") is named @p name. */
int pyar_known_algorithm(const char *name);

/* ---- array.c ----------------------------------------------------------------------------- */

enum { PYAR_BUFFER = 0, PYAR_TORCH = 1 };

/** Most dimensions an array may have (the buffer protocol's limit). */
#define PYAR_MAX_DIMS 64

/**
 * An array seen as typed memory. The struct owns a reference to the object (or to the NumPy
 * array that exposes an __array_interface__ object), the buffer view, and any contiguous copy.
 */
typedef struct pyar_array {
  PyObject *obj;
  Py_buffer view;
  int has_view;
  int kind;
  char *data; /* NULL when the memory is not contiguous */
  size_t count;
  mpiar_dtype_t dtype;
  int is_bool;
  int readonly;
  int c_contig, f_contig;
  int ndim;
  Py_ssize_t shape[PYAR_MAX_DIMS];
  /* A contiguous copy of a non-contiguous (or differently ordered) input. */
  void *copy;
  PyObject *copy_obj;
} pyar_array_t;

/** Zero a pyar_array_t so that pyar_array_release() is safe on it. */
void pyar_array_init(pyar_array_t *a);

/** See @p obj as an array. @return 0, or -1 with TypeError/ValueError naming @p what. */
int pyar_array_get(PyObject *obj, pyar_array_t *a, const char *fname, const char *what);

/** Release everything the array holds (safe on an initialised, unused array). */
void pyar_array_release(pyar_array_t *a);

/**
 * Fail with ValueError unless the array is contiguous and writable, and with RuntimeError for a
 * tensor that requires grad under grad mode (autograd cannot record mpiar's write). @return 0
 * or -1.
 */
int pyar_array_check_writable(const pyar_array_t *a, const char *fname, const char *what);

/**
 * Note that mpiar is about to write the array (a tensor's version counter is bumped, as by an
 * in-place torch operation; nothing happens for other arrays). @return 0 or -1.
 */
int pyar_array_written(pyar_array_t *a);

/** A new C-contiguous array of the same kind, dtype and shape as @p a (new reference). */
PyObject *pyar_array_new_like(const pyar_array_t *a, const char *fname);

/**
 * The address of the array's elements in @p order ('C' or 'F'), copying them into a contiguous
 * temporary the array owns when they are not laid out so. @return 0 or -1.
 */
int pyar_array_data_in(pyar_array_t *a, char order, const void **data, const char *fname,
                       const char *what);

/**
 * Copy the elements of a non-contiguous input again into the contiguous temporary that
 * pyar_array_data_in() made (persistent requests read the input afresh at every start).
 * Does nothing when the array has no temporary. @return 0 or -1.
 */
int pyar_array_refresh(pyar_array_t *a, char order);

/** Whether two arrays have the same shape. */
int pyar_array_same_shape(const pyar_array_t *a, const pyar_array_t *b);

/** Size in bytes of the array's elements. */
size_t pyar_array_bytes(const pyar_array_t *a);

/** The dtype name of the array ("bool" for booleans). */
const char *pyar_array_dtype_name(const pyar_array_t *a);

/** The dtype name of a type code as used by the argument check (dtype * 2 + is_bool). */
const char *pyar_dtype_code_name(long long code);

/** A new object of the same kind as a template (PYAR_TORCH or PYAR_BUFFER) with given shape. */
PyObject *pyar_new_from_template(PyObject *template_obj, const char *fname);

/** A template (kind, shape, dtype) from which pyar_new_from_template() creates arrays. */
PyObject *pyar_array_template(const pyar_array_t *a);

/* ---- call.c ------------------------------------------------------------------------------ */

enum {
  PYAR_CALL_ALLREDUCE = 1,
  PYAR_CALL_BCAST = 2,
  PYAR_CALL_KV = 3,
  PYAR_CALL_REDUCE_SCATTER = 4,
  PYAR_CALL_ALLGATHER = 5
};

/** One prepared collective call. */
typedef struct pyar_call {
  const char *fname;
  int kind;
  MPI_Comm comm;
  PyObject *comm_obj; /* the mpi4py communicator, kept while a request uses it */
  int rank, size;
  pyar_array_t in, out;
  int in_place;
  const void *send;
  void *recv;
  size_t count;
  mpiar_dtype_t dtype;
  pyar_op_t op;
  int root;
  char order;
  mpiar_options_t opts;
  PyObject *algorithm; /* keeps opts.algorithm alive */
  PyObject *result;    /* the object returned to the caller */
  int result_new;      /* the result was made by the call (no one else can hold it) */
} pyar_call_t;

void pyar_call_init(pyar_call_t *c, const char *fname, int kind);
void pyar_call_release(pyar_call_t *c);

/**
 * After a call or request of @p c failed with @p rc: when MPI may still read its send buffer
 * (a failure during communication: sends of the failed operation stay in flight until the
 * communicator is freed), its arrays are kept alive for the rest of the process instead of being
 * released with it.
 */
void pyar_call_keep_after_failure(pyar_call_t *c, int rc);

/**
 * Take the communicator. @return 0 or -1; after a failure here the call cannot join the
 * cross-rank check (there is no communicator to check on).
 */
int pyar_call_comm(pyar_call_t *c, PyObject *comm);

/** Take the per-call options. @return 0, or -1 with the local exception set. */
int pyar_call_options(pyar_call_t *c, PyObject *algorithm, PyObject *segment_bytes,
                      PyObject *timeout_ms);

/** Validate and lay out an allreduce. @return 0, or -1 with the local exception set. */
int pyar_call_prepare_allreduce(pyar_call_t *c, PyObject *x, PyObject *op, PyObject *out);

/**
 * Validate and lay out a reduce-scatter (c->kind PYAR_CALL_REDUCE_SCATTER: x holds p blocks, out
 * one) or an allgather (x one block, out p): out, when given, any writable C-contiguous array of
 * x's dtype with that many elements, else a new one-dimensional array like x. Never in place.
 * @return 0, or -1 with the local exception set.
 */
int pyar_call_prepare_rsag(pyar_call_t *c, PyObject *x, PyObject *op, PyObject *out);

/** Validate a broadcast. @return 0, or -1 with the local exception set. */
int pyar_call_prepare_bcast(pyar_call_t *c, PyObject *x, PyObject *root);

/**
 * The cross-rank argument check: one small allreduce that every rank joins, also a rank whose
 * own checks failed (@p local_failed, with its exception set), so that no rank waits for another
 * that has already raised. @return 0 when every rank passed and all agree; otherwise -1 with the
 * local exception, or MismatchError naming what differs or which rank failed.
 */
int pyar_call_agree(pyar_call_t *c, int local_failed);

/** Note the write of the call's output (pyar_array_written()) before it starts. @return 0/-1. */
int pyar_call_written(pyar_call_t *c);

/** Run the prepared call (blocking, without the GIL). @return 0 or -1. */
int pyar_call_run(pyar_call_t *c);

/* ---- request.c --------------------------------------------------------------------------- */

typedef struct pyar_request pyar_request_t;

/** The active requests of an owner (a KVStore), which completes them all at once. */
typedef struct pyar_reqlist {
  pyar_request_t *head;
} pyar_reqlist_t;

/**
 * A new, inactive request object whose call (pyar_request_call()) the caller prepares and then
 * starts on pyar_request_handle(), then marks it with pyar_request_started(). @p kind and
 * @p fname initialise the call. New reference, or NULL with an exception.
 */
PyObject *pyar_request_new(int kind, const char *fname, int persistent);

/** The call a request owns (its arrays stay alive while the request lives or is active). */
pyar_call_t *pyar_request_call(PyObject *req);

/** The C request handle to start the operation on. */
mpiar_request_t *pyar_request_handle(PyObject *req);

/** Mark a request whose operation was just started (it keeps its arrays until it completes). */
void pyar_request_started(PyObject *req);

/**
 * Tie a request to its owner (a KVStore): it holds a reference to @p owner, sets *@p busy while
 * a thread is inside a C call on it, and is on @p list while active.
 */
void pyar_request_set_owner(PyObject *req, PyObject *owner, int *busy, pyar_reqlist_t *list);

/**
 * Complete every request on @p list whose C request has completed (after mpiar_kv_wait_all(),
 * all of them): release their arrays and keep their errors for wait(). Needs the GIL; calls
 * only mpiar_test on requests that are complete in C.
 */
void pyar_reqlist_collect(pyar_reqlist_t *list);

/** Add the Request type to @p module. @return 0 or -1. */
int pyar_request_init(PyObject *module);

PyObject *pyar_waitall(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames);
PyObject *pyar_waitany(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames);
PyObject *pyar_testany(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames);

/* ---- collectives.c / kvstore.c ----------------------------------------------------------- */

PyObject *pyar_allreduce(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                         PyObject *kwnames);
PyObject *pyar_bcast(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames);
PyObject *pyar_iallreduce(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                          PyObject *kwnames);
PyObject *pyar_ibcast(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames);
PyObject *pyar_allreduce_init(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                              PyObject *kwnames);
PyObject *pyar_bcast_init(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                          PyObject *kwnames);
PyObject *pyar_reduce_scatter_block(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                                    PyObject *kwnames);
PyObject *pyar_ireduce_scatter_block(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                                     PyObject *kwnames);
PyObject *pyar_reduce_scatter_block_init(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                                         PyObject *kwnames);
PyObject *pyar_allgather(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                         PyObject *kwnames);
PyObject *pyar_iallgather(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                          PyObject *kwnames);
PyObject *pyar_allgather_init(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                              PyObject *kwnames);
PyObject *pyar_select(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames);
PyObject *pyar_c_loop(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames);

/** Add the KVStore type to @p module. @return 0 or -1. */
int pyar_kvstore_init(PyObject *module);

/* ---- shm.c ------------------------------------------------------------------------------- */

/** Add the SharedBuffer type, _shm_alloc and _shm_release to @p module. @return 0 or -1. */
int pyar_shm_init(PyObject *module);

/** Add @p obj to @p module under @p name (a new reference is taken). @return 0 or -1. */
static inline int pyar_module_add(PyObject *module, const char *name, PyObject *obj) {
  Py_INCREF(obj);
  if (PyModule_AddObject(module, name, obj) < 0) {
    Py_DECREF(obj);
    return -1;
  }
  return 0;
}

/** Cast a vectorcall function for a PyMethodDef. */
#define PYAR_FASTCALL(f) ((PyCFunction)(void (*)(void))(f))

#endif /* PYAR_H */
