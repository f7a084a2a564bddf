/*
 * mpiar.allreduce, mpiar.bcast, mpiar.reduce_scatter_block, mpiar.allgather and mpiar.select. Each call parses its arguments, prepares a
 * pyar_call_t (call.c), runs the cross-rank check unless check=False, and runs the C call without
 * the GIL. The nonblocking forms (iallreduce, ibcast) and the persistent ones (allreduce_init,
 * bcast_init) prepare the call inside a request object (request.c), which owns its arrays until
 * the operation completes, and start the C operation on it.
 */
#include "pyar.h"

#include <time.h>

static int get_check(PyObject *obj, int *check) {
  if (obj == NULL) {
    *check = 1;
    return 0;
  }
  int t = PyObject_IsTrue(obj);
  if (t < 0) {
    return -1;
  }
  *check = t;
  return 0;
}

static PyObject *finish(pyar_call_t *c, int check, int local_failed) {
  PyObject *result = NULL;
  if (check) {
    if (pyar_call_agree(c, local_failed) < 0) {
      goto done;
    }
  } else if (local_failed) {
    goto done;
  }
  if (pyar_call_run(c) == 0) {
    result = c->result;
    c->result = NULL;
  }
done:
  pyar_call_release(c);
  return result;
}

static pyar_sig_t allreduce_sig = {
    "mpiar.allreduce",
    1,
    8,
    {"x", "op", "out", "comm", "algorithm", "segment_bytes", "timeout_ms", "check", NULL},
    {NULL}};

PyObject *pyar_allreduce(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                         PyObject *kwnames) {
  (void)self;
  PyObject *a[8];
  int check = 1;
  if (pyar_parse(&allreduce_sig, args, nargs, kwnames, a) < 0 || get_check(a[7], &check) < 0) {
    return NULL;
  }
  pyar_call_t c;
  pyar_call_init(&c, "mpiar.allreduce", PYAR_CALL_ALLREDUCE);
  if (pyar_call_comm(&c, a[3]) < 0) {
    pyar_call_release(&c);
    return NULL;
  }
  int local_failed = pyar_call_options(&c, a[4], a[5], a[6]) < 0 ||
                     pyar_call_prepare_allreduce(&c, a[0], a[1], a[2]) < 0;
  return finish(&c, check, local_failed);
}

static pyar_sig_t bcast_sig = {
    "mpiar.bcast",
    1,
    7,
    {"x", "root", "comm", "algorithm", "segment_bytes", "timeout_ms", "check", NULL},
    {NULL}};

PyObject *pyar_bcast(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
  (void)self;
  PyObject *a[7];
  int check = 1;
  if (pyar_parse(&bcast_sig, args, nargs, kwnames, a) < 0 || get_check(a[6], &check) < 0) {
    return NULL;
  }
  pyar_call_t c;
  pyar_call_init(&c, "mpiar.bcast", PYAR_CALL_BCAST);
  if (pyar_call_comm(&c, a[2]) < 0) {
    pyar_call_release(&c);
    return NULL;
  }
  int local_failed =
      pyar_call_options(&c, a[3], a[4], a[5]) < 0 || pyar_call_prepare_bcast(&c, a[0], a[1]) < 0;
  return finish(&c, check, local_failed);
}

/* ---- nonblocking and persistent ------------------------------------------------------------ */

enum { START_NONBLOCKING, START_PERSISTENT };

