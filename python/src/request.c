/*
 * mpiar.Request: one nonblocking or persistent operation (mpiar.iallreduce, mpiar.ibcast,
 * mpiar.allreduce_init, mpiar.bcast_init, KVStore.pushpull_async), and the module functions
 * waitall, waitany and testany.
 *
 * Memory. A request owns its call (pyar_call_t): references to the arrays and the
 * communicator, the arrays' buffer views, any contiguous copy of a non-contiguous input, and the
 * result object. So the memory an operation reads and writes stays alive until it completes,
 * whatever the program drops meanwhile (`del x` before wait() is safe). A nonpersistent request
 * releases its arrays when it completes and keeps only its result; a persistent one keeps them
 * until free(), since every start() runs on the same memory.
 *
 * Dropped requests. An operation is collective: the other ranks depend on this rank's part of
 * it. So a request that is dropped (or collected) while active is completed first, by waiting
 * for it with the GIL released, as mpiar_request_free() does in C; Python warns with a
 * ResourceWarning, and an error of that completion goes to sys.unraisablehook. The wait follows
 * the ordering rules of the operation (a queued KVStore.pushpull_async starts there). A request
 * that is part of a reference cycle is not collected while active (the cycle collector does not
 * see the arrays of an active request), so nothing can free memory under it.
 *
 * Errors. A failure of the operation raises its mpiar.Error subclass at the test() or wait() that
 * completes it (or at waitall); the exception is kept and raised again by later waits. The GIL
 * is released in every C call that may wait or communicate (start, test, wait), and a request is
 * used by one thread at a time: another thread gets RuntimeError while one is inside a call on
 * it. A KVStore's requests also mark the store busy while they run, because testing one advances
 * the store.
 */
#include "pyar.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>

struct pyar_request {
  PyObject ob_base; /* PyObject_HEAD */
  mpiar_request_t handle;
  pyar_call_t call;
  int active;      /* started, and its completion not yet seen here */
  int persistent;  /* made by allreduce_init / bcast_init */
  int freed;       /* free() released it */
  int busy;        /* a thread is inside a C call on it, without the GIL */
  int holds_owner; /* it marked its owner busy (a group of one owner's requests marks it once) */
  PyObject *exc;   /* the exception of a failed completion, raised again by wait() */
  PyObject *owner;
  int *owner_busy;
  pyar_reqlist_t *list;
  pyar_request_t *prev, *next;
  int linked;
  PyObject *weakrefs;
};

static PyTypeObject req_type;

#define DETAIL_MAX 1024

static int is_finalizing(void) {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing();
#else
  return _Py_IsFinalizing();
#endif
}

/* ---- the owner's list --------------------------------------------------------------------- */

static void list_add(pyar_request_t *r) {
  if (r->list == NULL || r->linked) {
    return;
  }
  r->prev = NULL;
  r->next = r->list->head;
  if (r->next != NULL) {
    r->next->prev = r;
  }
  r->list->head = r;
  r->linked = 1;
}

static void list_remove(pyar_request_t *r) {
  if (!r->linked) {
    return;
  }
  if (r->prev != NULL) {
    r->prev->next = r->next;
  } else {
    r->list->head = r->next;
  }
  if (r->next != NULL) {
    r->next->prev = r->prev;
  }
  r->prev = r->next = NULL;
  r->linked = 0;
}

/* ---- the C side of the interface ---------------------------------------------------------- */

PyObject *pyar_request_new(int kind, const char *fname, int persistent) {
  pyar_request_t *r = (pyar_request_t *)req_type.tp_alloc(&req_type, 0);
  if (r == NULL) {
    return NULL;
  }
  r->handle = MPIAR_REQUEST_NULL;
  pyar_call_init(&r->call, fname, kind);
  r->persistent = persistent;
  return (PyObject *)r;
}

pyar_call_t *pyar_request_call(PyObject *req) {
  return &((pyar_request_t *)req)->call;
}

mpiar_request_t *pyar_request_handle(PyObject *req) {
  return &((pyar_request_t *)req)->handle;
}

void pyar_request_started(PyObject *req) {
  pyar_request_t *r = (pyar_request_t *)req;
  r->active = 1;
  Py_CLEAR(r->exc);
  list_add(r);
}

