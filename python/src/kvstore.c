/*
 * mpiar.KVStore: the C kvstore (mpiar_kv.h) for Python. Keys are int or str as in the C store; a
 * call names one key or a list of keys (pushpull and step of a list use the C batch calls, which
 * pack tensors into fusion buffers).
 *
 * Collective calls and local errors: the C store runs a small agreement before it moves data, in
 * which a worker whose own checks failed takes part too, so every worker returns an error. Python
 * adds checks of its own (types, dtypes and counts of the arrays against the registered key), so a
 * worker that fails one of them still enters the same C call with an argument the C checks reject
 * (a NULL buffer), which makes the other workers fail the agreement instead of waiting; the
 * worker then raises its own exception. Under verify=False the C store skips the agreement of
 * pushpull and step, and so does this.
 *
 * Asynchronous pushpull (pushpull_async) returns one mpiar.Request per key (request.c); the
 * request owns the key's arrays until the reduction completes and marks the store busy while it
 * is tested or waited for (which advances the store). The store keeps a list of its active
 * requests, so that wait_all() and close() complete them all and release their arrays.
 *
 * A store is used from one thread at a time: a call while another thread is inside one raises.
 */
#include "pyar.h"

#include <string.h>

typedef struct {
  PyObject ob_base; /* PyObject_HEAD */
  mpiar_kv_t *kv;
  int rank, size, verify;
  int busy;
  PyObject *templates;     /* key -> (kind, shape, dtype) of the value given to init */
  pyar_reqlist_t requests; /* active asynchronous pushpulls */
} kvobject;

typedef enum { JOIN_VERIFIED, JOIN_ALWAYS, JOIN_SAVE, JOIN_LOAD } join_kind_t;

/*
 * Enter the C call the other workers are in with an argument its local checks reject, so that
 * its agreement fails everywhere; keeps the Python exception that is set.
 */
static void join_failed(kvobject *self, join_kind_t how) {
  PyObject *et, *ev, *tb;
  PyErr_Fetch(&et, &ev, &tb);
  mpiar_kv_key_t k = MPIAR_KV_INT(0);
  self->busy = 1;
  Py_BEGIN_ALLOW_THREADS;
  switch (how) {
  case JOIN_VERIFIED:
    if (self->verify) {
      mpiar_kv_pushpull_batch(self->kv, 1, &k, NULL, NULL);
    }
    break;
  case JOIN_ALWAYS:
    mpiar_kv_broadcast(self->kv, k, NULL, -1);
    break;
  case JOIN_SAVE:
    mpiar_kv_save(self->kv, NULL);
    break;
  case JOIN_LOAD:
    mpiar_kv_load(self->kv, NULL);
    break;
  }
  Py_END_ALLOW_THREADS;
  self->busy = 0;
  PyErr_Restore(et, ev, tb);
}

static int usable(kvobject *self, const char *fname) {
  if (self->kv == NULL) {
    PyErr_Format(PyExc_ValueError, "%s: the store is closed", fname);
    return -1;
  }
  if (self->busy) {
    PyErr_Format(PyExc_RuntimeError, "%s: the store is in use by another thread", fname);
    return -1;
  }
  return 0;
}

/* ---- keys --------------------------------------------------------------------------------- */

static int is_single_key(PyObject *obj) {
  return PyUnicode_Check(obj) || (PyIndex_Check(obj) && !PyBool_Check(obj));
}

/* The C key of @p obj and, in *dict_key, the Python object that names it (new reference). */
static int get_key(PyObject *obj, mpiar_kv_key_t *key, PyObject **dict_key, const char *fname) {
  if (PyUnicode_Check(obj)) {
    Py_ssize_t len = 0;
    const char *s = PyUnicode_AsUTF8AndSize(obj, &len);
    if (s == NULL) {
      return -1;
    }
    if ((Py_ssize_t)strlen(s) != len) {
      PyErr_Format(PyExc_ValueError, "%s: a string key must not contain NUL", fname);
      return -1;
    }
    *key = MPIAR_KV_STR(s);
    Py_INCREF(obj);
    *dict_key = obj;
    return 0;
  }
  if (PyBool_Check(obj) || !PyIndex_Check(obj)) {
    PyErr_Format(PyExc_TypeError, "%s: a key is an int or a str, not %.200s", fname,
                 Py_TYPE(obj)->tp_name);
    return -1;
  }
  PyObject *i = PyNumber_Index(obj);
  if (i == NULL) {
    return -1;
  }
  long long id = PyLong_AsLongLong(i);
  if (id == -1 && PyErr_Occurred()) {
    Py_DECREF(i);
    return -1;
  }
  *key = MPIAR_KV_INT(id);
  *dict_key = i;
  return 0;
}

/* ---- lists of keys and arrays ------------------------------------------------------------ */

typedef struct {
  Py_ssize_t n;
  int single;
  PyObject *keys_seq, *vals_seq, *outs_seq; /* tuples or lists */
  PyObject **dict_keys;
  mpiar_kv_key_t *keys;
  pyar_array_t *ins, *outs;
  const void **in_ptrs;
  void **out_ptrs;
} batch_t;