/* Check, then start (or make) the operation prepared in @p req. Steals @p req. */
static PyObject *start(PyObject *req, int how, int check, int local_failed) {
  pyar_call_t *c = pyar_request_call(req);
  if (check) {
    if (pyar_call_agree(c, local_failed) < 0) {
      goto fail;
    }
  } else if (local_failed) {
    goto fail;
  }
  /* A persistent request writes at each start() (request.c), not when it is made. */
  if (how == START_NONBLOCKING && pyar_call_written(c) < 0) {
    goto fail;
  }
  mpiar_request_t *h = pyar_request_handle(req);
  int rc;
  Py_BEGIN_ALLOW_THREADS;
  if (c->kind == PYAR_CALL_ALLREDUCE && how == START_NONBLOCKING) {
    rc = mpiar_iallreduce(c->send, c->recv, c->count, c->dtype, c->op.op, c->comm, &c->opts, h);
  } else if (c->kind == PYAR_CALL_ALLREDUCE) {
    rc = mpiar_allreduce_init(c->send, c->recv, c->count, c->dtype, c->op.op, c->comm, &c->opts, h);
  } else if (c->kind == PYAR_CALL_REDUCE_SCATTER && how == START_NONBLOCKING) {
    rc = mpiar_ireduce_scatter_block(c->send, c->recv, c->count, c->dtype, c->op.op, c->comm,
                                     &c->opts, h);
  } else if (c->kind == PYAR_CALL_REDUCE_SCATTER) {
    rc = mpiar_reduce_scatter_block_init(c->send, c->recv, c->count, c->dtype, c->op.op, c->comm,
                                         &c->opts, h);
  } else if (c->kind == PYAR_CALL_ALLGATHER && how == START_NONBLOCKING) {
    rc = mpiar_iallgather(c->send, c->recv, c->count, c->dtype, c->comm, &c->opts, h);
  } else if (c->kind == PYAR_CALL_ALLGATHER) {
    rc = mpiar_allgather_init(c->send, c->recv, c->count, c->dtype, c->comm, &c->opts, h);
  } else if (how == START_NONBLOCKING) {
    rc = mpiar_ibcast(c->recv, c->count, c->dtype, c->root, c->comm, &c->opts, h);
  } else {
    rc = mpiar_bcast_init(c->recv, c->count, c->dtype, c->root, c->comm, &c->opts, h);
  }
  Py_END_ALLOW_THREADS;
  if (rc != MPIAR_SUCCESS) {
    pyar_raise(rc, c->fname);
    goto fail;
  }
  if (how == START_NONBLOCKING) {
    pyar_request_started(req);
  }
  return req;
fail:
  Py_DECREF(req);
  return NULL;
}

static PyObject *allreduce_request(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                                   pyar_sig_t *sig, int how) {
  PyObject *a[8];
  int check = 1;
  if (pyar_parse(sig, args, nargs, kwnames, a) < 0 || get_check(a[7], &check) < 0) {
    return NULL;
  }
  PyObject *req = pyar_request_new(PYAR_CALL_ALLREDUCE, sig->fname, how == START_PERSISTENT);
  if (req == NULL) {
    return NULL;
  }
  pyar_call_t *c = pyar_request_call(req);
  if (pyar_call_comm(c, a[3]) < 0) {
    Py_DECREF(req);
    return NULL;
  }
  int local_failed = pyar_call_options(c, a[4], a[5], a[6]) < 0 ||
                     pyar_call_prepare_allreduce(c, a[0], a[1], a[2]) < 0;
  return start(req, how, check, local_failed);
}

static PyObject *bcast_request(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                               pyar_sig_t *sig, int how) {
  PyObject *a[7];
  int check = 1;
  if (pyar_parse(sig, args, nargs, kwnames, a) < 0 || get_check(a[6], &check) < 0) {
    return NULL;
  }
  PyObject *req = pyar_request_new(PYAR_CALL_BCAST, sig->fname, how == START_PERSISTENT);
  if (req == NULL) {
    return NULL;
  }
  pyar_call_t *c = pyar_request_call(req);
  if (pyar_call_comm(c, a[2]) < 0) {
    Py_DECREF(req);
    return NULL;
  }
  int local_failed =
      pyar_call_options(c, a[3], a[4], a[5]) < 0 || pyar_call_prepare_bcast(c, a[0], a[1]) < 0;
  return start(req, how, check, local_failed);
}

static pyar_sig_t iallreduce_sig = {
    "mpiar.iallreduce",
    1,
    8,
    {"x", "op", "out", "comm", "algorithm", "segment_bytes", "timeout_ms", "check", NULL},
    {NULL}};