void pyar_request_set_owner(PyObject *req, PyObject *owner, int *busy, pyar_reqlist_t *list) {
  pyar_request_t *r = (pyar_request_t *)req;
  Py_INCREF(owner);
  Py_XSETREF(r->owner, owner);
  r->owner_busy = busy;
  r->list = list;
}

/* ---- completion --------------------------------------------------------------------------- */

/* The arrays of a call, released once a nonpersistent operation is over; the result stays. */
static void release_buffers(pyar_request_t *r) {
  pyar_array_release(&r->call.in);
  pyar_array_release(&r->call.out);
  Py_CLEAR(r->call.algorithm);
  Py_CLEAR(r->call.comm_obj);
  r->call.send = NULL;
  r->call.recv = NULL;
}

/* Note a completion seen here: the request is no longer active; keep the error, if any. */
static void completed(pyar_request_t *r, int rc, const char *detail) {
  r->active = 0;
  list_remove(r);
  if (rc != MPIAR_SUCCESS) {
    pyar_call_keep_after_failure(&r->call, rc);
  }
  if (!r->persistent) {
    release_buffers(r);
  }
  if (rc == MPIAR_SUCCESS) {
    return;
  }
  PyObject *et, *ev, *tb;
  PyErr_Fetch(&et, &ev, &tb);
  pyar_raise_detail(rc, r->call.fname, detail);
  PyObject *t, *v, *b;
  PyErr_Fetch(&t, &v, &b);
  PyErr_NormalizeException(&t, &v, &b);
  Py_XDECREF(t);
  Py_XDECREF(b);
  Py_XSETREF(r->exc, v);
  PyErr_Restore(et, ev, tb);
}

/* Whether a C test or wait that returned @p rc left the operation unfinished. */
static int unfinished(const pyar_request_t *r, mpiar_request_t h, int rc) {
  if (!r->persistent) {
    return h != MPIAR_REQUEST_NULL;
  }
  /* An inactive persistent request stays; only a call that could not enter its communicator
   * (another thread inside it) leaves it running. */
  return rc == MPIAR_ERR_CONCURRENT;
}

static PyObject *raise_exc(pyar_request_t *r) {
  PyErr_SetObject((PyObject *)Py_TYPE(r->exc), r->exc);
  return NULL;
}

/* Mark a request (and its owner, unless @p owner_held) busy for a call without the GIL. */
static int enter_(pyar_request_t *r, const char *fname, int owner_held) {
  if (r->busy) {
    PyErr_Format(PyExc_RuntimeError, "%s: the request is in use by another thread", fname);
    return -1;
  }
  if (!owner_held && r->owner_busy != NULL && *r->owner_busy) {
    PyErr_Format(PyExc_RuntimeError, "%s: the request's KVStore is in use by another thread",
                 fname);
    return -1;
  }
  if (!pyar_mpi_usable()) {
    pyar_raise_code(MPIAR_ERR_MPI_STATE, "%s: MPI is finalized", fname);
    return -1;
  }
  r->busy = 1;
  if (!owner_held && r->owner_busy != NULL) {
    *r->owner_busy = 1;
    r->holds_owner = 1;
  }
  return 0;
}

static int enter(pyar_request_t *r, const char *fname) {
  return enter_(r, fname, 0);
}

static void leave(pyar_request_t *r) {
  r->busy = 0;
  if (r->holds_owner) {
    *r->owner_busy = 0;
    r->holds_owner = 0;
  }
}

/* Wait without the GIL (entered). @return the C result, the detail in @p detail. */
static int c_wait(pyar_request_t *r, char *detail) {
  int rc;
  Py_BEGIN_ALLOW_THREADS;
  rc = mpiar_wait(&r->handle);
  if (rc != MPIAR_SUCCESS) {
    snprintf(detail, DETAIL_MAX, "%s", mpiar_last_error());
  }
  Py_END_ALLOW_THREADS;
  return rc;
}

/*
 * Complete an active request (entered or not). @return 1 when this call completed it, 0 when it
 * was not active, -1 with an exception when it could not (another thread, MPI finalized).
 */