static void batch_free(batch_t *b) {
  for (Py_ssize_t i = 0; i < b->n; i++) {
    if (b->ins != NULL) {
      pyar_array_release(&b->ins[i]);
      pyar_array_release(&b->outs[i]);
    }
    if (b->dict_keys != NULL) {
      Py_XDECREF(b->dict_keys[i]);
    }
  }
  PyMem_Free(b->dict_keys);
  PyMem_Free(b->keys);
  PyMem_Free(b->ins);
  PyMem_Free(b->outs);
  PyMem_Free(b->in_ptrs);
  PyMem_Free(b->out_ptrs);
  Py_XDECREF(b->keys_seq);
  Py_XDECREF(b->vals_seq);
  Py_XDECREF(b->outs_seq);
  memset(b, 0, sizeof *b);
}

/* The items of a list argument, or the one item of a single-key call, as a sequence of n. */
static PyObject *as_items(PyObject *obj, int single, Py_ssize_t n, const char *fname,
                          const char *what) {
  if (single) {
    return PyTuple_Pack(1, obj);
  }
  if (!PyList_Check(obj) && !PyTuple_Check(obj)) {
    PyErr_Format(PyExc_TypeError, "%s: with a list of keys, %s must be a list or tuple, not %.200s",
                 fname, what, Py_TYPE(obj)->tp_name);
    return NULL;
  }
  if (n >= 0 && PySequence_Fast_GET_SIZE(obj) != n) {
    PyErr_Format(PyExc_ValueError, "%s: %zd keys but %zd %s", fname, n,
                 PySequence_Fast_GET_SIZE(obj), what);
    return NULL;
  }
  Py_INCREF(obj);
  return obj;
}

static int batch_alloc(batch_t *b, Py_ssize_t n) {
  size_t m = n > 0 ? (size_t)n : 1;
  b->dict_keys = PyMem_Calloc(m, sizeof *b->dict_keys);
  b->keys = PyMem_Calloc(m, sizeof *b->keys);
  b->ins = PyMem_Calloc(m, sizeof *b->ins);
  b->outs = PyMem_Calloc(m, sizeof *b->outs);
  b->in_ptrs = PyMem_Calloc(m, sizeof *b->in_ptrs);
  b->out_ptrs = PyMem_Calloc(m, sizeof *b->out_ptrs);
  if (!b->dict_keys || !b->keys || !b->ins || !b->outs || !b->in_ptrs || !b->out_ptrs) {
    PyMem_Free(b->ins);
    b->ins = NULL; /* batch_free must not release arrays that were never initialised */
    PyErr_NoMemory();
    return -1;
  }
  b->n = n;
  for (Py_ssize_t i = 0; i < n; i++) {
    pyar_array_init(&b->ins[i]);
    pyar_array_init(&b->outs[i]);
  }
  return 0;
}

/* Split (keys, values[, outs]) into n entries and convert the keys. */
static int batch_keys(batch_t *b, PyObject *keys, PyObject *values, PyObject *outs,
                      const char *fname) {
  b->single = is_single_key(keys);
  if (!b->single && !PyList_Check(keys) && !PyTuple_Check(keys)) {
    PyErr_Format(PyExc_TypeError, "%s: a key is an int or a str (or a list of them), not %.200s",
                 fname, Py_TYPE(keys)->tp_name);
    return -1;
  }
  if ((b->keys_seq = as_items(keys, b->single, -1, fname, "keys")) == NULL) {
    return -1;
  }
  Py_ssize_t n = PySequence_Fast_GET_SIZE(b->keys_seq);
  if ((b->vals_seq = as_items(values, b->single, n, fname, "values")) == NULL) {
    return -1;
  }
  if (outs != NULL && outs != Py_None &&
      (b->outs_seq = as_items(outs, b->single, n, fname, "outs")) == NULL) {
    return -1;
  }
  if (batch_alloc(b, n) < 0) {
    return -1;
  }
  for (Py_ssize_t i = 0; i < n; i++) {
    if (get_key(PySequence_Fast_GET_ITEM(b->keys_seq, i), &b->keys[i], &b->dict_keys[i], fname) <
        0) {
      return -1;
    }
  }
  return 0;
}

/* An array for key i: the key's registered dtype and element count, not bool. */
static int key_array(kvobject *self, batch_t *b, Py_ssize_t i, pyar_array_t *a, PyObject *obj,
                     const char *fname, const char *what) {
  mpiar_dtype_t dt;
  size_t count = 0;
  int rc = mpiar_kv_lookup(self->kv, b->keys[i], &dt, &count, NULL);
  if (rc != MPIAR_SUCCESS) {
    return pyar_raise(rc, fname);
  }
  if (pyar_array_get(obj, a, fname, what) < 0) {
    return -1;
  }
  if (a->is_bool || a->dtype != dt) {
    PyErr_Format(PyExc_TypeError, "%s: %s of key %R has dtype %s; the key holds %s", fname, what,
                 b->dict_keys[i], pyar_array_dtype_name(a), mpiar_dtype_name(dt));
    return -1;
  }
  if (a->count != count) {
    PyErr_Format(PyExc_ValueError, "%s: %s of key %R has %zu elements; the key holds %zu", fname,
                 what, b->dict_keys[i], a->count, count);
    return -1;
  }
  return 0;
}