PyObject *pyar_iallreduce(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                          PyObject *kwnames) {
  (void)self;
  return allreduce_request(args, nargs, kwnames, &iallreduce_sig, START_NONBLOCKING);
}

static pyar_sig_t allreduce_init_sig = {
    "mpiar.allreduce_init",
    1,
    8,
    {"x", "op", "out", "comm", "algorithm", "segment_bytes", "timeout_ms", "check", NULL},
    {NULL}};

PyObject *pyar_allreduce_init(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                              PyObject *kwnames) {
  (void)self;
  return allreduce_request(args, nargs, kwnames, &allreduce_init_sig, START_PERSISTENT);
}

static pyar_sig_t ibcast_sig = {
    "mpiar.ibcast",
    1,
    7,
    {"x", "root", "comm", "algorithm", "segment_bytes", "timeout_ms", "check", NULL},
    {NULL}};

PyObject *pyar_ibcast(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
  (void)self;
  return bcast_request(args, nargs, kwnames, &ibcast_sig, START_NONBLOCKING);
}

static pyar_sig_t bcast_init_sig = {
    "mpiar.bcast_init",
    1,
    7,
    {"x", "root", "comm", "algorithm", "segment_bytes", "timeout_ms", "check", NULL},
    {NULL}};

PyObject *pyar_bcast_init(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                          PyObject *kwnames) {
  (void)self;
  return bcast_request(args, nargs, kwnames, &bcast_init_sig, START_PERSISTENT);
}

static pyar_sig_t select_sig = {"mpiar.select", 2, 2, {"nbytes", "nranks", NULL}, {NULL}};

PyObject *pyar_select(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
  (void)self;
  PyObject *a[2];
  size_t nbytes = 0;
  int nranks = 0;
  if (pyar_parse(&select_sig, args, nargs, kwnames, a) < 0 ||
      pyar_get_size(a[0], &nbytes, "mpiar.select", "nbytes") < 0 ||
      pyar_get_int(a[1], &nranks, "mpiar.select", "nranks") < 0) {
    return NULL;
  }
  const char *alg = NULL;
  size_t seg = 0;
  int rc = mpiar_select(nbytes, nranks, &alg, &seg);
  if (rc != MPIAR_SUCCESS) {
    pyar_raise(rc, "mpiar.select");
    return NULL;
  }
  return Py_BuildValue("(sn)", alg, (Py_ssize_t)seg);
}

/*
 * Benchmark helper (mpiar._mpiar._c_loop): the C call alone, `iters` times on the prepared
 * buffers, timed in C; the reference the Python call's overhead is measured against.
 */
static pyar_sig_t c_loop_sig = {
    "mpiar._c_loop", 2, 4, {"x", "iters", "out", "op", "comm", NULL}, {NULL}};