static int complete(pyar_request_t *r, const char *fname) {
  if (!r->active) {
    return 0;
  }
  if (enter(r, fname) < 0) {
    return -1;
  }
  char detail[DETAIL_MAX] = "";
  int rc = c_wait(r, detail);
  leave(r);
  if (unfinished(r, r->handle, rc)) {
    return pyar_raise_detail(rc, fname, detail);
  }
  completed(r, rc, detail);
  return 1;
}

/*
 * A request that goes away while active: complete it (the operation is collective), retrying
 * while another thread is inside its communicator or store, then release a persistent one's C
 * request. Keeps any exception that is set. After MPI_Finalize the handle is dropped: the
 * process is ending and MPI cannot be called.
 */
static void finish_dropped(pyar_request_t *r) {
  if (r->busy || (!r->active && r->handle == MPIAR_REQUEST_NULL)) {
    return;
  }
  if (!pyar_mpi_usable()) {
    r->handle = MPIAR_REQUEST_NULL;
    r->active = 0;
    list_remove(r);
    return;
  }
  PyObject *et, *ev, *tb;
  PyErr_Fetch(&et, &ev, &tb);
  if (r->active) {
    if (!is_finalizing() &&
        PyErr_WarnFormat(PyExc_ResourceWarning, 1,
                         "%s: a request was dropped while its operation was in progress; it was "
                         "completed (waited for), since the operation is collective",
                         r->call.fname) < 0) {
      PyErr_WriteUnraisable(NULL);
    }
    char detail[DETAIL_MAX] = "";
    int rc;
    for (;;) {
      while (r->owner_busy != NULL && *r->owner_busy) {
        Py_BEGIN_ALLOW_THREADS;
        sched_yield();
        Py_END_ALLOW_THREADS;
      }
      r->busy = 1;
      if (r->owner_busy != NULL) {
        *r->owner_busy = 1;
        r->holds_owner = 1;
      }
      rc = c_wait(r, detail);
      leave(r);
      if (!unfinished(r, r->handle, rc)) {
        break;
      }
      Py_BEGIN_ALLOW_THREADS;
      sched_yield();
      Py_END_ALLOW_THREADS;
    }
    completed(r, rc, detail);
    if (rc != MPIAR_SUCCESS) {
      PyErr_SetObject((PyObject *)Py_TYPE(r->exc), r->exc);
      PyErr_WriteUnraisable(NULL);
    }
  }
  if (r->persistent && r->handle != MPIAR_REQUEST_NULL) {
    mpiar_request_free(&r->handle);
    r->handle = MPIAR_REQUEST_NULL;
  }
  PyErr_Restore(et, ev, tb);
}

void pyar_reqlist_collect(pyar_reqlist_t *list) {
  pyar_request_t *r = list->head;
  while (r != NULL) {
    pyar_request_t *next = r->next;
    if (!r->busy) {
      int done = 0;
      int rc = mpiar_test(&r->handle, &done);
      if (done) {
        completed(r, rc, rc != MPIAR_SUCCESS ? mpiar_last_error() : "");
      }
    }
    r = next;
  }
}

/* ---- methods ------------------------------------------------------------------------------ */

static PyObject *result_of(pyar_request_t *r) {
  if (r->exc != NULL) {
    return raise_exc(r);
  }
  PyObject *res = r->call.result != NULL ? r->call.result : Py_None;
  Py_INCREF(res);
  return res;
}

static PyObject *req_wait(pyar_request_t *r, PyObject *unused) {
  (void)unused;
  if (complete(r, "Request.wait") < 0) {
    return NULL;
  }
  return result_of(r);
}

static PyObject *req_test(pyar_request_t *r, PyObject *unused) {
  (void)unused;
  if (!r->active) {
    if (r->exc != NULL) {
      return raise_exc(r);
    }
    Py_RETURN_TRUE;
  }
  if (enter(r, "Request.test") < 0) {
    return NULL;
  }
  int done = 0, rc;
  char detail[DETAIL_MAX] = "";
  Py_BEGIN_ALLOW_THREADS;
  rc = mpiar_test(&r->handle, &done);
  if (rc != MPIAR_SUCCESS) {
    snprintf(detail, sizeof detail, "%s", mpiar_last_error());
  }
  Py_END_ALLOW_THREADS;
  leave(r);
  if (!done) {
    if (rc != MPIAR_SUCCESS) {
      pyar_raise_detail(rc, "Request.test", detail);
      return NULL;
    }
    Py_RETURN_FALSE;
  }
  completed(r, rc, detail);
  if (r->exc != NULL) {
    return raise_exc(r);
  }
  Py_RETURN_TRUE;
}