/* Arrays of entry i: input (read) and output (written; the input itself when no outs). */
static int batch_entry(kvobject *self, batch_t *b, Py_ssize_t i, const char *fname) {
  pyar_array_t *in = &b->ins[i], *out = &b->outs[i];
  PyObject *vobj = PySequence_Fast_GET_ITEM(b->vals_seq, i);
  if (key_array(self, b, i, in, vobj, fname, "value") < 0) {
    return -1;
  }
  PyObject *oobj = b->outs_seq ? PySequence_Fast_GET_ITEM(b->outs_seq, i) : vobj;
  if (oobj == vobj) {
    if (pyar_array_check_writable(in, fname, "value (updated in place)") < 0 ||
        pyar_array_written(in) < 0) {
      return -1;
    }
    b->in_ptrs[i] = MPIAR_IN_PLACE;
    b->out_ptrs[i] = in->data;
    return 0;
  }
  if (key_array(self, b, i, out, oobj, fname, "out") < 0 ||
      pyar_array_check_writable(out, fname, "out") < 0 || pyar_array_written(out) < 0) {
    return -1;
  }
  b->out_ptrs[i] = out->data;
  size_t bytes = pyar_array_bytes(out);
  if (in->data != NULL && in->data == out->data) {
    b->in_ptrs[i] = MPIAR_IN_PLACE;
    return 0;
  }
  if (in->data != NULL && bytes > 0 && in->data < out->data + bytes &&
      out->data < in->data + bytes) {
    return pyar_raise_code(MPIAR_ERR_OVERLAP, "%s: value and out of key %R overlap partially",
                           fname, b->dict_keys[i]);
  }
  return pyar_array_data_in(in, out->c_contig ? 'C' : 'F', &b->in_ptrs[i], fname, "value");
}

static int batch_prepare(kvobject *self, batch_t *b, PyObject *keys, PyObject *values,
                         PyObject *outs, const char *fname) {
  if (batch_keys(b, keys, values, outs, fname) < 0) {
    return -1;
  }
  for (Py_ssize_t i = 0; i < b->n; i++) {
    if (batch_entry(self, b, i, fname) < 0) {
      return -1;
    }
  }
  return 0;
}

/* What a pushpull or step returns: the outputs, shaped as the caller passed them. */
static PyObject *batch_result(batch_t *b) {
  PyObject *seq = b->outs_seq ? b->outs_seq : b->vals_seq;
  PyObject *r = b->single ? PySequence_Fast_GET_ITEM(seq, 0) : seq;
  Py_INCREF(r);
  return r;
}

/* ---- create and destroy -------------------------------------------------------------------- */

static int kv_options(PyObject *op, PyObject *fusion, PyObject *alg, PyObject *tmo, int verify,
                      mpiar_kv_options_t *o) {
  const char *fname = "mpiar.KVStore";
  pyar_op_t pop;
  if (pyar_get_op(op, MPIAR_AVG, &pop, fname) < 0) {
    return -1;
  }
  if (pop.logical || (pop.op != MPIAR_SUM && pop.op != MPIAR_AVG)) {
    PyErr_Format(PyExc_ValueError, "%s: op must be 'sum' or 'avg', not '%s'", fname,
                 pyar_op_name(pop));
    return -1;
  }
  o->op = pop.op;
  if (fusion != NULL && fusion != Py_None &&
      pyar_get_size(fusion, &o->fusion_bytes, fname, "fusion_bytes") < 0) {
    return -1;
  }
  mpiar_options_t ao;
  if (pyar_get_options(alg, NULL, tmo, &ao, fname) < 0) {
    return -1;
  }
  o->algorithm = ao.algorithm;
  o->timeout_ms = ao.timeout_ms;
  o->verify = verify;
  return 0;
}

static int kv_init(kvobject *self, PyObject *args, PyObject *kwds) {
  static char *kwlist[] = {"comm", "op", "fusion_bytes", "algorithm", "timeout_ms", "verify", NULL};
  PyObject *comm = NULL, *op = NULL, *fusion = NULL, *alg = NULL, *tmo = NULL;
  int verify = 1;
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "|OOOOO$p:KVStore", kwlist, &comm, &op, &fusion,
                                   &alg, &tmo, &verify)) {
    return -1;
  }
  if (self->kv != NULL) {
    PyErr_SetString(PyExc_RuntimeError, "mpiar.KVStore: the store is already created");
    return -1;
  }
  MPI_Comm c;
  if (pyar_get_comm(comm, &c, "mpiar.KVStore") < 0) {
    return -1;
  }
  mpiar_kv_options_t o = MPIAR_KV_OPTIONS_INIT;
  int local_failed = kv_options(op, fusion, alg, tmo, verify, &o) < 0;
  PyObject *et = NULL, *ev = NULL, *tb = NULL;
  if (local_failed) {
    /* An op the C store rejects makes its agreement fail on every worker. */
    PyErr_Fetch(&et, &ev, &tb);
    o = (mpiar_kv_options_t)MPIAR_KV_OPTIONS_INIT;
    o.op = MPIAR_MAX;
  }
  mpiar_kv_t *kv = NULL;
  int rc;
  Py_BEGIN_ALLOW_THREADS;
  rc = mpiar_kv_create(c, &o, &kv);
  Py_END_ALLOW_THREADS;
  if (local_failed) {
    mpiar_kv_destroy(kv);
    PyErr_Restore(et, ev, tb);
    return -1;
  }
  if (rc != MPIAR_SUCCESS) {
    return pyar_raise(rc, "mpiar.KVStore");
  }
  self->kv = kv;
  self->verify = o.verify;
  mpiar_kv_rank(kv, &self->rank);
  mpiar_kv_num_workers(kv, &self->size);
  return 0;
}