PyObject *pyar_c_loop(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
  (void)self;
  PyObject *a[5];
  int iters = 0;
  if (pyar_parse(&c_loop_sig, args, nargs, kwnames, a) < 0 ||
      pyar_get_int(a[1], &iters, "mpiar._c_loop", "iters") < 0) {
    return NULL;
  }
  pyar_call_t c;
  pyar_call_init(&c, "mpiar._c_loop", PYAR_CALL_ALLREDUCE);
  if (pyar_call_comm(&c, a[4]) < 0 || pyar_call_prepare_allreduce(&c, a[0], a[3], a[2]) < 0) {
    pyar_call_release(&c);
    return NULL;
  }
  int rc = MPIAR_SUCCESS;
  struct timespec t0, t1;
  Py_BEGIN_ALLOW_THREADS;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (int i = 0; i < iters && rc == MPIAR_SUCCESS; i++) {
    rc = mpiar_allreduce(c.send, c.recv, c.count, c.dtype, c.op.op, c.comm);
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  Py_END_ALLOW_THREADS;
  pyar_call_release(&c);
  if (rc != MPIAR_SUCCESS) {
    pyar_raise(rc, "mpiar._c_loop");
    return NULL;
  }
  return PyFloat_FromDouble((double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (t1.tv_nsec - t0.tv_nsec));
}

/* ---- reduce-scatter and allgather --------------------------------------------------------- */

/*
 * reduce_scatter_block(x, op, out, comm, algorithm, segment_bytes, timeout_ms, check) and
 * allgather(x, out, comm, ...): blocking (how -1), nonblocking or persistent.
 */
static PyObject *rsag(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, pyar_sig_t *sig,
                      int kind, int how) {
  const int rs = kind == PYAR_CALL_REDUCE_SCATTER;
  PyObject *a[8] = {NULL};
  PyObject **v = rs ? a : a + 1; /* allgather has no op: its arguments start one later */
  int check = 1;
  if (pyar_parse(sig, args, nargs, kwnames, v) < 0 || get_check(a[7], &check) < 0) {
    return NULL;
  }
  if (!rs) {
    a[0] = a[1];
    a[1] = NULL;
  }
  if (how < 0) {
    pyar_call_t c;
    pyar_call_init(&c, sig->fname, kind);
    if (pyar_call_comm(&c, a[3]) < 0) {
      pyar_call_release(&c);
      return NULL;
    }
    int local_failed = pyar_call_options(&c, a[4], a[5], a[6]) < 0 ||
                       pyar_call_prepare_rsag(&c, a[0], a[1], a[2]) < 0;
    return finish(&c, check, local_failed);
  }
  PyObject *req = pyar_request_new(kind, sig->fname, how == START_PERSISTENT);
  if (req == NULL) {
    return NULL;
  }
  pyar_call_t *c = pyar_request_call(req);
  if (pyar_call_comm(c, a[3]) < 0) {
    Py_DECREF(req);
    return NULL;
  }
  int local_failed = pyar_call_options(c, a[4], a[5], a[6]) < 0 ||
                     pyar_call_prepare_rsag(c, a[0], a[1], a[2]) < 0;
  return start(req, how, check, local_failed);
}

#define RS_SIG(name)                                                                        \
  static pyar_sig_t name##_sig = {                                                          \
      "mpiar." #name,                                                                        \
      1,                                                                                     \
      8,                                                                                     \
      {"x", "op", "out", "comm", "algorithm", "segment_bytes", "timeout_ms", "check", NULL}, \
      {NULL}};
#define AG_SIG(name)                                                                  \
  static pyar_sig_t name##_sig = {                                                    \
      "mpiar." #name,                                                                  \
      1,                                                                               \
      7,                                                                               \
      {"x", "out", "comm", "algorithm", "segment_bytes", "timeout_ms", "check", NULL}, \
      {NULL}};
RS_SIG(reduce_scatter_block)
RS_SIG(ireduce_scatter_block)
RS_SIG(reduce_scatter_block_init)
AG_SIG(allgather)
AG_SIG(iallgather)
AG_SIG(allgather_init)

#define RSAG_FN(name, kind, how)                                                          \
  PyObject *pyar_##name(PyObject *self, PyObject *const *args, Py_ssize_t nargs,         \
                        PyObject *kwnames) {                                              \
    (void)self;                                                                           \
    return rsag(args, nargs, kwnames, &name##_sig, kind, how);                            \
  }
RSAG_FN(reduce_scatter_block, PYAR_CALL_REDUCE_SCATTER, -1)
RSAG_FN(ireduce_scatter_block, PYAR_CALL_REDUCE_SCATTER, START_NONBLOCKING)
RSAG_FN(reduce_scatter_block_init, PYAR_CALL_REDUCE_SCATTER, START_PERSISTENT)
RSAG_FN(allgather, PYAR_CALL_ALLGATHER, -1)
RSAG_FN(iallgather, PYAR_CALL_ALLGATHER, START_NONBLOCKING)
RSAG_FN(allgather_init, PYAR_CALL_ALLGATHER, START_PERSISTENT)
