/*
 * mpiar.allreduce, mpiar.bcast and mpiar.select. Each call parses its arguments, prepares a
 * pyar_call_t (call.c), runs the cross-rank check unless check=False, and runs the C call without
 * the GIL. A nonblocking variant would stop after starting the C call and hand the prepared call
 * to a request object.
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