static PyObject *kv_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
  (void)args;
  (void)kwds;
  kvobject *self = (kvobject *)type->tp_alloc(type, 0);
  if (self != NULL && (self->templates = PyDict_New()) == NULL) {
    Py_DECREF(self);
    return NULL;
  }
  return (PyObject *)self;
}

/* Free the C store. Its communicator can be freed only while MPI runs; after MPI_Finalize the
 * handle is dropped (the process is ending). */
static int kv_destroy(kvobject *self) {
  if (self->kv == NULL) {
    return MPIAR_SUCCESS;
  }
  int finalized = 0;
  MPI_Finalized(&finalized);
  int rc = MPIAR_SUCCESS;
  if (!finalized) {
    /* Finish the asynchronous pushpulls first, so that their requests release their arrays. */
    self->busy = 1;
    Py_BEGIN_ALLOW_THREADS;
    rc = mpiar_kv_wait_all(self->kv);
    Py_END_ALLOW_THREADS;
    self->busy = 0;
    pyar_reqlist_collect(&self->requests);
    int rc2;
    Py_BEGIN_ALLOW_THREADS;
    rc2 = mpiar_kv_destroy(self->kv);
    Py_END_ALLOW_THREADS;
    rc = rc != MPIAR_SUCCESS ? rc : rc2;
  }
  self->kv = NULL;
  return rc;
}

static void kv_dealloc(kvobject *self) {
  PyObject_GC_UnTrack(self);
  kv_destroy(self);
  Py_CLEAR(self->templates);
  Py_TYPE(self)->tp_free((PyObject *)self);
}

static int kv_traverse(kvobject *self, visitproc visit, void *arg) {
  Py_VISIT(self->templates);
  return 0;
}

static int kv_clear(kvobject *self) {
  Py_CLEAR(self->templates);
  return 0;
}

static PyObject *kv_close(kvobject *self, PyObject *unused) {
  (void)unused;
  if (self->busy) {
    PyErr_SetString(PyExc_RuntimeError, "KVStore.close: the store is in use by another thread");
    return NULL;
  }
  int rc = kv_destroy(self);
  if (rc != MPIAR_SUCCESS) {
    pyar_raise(rc, "KVStore.close");
    return NULL;
  }
  Py_RETURN_NONE;
}

static PyObject *kv_enter(PyObject *self, PyObject *unused) {
  (void)unused;
  Py_INCREF(self);
  return self;
}

static PyObject *kv_exit(kvobject *self, PyObject *args) {
  (void)args;
  return kv_close(self, NULL);
}

/* ---- calls -------------------------------------------------------------------------------- */

/* Run a C call without the GIL, marked busy. */
#define KV_RUN(self, rc, call) \
  do {                         \
    (self)->busy = 1;          \
    Py_BEGIN_ALLOW_THREADS;    \
    (rc) = (call);             \
    Py_END_ALLOW_THREADS;      \
    (self)->busy = 0;          \
  } while (0)

static int init_one(kvobject *self, batch_t *b, Py_ssize_t i) {
  const char *fname = "KVStore.init";
  pyar_array_t *a = &b->ins[i];
  PyObject *v = PySequence_Fast_GET_ITEM(b->vals_seq, i);
  if (pyar_array_get(v, a, fname, "value") < 0 ||
      pyar_array_check_writable(a, fname, "value (it receives worker 0's value)") < 0 ||
      pyar_array_written(a) < 0) {
    join_failed(self, JOIN_ALWAYS);
    return -1;
  }
  if (a->is_bool) {
    PyErr_Format(PyExc_TypeError, "%s: the store holds no bool keys", fname);
    join_failed(self, JOIN_ALWAYS);
    return -1;
  }
  PyObject *tmpl = pyar_array_template(a);
  if (tmpl == NULL) {
    join_failed(self, JOIN_ALWAYS);
    return -1;
  }
  int rc;
  KV_RUN(self, rc, mpiar_kv_init(self->kv, b->keys[i], a->dtype, a->count, a->data));
  if (rc != MPIAR_SUCCESS) {
    Py_DECREF(tmpl);
    return pyar_raise(rc, fname);
  }
  rc = PyDict_SetItem(self->templates, b->dict_keys[i], tmpl);
  Py_DECREF(tmpl);
  return rc;
}

static PyObject *kv_init_keys(kvobject *self, PyObject *args) {
  PyObject *keys, *values;
  if (!PyArg_ParseTuple(args, "OO:init", &keys, &values) || usable(self, "KVStore.init") < 0) {
    return NULL;
  }
  batch_t b = {0};
  PyObject *r = NULL;
  if (batch_keys(&b, keys, values, NULL, "KVStore.init") < 0) {
    join_failed(self, JOIN_ALWAYS);
    goto done;
  }
  for (Py_ssize_t i = 0; i < b.n; i++) {
    if (init_one(self, &b, i) < 0) {
      goto done;
    }
  }
  r = Py_None;
  Py_INCREF(r);
done:
  batch_free(&b);
  return r;
}

