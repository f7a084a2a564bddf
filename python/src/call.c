/*
 * One collective call, prepared before it runs: the arrays are validated and laid out, the result
 * object exists, and everything the C call touches is owned by the pyar_call_t. Then, unless the
 * caller turned it off, every rank joins one small allreduce that checks that all ranks passed
 * their own checks and called with the same collective, dtype, operation, element count, shape,
 * root and options; a rank whose arguments were wrong raises its own exception, the others a
 * MismatchError naming it, and no data moves. Only then does the C call run, without the GIL.
 *
 * The check costs one latency-bound allreduce of 128 bytes per call; check=False skips it, and
 * then identical calls on every rank are the caller's promise (as the C library's own).
 */
#include "pyar.h"

#include <stdlib.h>
#include <string.h>

/* Field by field: the arrays' shape buffers are large and need no zeroing. */
void pyar_call_init(pyar_call_t *c, const char *fname, int kind) {
  c->fname = fname;
  c->kind = kind;
  c->comm = MPI_COMM_NULL;
  c->comm_obj = NULL;
  c->rank = 0;
  c->size = 0;
  pyar_array_init(&c->in);
  pyar_array_init(&c->out);
  c->in_place = 0;
  c->send = NULL;
  c->recv = NULL;
  c->count = 0;
  c->dtype = MPIAR_UINT8;
  c->op.op = MPIAR_SUM;
  c->op.logical = 0;
  c->root = 0;
  c->order = 'C';
  c->opts = (mpiar_options_t)MPIAR_OPTIONS_INIT;
  c->algorithm = NULL;
  c->result = NULL;
  c->result_new = 0;
}

void pyar_call_release(pyar_call_t *c) {
  pyar_array_release(&c->in);
  pyar_array_release(&c->out);
  Py_CLEAR(c->algorithm);
  Py_CLEAR(c->result);
  Py_CLEAR(c->comm_obj);
}

int pyar_call_comm(pyar_call_t *c, PyObject *comm) {
  if (pyar_get_comm(comm, &c->comm, c->fname) < 0) {
    return -1;
  }
  MPI_Comm_rank(c->comm, &c->rank);
  MPI_Comm_size(c->comm, &c->size);
  Py_XINCREF(comm);
  Py_XSETREF(c->comm_obj, comm);
  return 0;
}

int pyar_call_options(pyar_call_t *c, PyObject *algorithm, PyObject *segment_bytes,
                      PyObject *timeout_ms) {
  if (pyar_get_options(algorithm, segment_bytes, timeout_ms, &c->opts, c->fname) < 0) {
    return -1;
  }
  if (c->opts.algorithm != NULL) {
    Py_INCREF(algorithm);
    c->algorithm = algorithm;
  }
  return 0;
}

/* ---- allreduce ---------------------------------------------------------------------------- */

static int check_op(pyar_call_t *c) {
  const pyar_array_t *x = &c->in;
  pyar_op_t op = c->op;
  if (x->is_bool) {
    int ok = op.op == MPIAR_BAND || op.op == MPIAR_BOR || op.op == MPIAR_BXOR ||
             op.op == MPIAR_MIN || op.op == MPIAR_MAX;
    if (!ok) {
      return pyar_raise_code(MPIAR_ERR_BAD_DTYPE_OP,
                             "%s: op '%s' is not defined on bool (land, lor, lxor, band, bor, "
                             "bxor, min, max are)",
                             c->fname, pyar_op_name(op));
    }
    return 0;
  }
  if (op.logical) {
    return pyar_raise_code(MPIAR_ERR_BAD_DTYPE_OP,
                           "%s: op '%s' is defined on bool only, not on %s (use band/bor/bxor "
                           "for bitwise operations)",
                           c->fname, pyar_op_name(op), pyar_array_dtype_name(x));
  }
  if (!mpiar_op_supported(x->dtype, op.op)) {
    return pyar_raise_code(MPIAR_ERR_BAD_DTYPE_OP, "%s: op '%s' is not defined on %s", c->fname,
                           pyar_op_name(op), pyar_array_dtype_name(x));
  }
  return 0;
}

