/*
 * Arguments: a vectorcall parser (positional or keyword, names compared by identity first since
 * call sites pass interned names), mpi4py communicators through mpi4py's C API, operation names
 * and per-call options. mpi4py's C API header defines static functions, so this is the only file
 * that includes it.
 */
#include "pyar.h"

#include <limits.h>
#include <string.h>

#include <mpi4py/mpi4py.h>

static int sig_intern(pyar_sig_t *sig) {
  for (int i = 0; sig->names[i] != NULL; i++) {
    if (sig->interned[i] == NULL) {
      sig->interned[i] = PyUnicode_InternFromString(sig->names[i]);
      if (sig->interned[i] == NULL) {
        return -1;
      }
    }
  }
  return 0;
}

static int sig_find(const pyar_sig_t *sig, PyObject *key) {
  for (int i = 0; sig->names[i] != NULL; i++) {
    if (sig->interned[i] == key) {
      return i;
    }
  }
  for (int i = 0; sig->names[i] != NULL; i++) {
    if (PyUnicode_Check(key) && PyUnicode_CompareWithASCIIString(key, sig->names[i]) == 0) {
      return i;
    }
  }
  return -1;
}

int pyar_parse(pyar_sig_t *sig, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
               PyObject **out) {
  if (sig->interned[0] == NULL && sig_intern(sig) < 0) {
    return -1;
  }
  int n = 0;
  while (sig->names[n] != NULL) {
    out[n++] = NULL;
  }
  if (nargs > sig->max_positional) {
    PyErr_Format(PyExc_TypeError, "%s() takes at most %d positional arguments (%zd given)",
                 sig->fname, sig->max_positional, nargs);
    return -1;
  }
  for (Py_ssize_t i = 0; i < nargs; i++) {
    out[i] = args[i];
  }
  Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  for (Py_ssize_t j = 0; j < nkw; j++) {
    PyObject *key = PyTuple_GET_ITEM(kwnames, j);
    int i = sig_find(sig, key);
    if (i < 0) {
      PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument '%U'", sig->fname,
                   key);
      return -1;
    }
    if (out[i] != NULL) {
      PyErr_Format(PyExc_TypeError, "%s() got multiple values for argument '%s'", sig->fname,
                   sig->names[i]);
      return -1;
    }
    out[i] = args[nargs + j];
  }
  for (int i = 0; i < sig->required; i++) {
    if (out[i] == NULL) {
      PyErr_Format(PyExc_TypeError, "%s() missing required argument '%s'", sig->fname,
                   sig->names[i]);
      return -1;
    }
  }
  return 0;
}

/* ---- communicators ------------------------------------------------------------------------ */

int pyar_comm_init(void) {
  return import_mpi4py();
}

/*
 * MPI's state, cached: MPI_Initialized and MPI_Finalized take a lock in some MPI libraries, and
 * no call may reach MPI after MPI_Finalize. MPI_Finalize deletes the attributes of MPI_COMM_SELF
 * before anything else, so an attribute's delete callback marks the end.
 */
static int mpi_live;
static int self_keyval = MPI_KEYVAL_INVALID;

static int on_finalize(MPI_Comm comm, int keyval, void *attr, void *extra) {
  (void)comm;
  (void)keyval;
  (void)attr;
  (void)extra;
  mpi_live = 0;
  return MPI_SUCCESS;
}

static int mpi_state(const char *fname) {
  if (mpi_live) {
    return 0;
  }
  int flag = 0;
  MPI_Initialized(&flag);
  if (!flag) {
    return pyar_raise_code(MPIAR_ERR_MPI_STATE,
                           "%s: MPI is not initialized (mpi4py.rc.initialize is off and "
                           "MPI.Init() was not called)",
                           fname);
  }
  MPI_Finalized(&flag);
  if (flag) {
    return pyar_raise_code(MPIAR_ERR_MPI_STATE, "%s: MPI is already finalized", fname);
  }
  if (self_keyval == MPI_KEYVAL_INVALID &&
      MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, on_finalize, &self_keyval, NULL) !=
          MPI_SUCCESS) {
    return 0; /* no cache: check again next time */
  }
  if (MPI_Comm_set_attr(MPI_COMM_SELF, self_keyval, NULL) == MPI_SUCCESS) {
    mpi_live = 1;
  }
  return 0;
}

int pyar_mpi_usable(void) {
  if (mpi_live) {
    return 1;
  }
  int init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  return init && !fin;
}

int pyar_get_comm(PyObject *obj, MPI_Comm *comm, const char *fname) {
  if (obj == NULL || obj == Py_None) {
    *comm = MPI_COMM_WORLD;
    return mpi_state(fname);
  }
  if (!PyObject_TypeCheck(obj, &PyMPIComm_Type)) {
    PyErr_Format(PyExc_TypeError, "%s: comm must be an mpi4py communicator, not %.200s", fname,
                 Py_TYPE(obj)->tp_name);
    return -1;
  }
  MPI_Comm *p = PyMPIComm_Get(obj);
  if (p == NULL) {
    return -1;
  }
  *comm = *p;
  if (mpi_state(fname) < 0) {
    return -1;
  }
  if (*comm == MPI_COMM_NULL) {
    return pyar_raise_code(MPIAR_ERR_COMM, "%s: comm is MPI.COMM_NULL", fname);
  }
  int inter = 0;
  if (MPI_Comm_test_inter(*comm, &inter) != MPI_SUCCESS) {
    return pyar_raise_code(MPIAR_ERR_COMM, "%s: comm is not a valid communicator", fname);
  }
  if (inter) {
    return pyar_raise_code(MPIAR_ERR_COMM,
                           "%s: comm is an intercommunicator; mpiar needs an intracommunicator",
                           fname);
  }
  return 0;
}