static PyObject *pushpull_or_step(kvobject *self, PyObject *keys, PyObject *values, PyObject *outs,
                                  int step) {
  const char *fname = step ? "KVStore.step" : "KVStore.pushpull";
  batch_t b = {0};
  PyObject *r = NULL;
  if (batch_prepare(self, &b, keys, values, outs, fname) < 0) {
    join_failed(self, JOIN_VERIFIED);
    goto done;
  }
  int rc;
  if (step && b.n == 1) {
    KV_RUN(self, rc, mpiar_kv_step(self->kv, b.keys[0], b.out_ptrs[0]));
  } else if (step) {
    KV_RUN(self, rc, mpiar_kv_step_batch(self->kv, (size_t)b.n, b.keys, b.out_ptrs));
  } else if (b.n == 1) {
    KV_RUN(self, rc, mpiar_kv_pushpull(self->kv, b.keys[0], b.in_ptrs[0], b.out_ptrs[0]));
  } else {
    KV_RUN(self, rc,
           mpiar_kv_pushpull_batch(self->kv, (size_t)b.n, b.keys, (const void *const *)b.in_ptrs,
                                   b.out_ptrs));
  }
  if (rc != MPIAR_SUCCESS) {
    pyar_raise(rc, fname);
    goto done;
  }
  r = batch_result(&b);
done:
  batch_free(&b);
  return r;
}

static PyObject *kv_pushpull(kvobject *self, PyObject *args, PyObject *kwds) {
  static char *kwlist[] = {"key", "value", "out", "priority", NULL};
  PyObject *keys, *values, *outs = NULL;
  int priority = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO|Oi:pushpull", kwlist, &keys, &values, &outs,
                                   &priority) ||
      usable(self, "KVStore.pushpull") < 0) {
    return NULL;
  }
  /* priority orders asynchronous pushpulls; a blocking call has nothing to order. */
  return pushpull_or_step(self, keys, values, outs, 0);
}

/* ---- asynchronous pushpull ------------------------------------------------------------------ */

/* The priority of entry i: one int for every key, or a list of one per key. */
static int get_priority(PyObject *prio, Py_ssize_t i, Py_ssize_t n, int single, int *v,
                        const char *fname) {
  *v = 0;
  if (prio == NULL || prio == Py_None) {
    return 0;
  }
  if (PyList_Check(prio) || PyTuple_Check(prio)) {
    if (single || PySequence_Fast_GET_SIZE(prio) != n) {
      PyErr_Format(PyExc_ValueError, "%s: priority is a list of %zd for %zd keys", fname,
                   PySequence_Fast_GET_SIZE(prio), single ? (Py_ssize_t)1 : n);
      return -1;
    }
    prio = PySequence_Fast_GET_ITEM(prio, i);
  }
  return pyar_get_int(prio, v, fname, "priority");
}

static PyObject *kv_pushpull_async(kvobject *self, PyObject *args, PyObject *kwds) {
  static char *kwlist[] = {"key", "value", "out", "priority", NULL};
  const char *fname = "KVStore.pushpull_async";
  PyObject *keys, *values, *outs = NULL, *prio = NULL;
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO|OO:pushpull_async", kwlist, &keys, &values,
                                   &outs, &prio) ||
      usable(self, fname) < 0) {
    return NULL;
  }
  batch_t b = {0};
  PyObject *reqs = NULL, *r = NULL;
  int *prios = NULL;
  /* Every entry is checked before any is queued: a local error queues nothing. */
  if (batch_prepare(self, &b, keys, values, outs, fname) < 0 ||
      (prios = PyMem_Calloc((size_t)b.n + 1, sizeof *prios)) == NULL) {
    if (!PyErr_Occurred()) {
      PyErr_NoMemory();
    }
    goto done;
  }
  for (Py_ssize_t i = 0; i < b.n; i++) {
    if (get_priority(prio, i, b.n, b.single, &prios[i], fname) < 0) {
      goto done;
    }
  }
  if ((reqs = PyList_New(b.n)) == NULL) {
    goto done;
  }
  PyObject *results = b.outs_seq ? b.outs_seq : b.vals_seq;
  for (Py_ssize_t i = 0; i < b.n; i++) {
    PyObject *req = pyar_request_new(PYAR_CALL_KV, fname, 0);
    if (req == NULL) {
      goto done;
    }
    PyList_SET_ITEM(reqs, i, req);
    pyar_call_t *c = pyar_request_call(req);
    /* The request takes over the entry's arrays (references, views, copies). */
    c->in = b.ins[i];
    c->out = b.outs[i];
    pyar_array_init(&b.ins[i]);
    pyar_array_init(&b.outs[i]);
    c->result = PySequence_Fast_GET_ITEM(results, i);
    Py_INCREF(c->result);
    pyar_request_set_owner(req, (PyObject *)self, &self->busy, &self->requests);
  }
  for (Py_ssize_t i = 0; i < b.n; i++) {
    PyObject *req = PyList_GET_ITEM(reqs, i);
    int rc;
    KV_RUN(self, rc,
           mpiar_kv_pushpull_async(self->kv, b.keys[i], b.in_ptrs[i], b.out_ptrs[i], prios[i],
                                   pyar_request_handle(req)));
    if (rc != MPIAR_SUCCESS) {
      /* The requests already queued stay valid: dropping them completes them. */
      pyar_raise(rc, fname);
      goto done;
    }
    pyar_request_started(req);
  }
  if (b.single) {
    r = PyList_GET_ITEM(reqs, 0);
    Py_INCREF(r);
  } else {
    r = reqs;
    reqs = NULL;
  }