/* A given output: writable, contiguous, same dtype and shape, no partial overlap with x. */
static int take_out(pyar_call_t *c, PyObject *out) {
  pyar_array_t *x = &c->in, *o = &c->out;
  if (pyar_array_get(out, o, c->fname, "out") < 0 ||
      pyar_array_check_writable(o, c->fname, "out") < 0) {
    return -1;
  }
  if (o->dtype != x->dtype || o->is_bool != x->is_bool) {
    PyErr_Format(PyExc_TypeError, "%s: out has dtype %s, x has %s", c->fname,
                 pyar_array_dtype_name(o), pyar_array_dtype_name(x));
    return -1;
  }
  if (!pyar_array_same_shape(o, x)) {
    PyErr_Format(PyExc_ValueError,
                 "%s: out and x differ in shape (%d and %d dimensions, %zu and "
                 "%zu elements)",
                 c->fname, o->ndim, x->ndim, o->count, x->count);
    return -1;
  }
  size_t bytes = pyar_array_bytes(x);
  if (x->data != NULL && bytes > 0) {
    if (x->data == o->data) {
      c->in_place = 1;
    } else if (x->data < o->data + bytes && o->data < x->data + bytes) {
      return pyar_raise_code(MPIAR_ERR_OVERLAP, "%s: x and out overlap partially", c->fname);
    }
  }
  return 0;
}

int pyar_call_prepare_allreduce(pyar_call_t *c, PyObject *x, PyObject *op, PyObject *out) {
  if (pyar_get_op(op, MPIAR_SUM, &c->op, c->fname) < 0 ||
      pyar_array_get(x, &c->in, c->fname, "x") < 0 || check_op(c) < 0) {
    return -1;
  }
  if (c->opts.algorithm != NULL && !pyar_known_algorithm(c->opts.algorithm)) {
    return pyar_raise_code(MPIAR_ERR_UNKNOWN_ALGORITHM, "%s: unknown algorithm '%s' (%s)",
                           c->fname, c->opts.algorithm, mpiar_last_error());
  }
  if (out == x) {
    if (pyar_array_check_writable(&c->in, c->fname, "x (in place, out is x)") < 0) {
      return -1;
    }
    c->in_place = 1;
    c->order = c->in.c_contig ? 'C' : 'F';
    c->recv = c->in.data;
    Py_INCREF(x);
    c->result = x;
  } else {
    if (out == NULL || out == Py_None) {
      if ((c->result = pyar_array_new_like(&c->in, c->fname)) == NULL) {
        return -1;
      }
      c->result_new = 1;
      out = c->result;
    } else {
      Py_INCREF(out);
      c->result = out;
    }
    if (take_out(c, out) < 0) {
      return -1;
    }
    c->order = c->out.c_contig ? 'C' : 'F';
    c->recv = c->out.data;
  }
  c->send = MPIAR_IN_PLACE;
  if (!c->in_place && pyar_array_data_in(&c->in, c->order, &c->send, c->fname, "x") < 0) {
    return -1;
  }
  c->count = c->in.count;
  c->dtype = c->in.dtype;
  return 0;
}

/* ---- reduce-scatter and allgather ----------------------------------------------------------- */

int pyar_call_prepare_rsag(pyar_call_t *c, PyObject *x, PyObject *op, PyObject *out) {
  const int rs = c->kind == PYAR_CALL_REDUCE_SCATTER;
  if (pyar_get_op(op, MPIAR_SUM, &c->op, c->fname) < 0 ||
      pyar_array_get(x, &c->in, c->fname, "x") < 0 || (rs && check_op(c) < 0)) {
    return -1;
  }
  const size_t p = (size_t)c->size, n = c->in.count;
  if (rs && n % p != 0) {
    PyErr_Format(PyExc_ValueError, "%s: x has %zu elements, not a multiple of the %zu ranks",
                 c->fname, n, p);
    return -1;
  }
  if (!rs && n > SIZE_MAX / 16 / p) {
    PyErr_Format(PyExc_ValueError, "%s: %zu elements per rank are too many", c->fname, n);
    return -1;
  }
  const size_t want = rs ? n / p : n * p;
  if (out == NULL || out == Py_None) {
    pyar_array_t shape = c->in; /* a template: one dimension of `want` elements */
    shape.ndim = 1;
    shape.shape[0] = (Py_ssize_t)want;
    if ((c->result = pyar_array_new_like(&shape, c->fname)) == NULL) {
      return -1;
    }
    c->result_new = 1;
    out = c->result;
  } else {
    Py_INCREF(out);
    c->result = out;
  }
  pyar_array_t *o = &c->out;
  if (pyar_array_get(out, o, c->fname, "out") < 0 ||
      pyar_array_check_writable(o, c->fname, "out") < 0) {
    return -1;
  }
  if (o->dtype != c->in.dtype || o->is_bool != c->in.is_bool) {
    PyErr_Format(PyExc_TypeError, "%s: out has dtype %s, x has %s", c->fname,
                 pyar_array_dtype_name(o), pyar_array_dtype_name(&c->in));
    return -1;
  }
  if (o->count != want || (want > 0 && (o->data == NULL || !o->c_contig))) {
    PyErr_Format(PyExc_ValueError,
                 "%s: out must be a C-contiguous array of %zu elements (x's %zu %s %zu ranks); "
                 "it has %zu",
                 c->fname, want, n, rs ? "over" : "times", p, o->count);
    return -1;
  }
  const size_t es = mpiar_dtype_size(c->in.dtype);
  if (c->in.data != NULL && n > 0 && want > 0 && c->in.data < o->data + want * es &&
      o->data < c->in.data + n * es) {
    return pyar_raise_code(MPIAR_ERR_OVERLAP, "%s: x and out overlap", c->fname);
  }
  c->order = 'C';
  c->recv = o->data;
  if (pyar_array_data_in(&c->in, 'C', &c->send, c->fname, "x") < 0) {
    return -1;
  }
  c->count = rs ? n / p : n;
  c->dtype = c->in.dtype;
  return 0;
}