static PyObject *req_start(pyar_request_t *r, PyObject *unused) {
  (void)unused;
  const char *fname = "Request.start";
  if (!r->persistent) {
    PyErr_Format(PyExc_ValueError,
                 "%s: not a persistent request (mpiar.allreduce_init and mpiar.bcast_init make "
                 "those)",
                 fname);
    return NULL;
  }
  if (r->freed) {
    PyErr_Format(PyExc_ValueError, "%s: the request was freed", fname);
    return NULL;
  }
  if (r->active) {
    PyErr_Format(PyExc_ValueError,
                 "%s: the request is active; wait for it before starting it again", fname);
    return NULL;
  }
  if (enter(r, fname) < 0) {
    return NULL;
  }
  if (pyar_array_refresh(&r->call.in, r->call.order) < 0 || pyar_call_written(&r->call) < 0) {
    leave(r);
    return NULL;
  }
  int rc;
  Py_BEGIN_ALLOW_THREADS;
  rc = mpiar_start(&r->handle);
  Py_END_ALLOW_THREADS;
  leave(r);
  if (rc != MPIAR_SUCCESS) {
    pyar_raise(rc, r->call.fname);
    return NULL;
  }
  pyar_request_started((PyObject *)r);
  Py_RETURN_NONE;
}

/* free(): complete if active (raising the operation's error, if this call completed it), then
 * release the arrays and a persistent request's C request. */
static PyObject *req_free(pyar_request_t *r, PyObject *unused) {
  (void)unused;
  int c = complete(r, "Request.free");
  if (c < 0) {
    return NULL;
  }
  if (r->persistent && r->handle != MPIAR_REQUEST_NULL && pyar_mpi_usable()) {
    mpiar_request_free(&r->handle);
  }
  r->handle = MPIAR_REQUEST_NULL;
  release_buffers(r);
  r->freed = 1;
  if (c == 1 && r->exc != NULL) {
    return raise_exc(r);
  }
  Py_RETURN_NONE;
}

static PyObject *req_enter(PyObject *self, PyObject *unused) {
  (void)unused;
  Py_INCREF(self);
  return self;
}

static PyObject *req_exit(pyar_request_t *r, PyObject *args) {
  (void)args;
  return req_free(r, NULL);
}

static PyObject *get_done(pyar_request_t *r, void *c) {
  (void)c;
  return PyBool_FromLong(!r->active);
}

static PyObject *get_persistent(pyar_request_t *r, void *c) {
  (void)c;
  return PyBool_FromLong(r->persistent);
}

static PyObject *req_repr(pyar_request_t *r) {
  return PyUnicode_FromFormat("<mpiar.Request %s%s, %s>", r->call.fname,
                              r->persistent ? " (persistent)" : "",
                              r->active  ? "active"
                              : r->freed ? "freed"
                              : r->exc   ? "failed"
                                         : "done");
}

/* ---- the type ----------------------------------------------------------------------------- */

static int visit_array(pyar_array_t *a, visitproc visit, void *arg) {
  Py_VISIT(a->obj);
  Py_VISIT(a->copy_obj);
  if (a->has_view) {
    Py_VISIT(a->view.obj);
  }
  return 0;
}

static int req_traverse(pyar_request_t *r, visitproc visit, void *arg) {
  /* The arrays of an active request are left out: a cycle through them is never collected
   * while the operation may still read or write them. */
  if (!r->active) {
    int rc = visit_array(&r->call.in, visit, arg);
    if (rc == 0) {
      rc = visit_array(&r->call.out, visit, arg);
    }
    if (rc != 0) {
      return rc;
    }
    Py_VISIT(r->call.result);
    Py_VISIT(r->call.comm_obj);
  }
  Py_VISIT(r->exc);
  Py_VISIT(r->owner);
  return 0;
}