done:
  Py_XDECREF(reqs);
  PyMem_Free(prios);
  batch_free(&b);
  return r;
}

static PyObject *kv_wait_all(kvobject *self, PyObject *unused) {
  (void)unused;
  const char *fname = "KVStore.wait_all";
  if (usable(self, fname) < 0) {
    return NULL;
  }
  int rc;
  KV_RUN(self, rc, mpiar_kv_wait_all(self->kv));
  char detail[1024];
  snprintf(detail, sizeof detail, "%s", mpiar_last_error());
  pyar_reqlist_collect(&self->requests);
  if (rc != MPIAR_SUCCESS) {
    pyar_raise_detail(rc, fname, detail);
    return NULL;
  }
  Py_RETURN_NONE;
}

/* update(key, grad): the optimizer on the stored value with an already averaged gradient. */
static PyObject *kv_update(kvobject *self, PyObject *args) {
  const char *fname = "KVStore.update";
  PyObject *keys, *grads;
  if (!PyArg_ParseTuple(args, "OO:update", &keys, &grads) || usable(self, fname) < 0) {
    return NULL;
  }
  batch_t b = {0};
  PyObject *r = NULL;
  if (batch_keys(&b, keys, grads, NULL, fname) < 0) {
    goto done;
  }
  for (Py_ssize_t i = 0; i < b.n; i++) {
    PyObject *g = PySequence_Fast_GET_ITEM(b.vals_seq, i);
    if (key_array(self, &b, i, &b.ins[i], g, fname, "grad") < 0 ||
        pyar_array_data_in(&b.ins[i], 'C', &b.in_ptrs[i], fname, "grad") < 0) {
      goto done;
    }
  }
  for (Py_ssize_t i = 0; i < b.n; i++) {
    int rc;
    KV_RUN(self, rc, mpiar_kv_update(self->kv, b.keys[i], b.in_ptrs[i]));
    if (rc != MPIAR_SUCCESS) {
      pyar_raise(rc, fname);
      goto done;
    }
  }
  r = Py_None;
  Py_INCREF(r);
done:
  batch_free(&b);
  return r;
}

static PyObject *kv_step(kvobject *self, PyObject *args) {
  PyObject *keys, *grads;
  if (!PyArg_ParseTuple(args, "OO:step", &keys, &grads) || usable(self, "KVStore.step") < 0) {
    return NULL;
  }
  return pushpull_or_step(self, keys, grads, NULL, 1);
}

static PyObject *kv_broadcast(kvobject *self, PyObject *args, PyObject *kwds) {
  static char *kwlist[] = {"key", "value", "root", NULL};
  const char *fname = "KVStore.broadcast";
  PyObject *keys, *values;
  int root = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO|i:broadcast", kwlist, &keys, &values, &root) ||
      usable(self, fname) < 0) {
    return NULL;
  }
  batch_t b = {0};
  PyObject *r = NULL;
  if (batch_prepare(self, &b, keys, values, NULL, fname) < 0) {
    join_failed(self, JOIN_ALWAYS);
    goto done;
  }
  for (Py_ssize_t i = 0; i < b.n; i++) {
    int rc;
    KV_RUN(self, rc, mpiar_kv_broadcast(self->kv, b.keys[i], b.out_ptrs[i], root));
    if (rc != MPIAR_SUCCESS) {
      pyar_raise(rc, fname);
      goto done;
    }
  }
  r = batch_result(&b);
done:
  batch_free(&b);
  return r;
}

/* push and pull: the parameter-server calls; the C store says why they do not exist. */
static PyObject *push_pull(kvobject *self, PyObject *key, int push) {
  const char *fname = push ? "KVStore.push" : "KVStore.pull";
  if (usable(self, fname) < 0) {
    return NULL;
  }
  mpiar_kv_key_t k = MPIAR_KV_INT(0);
  PyObject *dk = NULL;
  if (is_single_key(key)) {
    if (get_key(key, &k, &dk, fname) < 0) {
      return NULL;
    }
    Py_DECREF(dk);
  }
  int rc = push ? mpiar_kv_push(self->kv, k, NULL) : mpiar_kv_pull(self->kv, k, NULL);
  if (rc != MPIAR_SUCCESS) {
    pyar_raise(rc, fname);
    return NULL;
  }
  Py_RETURN_NONE;
}

static PyObject *kv_push(kvobject *self, PyObject *args, PyObject *kwds) {
  static char *kwlist[] = {"key", "value", "priority", NULL};
  PyObject *key, *value;
  int priority = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO|i:push", kwlist, &key, &value, &priority)) {
    return NULL;
  }
  return push_pull(self, key, 1);
}

static PyObject *kv_pull(kvobject *self, PyObject *args, PyObject *kwds) {
  static char *kwlist[] = {"key", "out", "priority", "ignore_sparse", NULL};
  PyObject *key, *out = NULL, *ignore = NULL;
  int priority = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|OiO:pull", kwlist, &key, &out, &priority,
                                   &ignore)) {
    return NULL;
  }
  return push_pull(self, key, 0);
}