/* ---- operations --------------------------------------------------------------------------- */

static const struct {
  const char *name;
  mpiar_op_t op;
  int logical;
} op_names[] = {
    {"sum", MPIAR_SUM, 0},   {"prod", MPIAR_PROD, 0}, {"min", MPIAR_MIN, 0},
    {"max", MPIAR_MAX, 0},   {"band", MPIAR_BAND, 0}, {"bor", MPIAR_BOR, 0},
    {"bxor", MPIAR_BXOR, 0}, {"avg", MPIAR_AVG, 0},   {"land", MPIAR_BAND, 1},
    {"lor", MPIAR_BOR, 1},   {"lxor", MPIAR_BXOR, 1},
};
#define N_OPS (sizeof op_names / sizeof op_names[0])
static PyObject *op_interned[N_OPS];

int pyar_get_op(PyObject *obj, mpiar_op_t dflt, pyar_op_t *op, const char *fname) {
  if (obj == NULL || obj == Py_None) {
    op->op = dflt;
    op->logical = 0;
    return 0;
  }
  for (size_t i = 0; i < N_OPS; i++) {
    if (op_interned[i] == obj) {
      op->op = op_names[i].op;
      op->logical = op_names[i].logical;
      return 0;
    }
  }
  if (!PyUnicode_Check(obj)) {
    PyErr_Format(PyExc_TypeError, "%s: op must be a string such as 'sum', not %.200s", fname,
                 Py_TYPE(obj)->tp_name);
    return -1;
  }
  for (size_t i = 0; i < N_OPS; i++) {
    if (PyUnicode_CompareWithASCIIString(obj, op_names[i].name) == 0) {
      if (op_interned[i] == NULL) {
        op_interned[i] = PyUnicode_InternFromString(op_names[i].name);
      }
      op->op = op_names[i].op;
      op->logical = op_names[i].logical;
      return 0;
    }
  }
  PyErr_Format(PyExc_ValueError,
               "%s: unknown op %R (sum, prod, min, max, band, bor, bxor, avg; land, lor, lxor "
               "on bool)",
               fname, obj);
  return -1;
}

const char *pyar_op_name(pyar_op_t op) {
  for (size_t i = 0; i < N_OPS; i++) {
    if (op_names[i].op == op.op && op_names[i].logical == op.logical) {
      return op_names[i].name;
    }
  }
  return "?";
}

/* ---- integers and options ----------------------------------------------------------------- */

int pyar_get_size(PyObject *obj, size_t *v, const char *fname, const char *what) {
  if (PyBool_Check(obj) || !PyIndex_Check(obj)) {
    PyErr_Format(PyExc_TypeError, "%s: %s must be an integer, not %.200s", fname, what,
                 Py_TYPE(obj)->tp_name);
    return -1;
  }
  PyObject *i = PyNumber_Index(obj);
  if (i == NULL) {
    return -1;
  }
  int overflow = 0;
  long long ll = PyLong_AsLongLongAndOverflow(i, &overflow);
  if (overflow < 0 || (overflow == 0 && ll < 0)) {
    Py_DECREF(i);
    PyErr_Format(PyExc_ValueError, "%s: %s must not be negative", fname, what);
    return -1;
  }
  *v = PyLong_AsSize_t(i);
  Py_DECREF(i);
  return (*v == (size_t)-1 && PyErr_Occurred()) ? -1 : 0;
}

int pyar_get_int(PyObject *obj, int *v, const char *fname, const char *what) {
  if (PyBool_Check(obj) || !PyIndex_Check(obj)) {
    PyErr_Format(PyExc_TypeError, "%s: %s must be an integer, not %.200s", fname, what,
                 Py_TYPE(obj)->tp_name);
    return -1;
  }
  PyObject *i = PyNumber_Index(obj);
  if (i == NULL) {
    return -1;
  }
  int overflow = 0;
  long l = PyLong_AsLongAndOverflow(i, &overflow);
  Py_DECREF(i);
  if (l == -1 && PyErr_Occurred()) {
    return -1;
  }
  if (overflow || l < INT_MIN || l > INT_MAX) {
    PyErr_Format(PyExc_OverflowError, "%s: %s does not fit a C int", fname, what);
    return -1;
  }
  *v = (int)l;
  return 0;
}

int pyar_known_algorithm(const char *name) {
  /* The library's own check: registry names and parameterised ones (NAME/k=N). */
  return mpiar_algorithm_check(name) == MPIAR_SUCCESS;
}

int pyar_get_options(PyObject *algorithm, PyObject *segment_bytes, PyObject *timeout_ms,
                     mpiar_options_t *opts, const char *fname) {
  mpiar_options_t o = MPIAR_OPTIONS_INIT;
  if (algorithm != NULL && algorithm != Py_None) {
    if (!PyUnicode_Check(algorithm)) {
      PyErr_Format(PyExc_TypeError, "%s: algorithm must be a string or None, not %.200s", fname,
                   Py_TYPE(algorithm)->tp_name);
      return -1;
    }
    o.algorithm = PyUnicode_AsUTF8(algorithm);
    if (o.algorithm == NULL) {
      return -1;
    }
  }
  if (segment_bytes != NULL && segment_bytes != Py_None &&
      pyar_get_size(segment_bytes, &o.segment_bytes, fname, "segment_bytes") < 0) {
    return -1;
  }
  if (timeout_ms != NULL && timeout_ms != Py_None &&
      pyar_get_int(timeout_ms, &o.timeout_ms, fname, "timeout_ms") < 0) {
    return -1;
  }
  *opts = o;
  return 0;
}