/* ---- bcast -------------------------------------------------------------------------------- */

int pyar_call_prepare_bcast(pyar_call_t *c, PyObject *x, PyObject *root) {
  c->root = 0;
  if (root != NULL && root != Py_None && pyar_get_int(root, &c->root, c->fname, "root") < 0) {
    return -1;
  }
  if (c->root < 0 || c->root >= c->size) {
    PyErr_Format(PyExc_ValueError, "%s: root %d is not a rank of comm (0..%d)", c->fname, c->root,
                 c->size - 1);
    return -1;
  }
  if (pyar_array_get(x, &c->in, c->fname, "x") < 0 ||
      pyar_array_check_writable(&c->in, c->fname, "x") < 0) {
    return -1;
  }
  Py_INCREF(x);
  c->result = x;
  c->order = c->in.c_contig ? 'C' : 'F';
  c->recv = c->in.data;
  c->count = c->in.count;
  c->dtype = c->in.dtype;
  return 0;
}

/* ---- the cross-rank check ----------------------------------------------------------------- */

enum { AG_FAILED, AG_KIND, AG_DTYPE, AG_OP, AG_ROOT, AG_COUNT, AG_SHAPE, AG_OPTIONS, AG_N };

static uint64_t fnv(uint64_t h, uint64_t v) {
  for (int i = 0; i < 8; i++) {
    h ^= (v >> (8 * i)) & 0xFF;
    h *= 1099511628211ULL;
  }
  return h;
}

static void agree_fields(const pyar_call_t *c, long long v[AG_N]) {
  uint64_t shape = fnv(14695981039346656037ULL, (uint64_t)c->in.ndim);
  for (int i = 0; i < c->in.ndim; i++) {
    shape = fnv(shape, (uint64_t)c->in.shape[i]);
  }
  shape = fnv(shape, (uint64_t)(unsigned char)c->order);
  uint64_t opts = fnv(14695981039346656037ULL, c->opts.segment_bytes);
  for (const char *p = c->opts.algorithm ? c->opts.algorithm : "auto"; *p; p++) {
    opts = fnv(opts, (uint64_t)(unsigned char)*p);
  }
  v[AG_FAILED] = 0;
  v[AG_KIND] = c->kind;
  v[AG_DTYPE] = (long long)c->in.dtype * 2 + c->in.is_bool;
  v[AG_OP] = c->kind == PYAR_CALL_ALLREDUCE || c->kind == PYAR_CALL_REDUCE_SCATTER
                  ? (long long)c->op.op
                  : 0;
  v[AG_ROOT] = c->root;
  v[AG_COUNT] = (long long)c->in.count;
  v[AG_SHAPE] = (long long)(shape >> 2);
  v[AG_OPTIONS] = (long long)(opts >> 2);
}

static int mismatch(const pyar_call_t *c, int field, long long lo, long long hi) {
  static const char *const what[AG_N] = {"",
                                         "collective",
                                         "dtype",
                                         "op",
                                         "root",
                                         "element count",
                                         "shape or memory order",
                                         "algorithm or segment_bytes"};
  char detail[160] = "";
  if (field == AG_DTYPE) {
    snprintf(detail, sizeof detail, " (%s and %s among them)", pyar_dtype_code_name(lo),
             pyar_dtype_code_name(hi));
  } else if (field == AG_OP) {
    snprintf(detail, sizeof detail, " (%s and %s among them)", mpiar_op_name((mpiar_op_t)lo),
             mpiar_op_name((mpiar_op_t)hi));
  } else if (field == AG_ROOT || field == AG_COUNT) {
    snprintf(detail, sizeof detail, " (%lld and %lld among them)", lo, hi);
  } else if (field == AG_KIND) {
    snprintf(detail, sizeof detail, " (allreduce and bcast)");
  }
  return pyar_raise_code(MPIAR_ERR_MISMATCH, "%s: the %s differs between ranks%s; no data moved",
                         c->fname, what[field], detail);
}