static PyObject *kv_barrier(kvobject *self, PyObject *unused) {
  (void)unused;
  if (usable(self, "KVStore.barrier") < 0) {
    return NULL;
  }
  int rc;
  KV_RUN(self, rc, mpiar_kv_barrier(self->kv));
  if (rc != MPIAR_SUCCESS) {
    pyar_raise(rc, "KVStore.barrier");
    return NULL;
  }
  Py_RETURN_NONE;
}

static int float_attr(PyObject *obj, const char *name, double dflt, double *v) {
  PyObject *a = PyObject_GetAttrString(obj, name);
  if (a == NULL) {
    if (!PyErr_ExceptionMatches(PyExc_AttributeError)) {
      return -1;
    }
    PyErr_Clear();
    *v = dflt;
    return 0;
  }
  *v = PyFloat_AsDouble(a);
  Py_DECREF(a);
  return (*v == -1.0 && PyErr_Occurred()) ? -1 : 0;
}

static PyObject *kv_set_optimizer(kvobject *self, PyObject *optimizer) {
  const char *fname = "KVStore.set_optimizer";
  if (usable(self, fname) < 0) {
    return NULL;
  }
  mpiar_kv_optimizer_t o = {MPIAR_KV_OPTIMIZER_NONE, 0, 0, 0};
  if (optimizer != Py_None) {
    o.kind = MPIAR_KV_OPTIMIZER_SGD;
    if (!PyObject_HasAttrString(optimizer, "learning_rate")) {
      PyErr_Format(PyExc_TypeError,
                   "%s: the optimizer must be mpiar.SGD (learning_rate, momentum, weight_decay) "
                   "or None, not %.200s",
                   fname, Py_TYPE(optimizer)->tp_name);
    }
    if (PyErr_Occurred() || float_attr(optimizer, "learning_rate", 0, &o.learning_rate) < 0 ||
        float_attr(optimizer, "momentum", 0, &o.momentum) < 0 ||
        float_attr(optimizer, "weight_decay", 0, &o.weight_decay) < 0) {
      join_failed(self, JOIN_ALWAYS);
      return NULL;
    }
  }
  int rc;
  KV_RUN(self, rc, mpiar_kv_set_optimizer(self->kv, &o));
  if (rc != MPIAR_SUCCESS) {
    pyar_raise(rc, fname);
    return NULL;
  }
  Py_RETURN_NONE;
}

static PyObject *save_load(kvobject *self, PyObject *path, int save) {
  const char *fname = save ? "KVStore.save" : "KVStore.load";
  if (usable(self, fname) < 0) {
    return NULL;
  }
  PyObject *bytes = NULL;
  if (!PyUnicode_FSConverter(path, &bytes)) {
    join_failed(self, save ? JOIN_SAVE : JOIN_LOAD);
    return NULL;
  }
  const char *p = PyBytes_AS_STRING(bytes);
  int rc;
  KV_RUN(self, rc, save ? mpiar_kv_save(self->kv, p) : mpiar_kv_load(self->kv, p));
  Py_DECREF(bytes);
  if (rc != MPIAR_SUCCESS) {
    pyar_raise(rc, fname);
    return NULL;
  }
  Py_RETURN_NONE;
}

static PyObject *kv_save(kvobject *self, PyObject *path) {
  return save_load(self, path, 1);
}
static PyObject *kv_load(kvobject *self, PyObject *path) {
  return save_load(self, path, 0);
}

/* value(key, out=None): a local copy of the store's value (no communication). */
static PyObject *kv_value(kvobject *self, PyObject *args, PyObject *kwds) {
  static char *kwlist[] = {"key", "out", NULL};
  const char *fname = "KVStore.value";
  PyObject *key, *out = NULL;
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|O:value", kwlist, &key, &out) ||
      usable(self, fname) < 0) {
    return NULL;
  }
  if (!is_single_key(key)) {
    PyErr_Format(PyExc_TypeError, "%s: a key is an int or a str, not %.200s", fname,
                 Py_TYPE(key)->tp_name);
    return NULL;
  }
  batch_t b = {0};
  PyObject *r = NULL;
  if (batch_keys(&b, key, Py_None, NULL, fname) < 0) {
    goto done;
  }
  if (out != NULL && out != Py_None) {
    Py_INCREF(out);
    r = out;
  } else {
    PyObject *tmpl = PyDict_GetItemWithError(self->templates, b.dict_keys[0]);
    if (tmpl != NULL) {
      r = pyar_new_from_template(tmpl, fname);
    } else if (!PyErr_Occurred()) {
      int rc = mpiar_kv_lookup(self->kv, b.keys[0], NULL, NULL, NULL);
      pyar_raise(rc != MPIAR_SUCCESS ? rc : MPIAR_ERR_KEY_UNKNOWN, fname);
    }
    if (r == NULL) {
      goto done;
    }
  }
  const void *data = NULL;
  if (key_array(self, &b, 0, &b.outs[0], r, fname, "out") < 0 ||
      pyar_array_check_writable(&b.outs[0], fname, "out") < 0 ||
      pyar_array_written(&b.outs[0]) < 0) {
    Py_CLEAR(r);
    goto done;
  }
  mpiar_kv_lookup(self->kv, b.keys[0], NULL, NULL, &data);
  if (b.outs[0].count > 0) {
    memcpy(b.outs[0].data, data, pyar_array_bytes(&b.outs[0]));
  }