static int req_clear(pyar_request_t *r) {
  if (r->busy) {
    return 0;
  }
  finish_dropped(r);
  pyar_call_release(&r->call);
  Py_CLEAR(r->exc);
  list_remove(r);
  r->owner_busy = NULL;
  r->list = NULL;
  Py_CLEAR(r->owner);
  return 0;
}

static void req_dealloc(pyar_request_t *r) {
  PyObject_GC_UnTrack(r);
  if (r->weakrefs != NULL) {
    PyObject_ClearWeakRefs((PyObject *)r);
  }
  finish_dropped(r);
  pyar_call_release(&r->call);
  Py_CLEAR(r->exc);
  list_remove(r);
  Py_CLEAR(r->owner);
  Py_TYPE(r)->tp_free((PyObject *)r);
}

static PyMethodDef req_methods[] = {
    {"wait", (PyCFunction)req_wait, METH_NOARGS,
     "wait(): wait until the operation completes (the GIL is released) and return its result "
     "(the output array; for a KVStore request, its output); raise its error if it failed."},
    {"test", (PyCFunction)req_test, METH_NOARGS,
     "test() -> bool: advance the operation; True once it has completed (raises its error if it "
     "failed)."},
    {"start", (PyCFunction)req_start, METH_NOARGS,
     "start(): run a persistent request again on the same arrays (collective)."},
    {"free", (PyCFunction)req_free, METH_NOARGS,
     "free(): complete the operation if it is active, then release the arrays (and a persistent "
     "request)."},
    {"__enter__", (PyCFunction)req_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)req_exit, METH_VARARGS, "free() on leaving the block."},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef req_getset[] = {
    {"done", (getter)get_done, NULL,
     "Whether no operation is in progress (completed; for a persistent request, not started).",
     NULL},
    {"persistent", (getter)get_persistent, NULL, "Whether start() may run it again.", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyTypeObject req_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "mpiar.Request",
    .tp_basicsize = sizeof(pyar_request_t),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "An operation in progress (mpiar.iallreduce, mpiar.ibcast, "
              "KVStore.pushpull_async) or a persistent operation (mpiar.allreduce_init, "
              "mpiar.bcast_init). A request dropped while active is completed first.",
    .tp_dealloc = (destructor)req_dealloc,
    .tp_traverse = (traverseproc)req_traverse,
    .tp_clear = (inquiry)req_clear,
    .tp_repr = (reprfunc)req_repr,
    .tp_weaklistoffset = offsetof(pyar_request_t, weakrefs),
    .tp_methods = req_methods,
    .tp_getset = req_getset,
};

int pyar_request_init(PyObject *module) {
  if (PyType_Ready(&req_type) < 0) {
    return -1;
  }
  return pyar_module_add(module, "Request", (PyObject *)&req_type);
}

/* ---- waitall, waitany, testany -------------------------------------------------------------- */

/* The requests of a list argument, and the C handles of the active ones, entered. */
typedef struct {
  PyObject *seq;
  Py_ssize_t n;
  pyar_request_t **all;
  int m;                    /* active ones */
  int *at;                  /* their positions in the list */
  mpiar_request_t *handles; /* their handles (the C calls update these) */
  int *rc;
  char *details; /* m * DETAIL_MAX */
  int entered;
} group_t;

static void group_free(group_t *g) {
  for (int k = 0; k < g->entered; k++) {
    leave(g->all[g->at[k]]);
  }
  PyMem_Free(g->all);
  PyMem_Free(g->at);
  PyMem_Free(g->handles);
  PyMem_Free(g->rc);
  PyMem_Free(g->details);
  Py_XDECREF(g->seq);
}

static int cmp_ptr(const void *a, const void *b) {
  const char *x = *(const char *const *)a, *y = *(const char *const *)b;
  return x < y ? -1 : x > y;
}

static int group_make(group_t *g, PyObject *requests, const char *fname, int with_details) {
  memset(g, 0, sizeof *g);
  g->seq = PySequence_Fast(requests, "a list of mpiar.Request");
  if (g->seq == NULL) {
    return -1;
  }
  g->n = PySequence_Fast_GET_SIZE(g->seq);
  size_t n1 = (size_t)g->n + 1;
  g->all = PyMem_Calloc(n1, sizeof *g->all);
  g->at = PyMem_Calloc(n1, sizeof *g->at);
  g->handles = PyMem_Calloc(n1, sizeof *g->handles);
  g->rc = PyMem_Calloc(n1, sizeof *g->rc);
  pyar_request_t **sorted = PyMem_Calloc(n1, sizeof *sorted);
  if (!g->all || !g->at || !g->handles || !g->rc || !sorted) {
    PyMem_Free(sorted);
    PyErr_NoMemory();
    return -1;
  }
  for (Py_ssize_t i = 0; i < g->n; i++) {
    PyObject *o = PySequence_Fast_GET_ITEM(g->seq, i);
    if (!PyObject_TypeCheck(o, &req_type)) {
      PyMem_Free(sorted);
      PyErr_Format(PyExc_TypeError, "%s: item %zd is a %.200s, not an mpiar.Request", fname, i,
                   Py_TYPE(o)->tp_name);
      return -1;
    }
    g->all[i] = sorted[i] = (pyar_request_t *)o;
  }
  qsort(sorted, (size_t)g->n, sizeof *sorted, cmp_ptr);
  for (Py_ssize_t i = 1; i < g->n; i++) {
    if (sorted[i] == sorted[i - 1]) {
      PyMem_Free(sorted);
      PyErr_Format(PyExc_ValueError, "%s: a request appears twice in the list", fname);
      return -1;
    }
  }
  PyMem_Free(sorted);
  for (Py_ssize_t i = 0; i < g->n; i++) {
    if (g->all[i]->active) {
      g->at[g->m++] = (int)i;
    }
  }
  if (with_details && g->m > 0 && (g->details = PyMem_Calloc((size_t)g->m, DETAIL_MAX)) == NULL) {
    PyErr_NoMemory();
    return -1;
  }
  for (int k = 0; k < g->m; k++) {
    pyar_request_t *r = g->all[g->at[k]];
    int owner_held = 0;
    for (int j = 0; j < k && r->owner_busy != NULL; j++) {
      owner_held |= g->all[g->at[j]]->owner_busy == r->owner_busy;
    }
    if (enter_(r, fname, owner_held) < 0) {
      return -1;
    }
    g->entered++;
    g->handles[k] = r->handle;
  }
  return 0;
}

/* Hand the handles back to the requests and leave them. */
static void group_leave(group_t *g) {
  for (int k = 0; k < g->entered; k++) {
    pyar_request_t *r = g->all[g->at[k]];
    r->handle = g->handles[k];
    leave(r);
  }
  g->entered = 0;
}

static int first_active(group_t *g) {
  for (Py_ssize_t i = 0; i < g->n; i++) {
    if (!g->all[i]->active) {
      return (int)i;
    }
  }
  return -1;
}

static pyar_sig_t waitall_sig = {"mpiar.waitall", 1, 1, {"requests", NULL}, {NULL}};

PyObject *pyar_waitall(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
  (void)self;
  PyObject *a[1];
  if (pyar_parse(&waitall_sig, args, nargs, kwnames, a) < 0) {
    return NULL;
  }
  group_t g;
  if (group_make(&g, a[0], "mpiar.waitall", 1) < 0) {
    group_free(&g);
    return NULL;
  }
  int m = g.m;
  char *fatal = NULL;
  int fatal_rc = MPIAR_SUCCESS;
  char fatal_detail[DETAIL_MAX] = "";
  unsigned char *done = PyMem_Calloc((size_t)m + 1, 1);
  if (done == NULL) {
    group_free(&g);
    return PyErr_NoMemory();
  }
  Py_BEGIN_ALLOW_THREADS;
  /* mpiar_waitany steps the requests round robin, in list order, so every request of a group
   * advances while any is unfinished (one rank's progress on one communicator may be what another
   * rank needs on another), and queued KVStore requests start in list order. */
  for (int left = m; left > 0;) {
    int idx = -1;
    int rc = mpiar_waitany(m, g.handles, &idx);
    if (idx < 0) {
      break;
    }
    pyar_request_t *r = g.all[g.at[idx]];
    if (unfinished(r, g.handles[idx], rc) && !done[idx]) {
      if (rc != MPIAR_ERR_CONCURRENT) {
        fatal = fatal_detail;
        fatal_rc = rc;
        snprintf(fatal_detail, sizeof fatal_detail, "%s", mpiar_last_error());
        break;
      }
      sched_yield();
      continue;
    }
    done[idx] = 1;
    g.rc[idx] = rc;
    if (rc != MPIAR_SUCCESS) {
      snprintf(g.details + (size_t)idx * DETAIL_MAX, DETAIL_MAX, "%s", mpiar_last_error());
    }
    left--;
  }
  Py_END_ALLOW_THREADS;
  group_leave(&g);
  for (int k = 0; k < m; k++) {
    if (done[k]) {
      completed(g.all[g.at[k]], g.rc[k], g.details + (size_t)k * DETAIL_MAX);
    }
  }
  PyMem_Free(done);
  PyObject *out = NULL;
  if (fatal != NULL) {
    pyar_raise_detail(fatal_rc, "mpiar.waitall", fatal_detail);
    goto end;
  }
  for (Py_ssize_t i = 0; i < g.n; i++) {
    if (g.all[i]->exc != NULL) {
      raise_exc(g.all[i]);
      goto end;
    }
  }
  out = PyList_New(g.n);
  for (Py_ssize_t i = 0; out != NULL && i < g.n; i++) {
    PyList_SET_ITEM(out, i, result_of(g.all[i]));
  }
end:
  group_free(&g);
  return out;
}

static pyar_sig_t waitany_sig = {"mpiar.waitany", 1, 1, {"requests", NULL}, {NULL}};
static pyar_sig_t testany_sig = {"mpiar.testany", 1, 1, {"requests", NULL}, {NULL}};

/* waitany and testany: the position of a completed request (None from testany when none). */
static PyObject *any(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, int wait) {
  const char *fname = wait ? "mpiar.waitany" : "mpiar.testany";
  PyObject *a[1];
  if (pyar_parse(wait ? &waitany_sig : &testany_sig, args, nargs, kwnames, a) < 0) {
    return NULL;
  }
  group_t g;
  memset(&g, 0, sizeof g);
  PyObject *seq = PySequence_Fast(a[0], "a list of mpiar.Request");
  if (seq == NULL) {
    return NULL;
  }
  Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
  Py_DECREF(seq);
  if (n == 0) {
    PyErr_Format(PyExc_ValueError, "%s: the list of requests is empty", fname);
    return NULL;
  }
  if (group_make(&g, a[0], fname, 0) < 0) {
    group_free(&g);
    return NULL;
  }
  int first = first_active(&g);
  if (first >= 0) {
    group_free(&g);
    return PyLong_FromLong(first);
  }
  int idx = -1, done = 0, rc = MPIAR_SUCCESS;
  char detail[DETAIL_MAX] = "";
  Py_BEGIN_ALLOW_THREADS;
  for (;;) {
    if (wait) {
      rc = mpiar_waitany(g.m, g.handles, &idx);
      done = idx >= 0;
    } else {
      rc = mpiar_testany(g.m, g.handles, &idx, &done);
    }
    if (rc != MPIAR_SUCCESS) {
      snprintf(detail, sizeof detail, "%s", mpiar_last_error());
    }
    if (done && idx >= 0 && unfinished(g.all[g.at[idx]], g.handles[idx], rc)) {
      done = 0; /* could not advance it (another thread inside its communicator) */
    }
    if (done || !wait || (rc != MPIAR_SUCCESS && rc != MPIAR_ERR_CONCURRENT)) {
      break;
    }
    sched_yield();
  }
  Py_END_ALLOW_THREADS;
  group_leave(&g);
  PyObject *out = NULL;
  if (done && idx >= 0) {
    completed(g.all[g.at[idx]], rc, detail);
    out = PyLong_FromLong(g.at[idx]);
  } else if (rc != MPIAR_SUCCESS && rc != MPIAR_ERR_CONCURRENT) {
    pyar_raise_detail(rc, fname, detail);
  } else {
    out = Py_None;
    Py_INCREF(out);
  }
  group_free(&g);
  return out;
}

PyObject *pyar_waitany(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
  (void)self;
  return any(args, nargs, kwnames, 1);
}

PyObject *pyar_testany(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
  (void)self;
  return any(args, nargs, kwnames, 0);
}