int pyar_call_agree(pyar_call_t *c, int local_failed) {
  PyObject *et = NULL, *ev = NULL, *tb = NULL;
  long long v[AG_N], w[2 * AG_N];
  if (local_failed) {
    PyErr_Fetch(&et, &ev, &tb);
    memset(w, 0, sizeof w);
    w[AG_FAILED] = c->rank + 1;
  } else {
    agree_fields(c, v);
    for (int i = 0; i < AG_N; i++) {
      w[i] = v[i];
      w[AG_N + i] = -v[i];
    }
  }
  mpiar_options_t o = MPIAR_OPTIONS_INIT;
  o.timeout_ms = c->opts.timeout_ms;
  int rc;
  Py_BEGIN_ALLOW_THREADS;
  rc = mpiar_allreduce_ex(MPIAR_IN_PLACE, w, 2 * AG_N, MPIAR_INT64, MPIAR_MAX, c->comm, &o);
  Py_END_ALLOW_THREADS;
  if (local_failed) {
    /* The local exception says more than any failure of the check itself. */
    PyErr_Restore(et, ev, tb);
    return -1;
  }
  if (rc != MPIAR_SUCCESS) {
    return pyar_raise(rc, c->fname);
  }
  if (w[AG_FAILED] != 0) {
    return pyar_raise_code(MPIAR_ERR_MISMATCH,
                           "%s: rank %lld failed its argument checks (see the exception on that "
                           "rank); no data moved",
                           c->fname, w[AG_FAILED] - 1);
  }
  for (int i = AG_KIND; i < AG_N; i++) {
    if (w[i] != -w[AG_N + i]) {
      return mismatch(c, i, -w[AG_N + i], w[i]);
    }
  }
  return 0;
}

/* ---- running ------------------------------------------------------------------------------ */

int pyar_call_written(pyar_call_t *c) {
  if (c->result_new) {
    return 0; /* made here: no autograd graph can have saved it */
  }
  /* The output of an allreduce with out given, else x (in place, and bcast). */
  return pyar_array_written(c->out.obj != NULL ? &c->out : &c->in);
}

/* Arrays of failed calls that MPI may still read, kept for the rest of the process. */
typedef struct kept {
  pyar_array_t in, out;
  struct kept *next;
} kept_t;
static kept_t *kept_head;

void pyar_call_keep_after_failure(pyar_call_t *c, int rc) {
  if (rc != MPIAR_ERR_INTERRUPTED && rc != MPIAR_ERR_TIMEOUT && rc != MPIAR_ERR_COMM_BROKEN &&
      rc != MPIAR_ERR_MISMATCH && rc != MPIAR_ERR_MPI) {
    return; /* refused before any message left */
  }
  kept_t *k = malloc(sizeof *k);
  if (k == NULL) {
    return;
  }
  k->in = c->in;
  k->out = c->out;
  pyar_array_init(&c->in);
  pyar_array_init(&c->out);
  k->next = kept_head;
  kept_head = k;
}

int pyar_call_run(pyar_call_t *c) {
  if (pyar_call_written(c) < 0) {
    return -1;
  }
  int rc;
  if (c->kind == PYAR_CALL_ALLREDUCE) {
    Py_BEGIN_ALLOW_THREADS;
    rc = mpiar_allreduce_ex(c->send, c->recv, c->count, c->dtype, c->op.op, c->comm, &c->opts);
    Py_END_ALLOW_THREADS;
  } else if (c->kind == PYAR_CALL_REDUCE_SCATTER) {
    Py_BEGIN_ALLOW_THREADS;
    rc = mpiar_reduce_scatter_block_ex(c->send, c->recv, c->count, c->dtype, c->op.op, c->comm,
                                       &c->opts);
    Py_END_ALLOW_THREADS;
  } else if (c->kind == PYAR_CALL_ALLGATHER) {
    Py_BEGIN_ALLOW_THREADS;
    rc = mpiar_allgather_ex(c->send, c->recv, c->count, c->dtype, c->comm, &c->opts);
    Py_END_ALLOW_THREADS;
  } else {
    Py_BEGIN_ALLOW_THREADS;
    rc = mpiar_bcast_ex(c->recv, c->count, c->dtype, c->root, c->comm, &c->opts);
    Py_END_ALLOW_THREADS;
  }
  if (rc == MPIAR_SUCCESS) {
    return 0;
  }
  pyar_raise(rc, c->fname);
  pyar_call_keep_after_failure(c, rc);
  return -1;
}