done:
  batch_free(&b);
  return r;
}

/* ---- the type ----------------------------------------------------------------------------- */

static PyObject *get_rank(kvobject *self, void *c) {
  (void)c;
  if (usable(self, "KVStore.rank") < 0) {
    return NULL;
  }
  return PyLong_FromLong(self->rank);
}

static PyObject *get_num_workers(kvobject *self, void *c) {
  (void)c;
  if (usable(self, "KVStore.num_workers") < 0) {
    return NULL;
  }
  return PyLong_FromLong(self->size);
}

static PyObject *get_fusion_bytes(kvobject *self, void *c) {
  (void)c;
  size_t bytes = 0;
  if (usable(self, "KVStore.fusion_bytes") < 0) {
    return NULL;
  }
  mpiar_kv_fusion_bytes(self->kv, &bytes);
  return PyLong_FromSize_t(bytes);
}

static PyObject *get_closed(kvobject *self, void *c) {
  (void)c;
  return PyBool_FromLong(self->kv == NULL);
}

static PyGetSetDef kv_getset[] = {
    {"rank", (getter)get_rank, NULL, "This worker's rank in the store.", NULL},
    {"num_workers", (getter)get_num_workers, NULL, "The number of workers.", NULL},
    {"fusion_bytes", (getter)get_fusion_bytes, NULL, "The fusion threshold in bytes.", NULL},
    {"closed", (getter)get_closed, NULL, "Whether close() was called.", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

#define KW (METH_VARARGS | METH_KEYWORDS)
static PyMethodDef kv_methods[] = {
    {"init", (PyCFunction)kv_init_keys, METH_VARARGS,
     "init(key, value): register key(s) with the dtype and element count of value(s); every "
     "value becomes worker 0's value (collective)."},
    {"pushpull", (PyCFunction)(void (*)(void))kv_pushpull, KW,
     "pushpull(key, value, out=None, priority=0): sum or average value(s) over the workers into "
     "out (in place when out is None); a list of keys is fused. Returns out (or value)."},
    {"pushpull_async", (PyCFunction)(void (*)(void))kv_pushpull_async, KW,
     "pushpull_async(key, value, out=None, priority=0): start pushpull of value(s) in the "
     "background and return an mpiar.Request (a list of them for a list of keys) whose wait() "
     "returns out (or value). Queued tensors start, highest priority first, when the queue holds "
     "fusion_bytes, at wait_all(), and at the first test or wait of a queued request: these are "
     "collective points, in the same order on every worker."},
    {"wait_all", (PyCFunction)kv_wait_all, METH_NOARGS,
     "wait_all(): start every queued asynchronous pushpull and wait for all of them "
     "(collective); their requests are then done."},
    {"update", (PyCFunction)kv_update, METH_VARARGS,
     "update(key, grad): apply the optimizer to the stored value(s) with gradient(s) already "
     "averaged over the workers (local; step() is pushpull followed by update())."},
    {"broadcast", (PyCFunction)(void (*)(void))kv_broadcast, KW,
     "broadcast(key, value, root=0): value(s) and the stored value(s) become root's."},
    {"push", (PyCFunction)(void (*)(void))kv_push, KW,
     "Not supported by the allreduce kvstore: raises UnsupportedError (NotImplementedError)."},
    {"pull", (PyCFunction)(void (*)(void))kv_pull, KW,
     "Not supported by the allreduce kvstore: raises UnsupportedError (NotImplementedError)."},
    {"barrier", (PyCFunction)kv_barrier, METH_NOARGS, "Wait for every worker."},
    {"set_optimizer", (PyCFunction)kv_set_optimizer, METH_O,
     "set_optimizer(mpiar.SGD(...) or None): the optimizer step() applies (collective)."},
    {"step", (PyCFunction)kv_step, METH_VARARGS,
     "step(key, grad): average grad(s) in place, then apply the optimizer to the stored "
     "value(s)."},
    {"value", (PyCFunction)(void (*)(void))kv_value, KW,
     "value(key, out=None): a local copy of the stored value (no communication)."},
    {"save", (PyCFunction)kv_save, METH_O, "save(path): checkpoint every key (worker 0 writes)."},
    {"load", (PyCFunction)kv_load, METH_O, "load(path): restore a checkpoint written by save()."},
    {"close", (PyCFunction)kv_close, METH_NOARGS, "Free the store (collective)."},
    {"__enter__", (PyCFunction)kv_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)kv_exit, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL}};

static PyTypeObject kv_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "mpiar.KVStore",
    .tp_basicsize = sizeof(kvobject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "KVStore(comm=None, op='avg', fusion_bytes=None, algorithm=None, timeout_ms=None, "
              "*, verify=True): the allreduce key-value store over an mpi4py communicator.",
    .tp_new = kv_new,
    .tp_init = (initproc)kv_init,
    .tp_dealloc = (destructor)kv_dealloc,
    .tp_traverse = (traverseproc)kv_traverse,
    .tp_clear = (inquiry)kv_clear,
    .tp_methods = kv_methods,
    .tp_getset = kv_getset,
};

int pyar_kvstore_init(PyObject *module) {
  if (PyType_Ready(&kv_type) < 0) {
    return -1;
  }
  return pyar_module_add(module, "KVStore", (PyObject *)&kv_type);
}
