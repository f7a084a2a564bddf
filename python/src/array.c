/*
 * Arrays as typed memory, without copying contiguous data:
 *
 * - torch.Tensor (CPU, strided): read through its Python attributes (dtype, is_contiguous(),
 *   data_ptr(), numel(), shape). torch is never imported here; a tensor exists only once the
 *   program has imported torch, and its types are looked up then, from sys.modules.
 * - Objects with the buffer protocol (NumPy arrays, bytearray, memoryview, array.array): the
 *   element type comes from the struct-module format character and the item size.
 * - Objects with only __array_interface__: numpy.asarray() gives an array over the same memory.
 *
 * A non-contiguous input is copied once into a contiguous temporary the array owns; an output is
 * never copied: it must be contiguous and writable. Booleans travel as uint8 (0 or 1) and are
 * reduced with the bitwise operations, which equal the logical ones on 0/1 values.
 */
#include "pyar.h"

#include <string.h>

/* ---- torch, looked up once the program has imported it ----------------------------------- */

static const struct {
  const char *name;
  mpiar_dtype_t dtype;
  int is_bool;
} torch_types[] = {
    {"float32", MPIAR_FLOAT32, 0},   {"float64", MPIAR_FLOAT64, 0}, {"float16", MPIAR_FLOAT16, 0},
    {"bfloat16", MPIAR_BFLOAT16, 0}, {"int8", MPIAR_INT8, 0},       {"uint8", MPIAR_UINT8, 0},
    {"int32", MPIAR_INT32, 0},       {"int64", MPIAR_INT64, 0},     {"bool", MPIAR_UINT8, 1},
};
#define N_TORCH_TYPES (sizeof torch_types / sizeof torch_types[0])

static struct {
  int ready;
  PyTypeObject *tensor;
  PyObject *dtypes[N_TORCH_TYPES];
  PyObject *strided;
  PyObject *empty;
  PyObject *is_grad_enabled;
  PyObject *s_layout, *s_is_cpu, *s_dtype, *s_is_contiguous, *s_data_ptr, *s_shape, *s_contiguous,
      *s_device, *s_requires_grad, *s_is_leaf, *s_detach, *s_view, *s_zero_;
  PyObject *minus_one, *empty_slice;
} T;

static int torch_fill(PyObject *torch) {
  PyObject *tensor = PyObject_GetAttrString(torch, "Tensor");
  if (tensor == NULL || !PyType_Check(tensor)) {
    Py_XDECREF(tensor);
    return -1;
  }
  T.tensor = (PyTypeObject *)tensor;
  for (size_t i = 0; i < N_TORCH_TYPES; i++) {
    if ((T.dtypes[i] = PyObject_GetAttrString(torch, torch_types[i].name)) == NULL) {
      return -1;
    }
  }
  if ((T.strided = PyObject_GetAttrString(torch, "strided")) == NULL ||
      (T.empty = PyObject_GetAttrString(torch, "empty")) == NULL ||
      (T.is_grad_enabled = PyObject_GetAttrString(torch, "is_grad_enabled")) == NULL ||
      (T.minus_one = PyLong_FromLong(-1)) == NULL) {
    return -1;
  }
  PyObject *zero = PyLong_FromLong(0);
  if (zero == NULL) {
    return -1;
  }
  T.empty_slice = PySlice_New(NULL, zero, NULL); /* [:0] */
  Py_DECREF(zero);
  if (T.empty_slice == NULL) {
    return -1;
  }
#define PYAR_INTERN_(field, text)                           \
  if ((T.field = PyUnicode_InternFromString(text)) == NULL) \
    return -1;
  PYAR_INTERN_(s_layout, "layout")
  PYAR_INTERN_(s_is_cpu, "is_cpu")
  PYAR_INTERN_(s_dtype, "dtype")
  PYAR_INTERN_(s_is_contiguous, "is_contiguous")
  PYAR_INTERN_(s_data_ptr, "data_ptr")
  PYAR_INTERN_(s_shape, "shape")
  PYAR_INTERN_(s_contiguous, "contiguous")
  PYAR_INTERN_(s_device, "device")
  PYAR_INTERN_(s_requires_grad, "requires_grad")
  PYAR_INTERN_(s_is_leaf, "is_leaf")
  PYAR_INTERN_(s_detach, "detach")
  PYAR_INTERN_(s_view, "view")
  PYAR_INTERN_(s_zero_, "zero_")
#undef PYAR_INTERN_
  return 0;
}

/* Whether torch is imported (and completely: not in the middle of its own import). */
static int torch_ready(void) {
  static PyObject *name;
  if (T.ready) {
    return 1;
  }
  if (name == NULL && (name = PyUnicode_InternFromString("torch")) == NULL) {
    PyErr_Clear();
    return 0;
  }
  PyObject *torch = PyDict_GetItemWithError(PyImport_GetModuleDict(), name);
  if (torch == NULL) {
    PyErr_Clear();
    return 0;
  }
  if (torch_fill(torch) < 0) {
    PyErr_Clear();
    return 0;
  }
  T.ready = 1;
  return 1;
}

static int is_tensor(PyObject *obj) {
  return torch_ready() && PyObject_TypeCheck(obj, T.tensor);
}

/* ---- NumPy, imported when first needed ---------------------------------------------------- */

static PyObject *np_asarray, *np_empty;

static int numpy_load(const char *fname) {
  if (np_empty != NULL) {
    return 0;
  }
  PyObject *np = PyImport_ImportModule("numpy");
  if (np == NULL) {
    PyErr_Clear();
    PyErr_Format(PyExc_TypeError, "%s: this needs NumPy, which cannot be imported", fname);
    return -1;
  }
  np_asarray = PyObject_GetAttrString(np, "asarray");
  if (np_asarray != NULL) {
    np_empty = PyObject_GetAttrString(np, "empty");
  }
  Py_DECREF(np);
  return np_empty != NULL ? 0 : -1;
  return 0;
}

/* ---- the struct -------------------------------------------------------------------------- */

void pyar_array_init(pyar_array_t *a) {
  a->obj = NULL;
  a->has_view = 0;
  a->copy = NULL;
  a->copy_obj = NULL;
  a->data = NULL;
  a->count = 0;
  a->ndim = 0;
}

void pyar_array_release(pyar_array_t *a) {
  if (a->has_view) {
    PyBuffer_Release(&a->view);
    a->has_view = 0;
  }
  PyMem_Free(a->copy);
  a->copy = NULL;
  Py_CLEAR(a->copy_obj);
  Py_CLEAR(a->obj);
}

size_t pyar_array_bytes(const pyar_array_t *a) {
  return a->count * mpiar_dtype_size(a->dtype);
}

const char *pyar_array_dtype_name(const pyar_array_t *a) {
  return a->is_bool ? "bool" : mpiar_dtype_name(a->dtype);
}

const char *pyar_dtype_code_name(long long code) {
  if (code & 1) {
    return "bool";
  }
  const char *n = mpiar_dtype_name((mpiar_dtype_t)(code >> 1));
  return n ? n : "?";
}

int pyar_array_same_shape(const pyar_array_t *a, const pyar_array_t *b) {
  if (a->ndim != b->ndim) {
    return 0;
  }
  for (int i = 0; i < a->ndim; i++) {
    if (a->shape[i] != b->shape[i]) {
      return 0;
    }
  }
  return 1;
}

/* ---- torch tensors ------------------------------------------------------------------------ */

/* obj.name() without creating a bound method. */
static PyObject *call_method(PyObject *obj, PyObject *name) {
  PyObject *args[1] = {obj};
  return PyObject_VectorcallMethod(name, args, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
}

static int torch_device_error(PyObject *x, const char *fname, const char *what) {
  PyObject *dev = PyObject_GetAttr(x, T.s_device);
  if (dev == NULL) {
    return -1;
  }
  PyErr_Format(PyExc_TypeError, "%s: %s is a tensor on device '%S'; mpiar reduces CPU tensors",
               fname, what, dev);
  Py_DECREF(dev);
  return -1;
}

static int torch_dtype(PyObject *x, pyar_array_t *a, const char *fname, const char *what) {
  PyObject *dt = PyObject_GetAttr(x, T.s_dtype);
  if (dt == NULL) {
    return -1;
  }
  for (size_t i = 0; i < N_TORCH_TYPES; i++) {
    if (dt == T.dtypes[i]) {
      Py_DECREF(dt);
      a->dtype = torch_types[i].dtype;
      a->is_bool = torch_types[i].is_bool;
      return 0;
    }
  }
  PyErr_Format(PyExc_TypeError,
               "%s: %s has dtype %S, which mpiar does not reduce (float32, float64, float16, "
               "bfloat16, int8, uint8, int32, int64, bool)",
               fname, what, dt);
  Py_DECREF(dt);
  return -1;
}

static int torch_shape(PyObject *x, pyar_array_t *a, const char *fname, const char *what) {
  PyObject *shape = PyObject_GetAttr(x, T.s_shape);
  if (shape == NULL) {
    return -1;
  }
  if (!PyTuple_Check(shape) || PyTuple_GET_SIZE(shape) > PYAR_MAX_DIMS) {
    Py_DECREF(shape);
    PyErr_Format(PyExc_ValueError, "%s: %s has more than %d dimensions", fname, what,
                 PYAR_MAX_DIMS);
    return -1;
  }
  a->ndim = (int)PyTuple_GET_SIZE(shape);
  for (int i = 0; i < a->ndim; i++) {
    a->shape[i] = PyLong_AsSsize_t(PyTuple_GET_ITEM(shape, i));
  }
  Py_DECREF(shape);
  return PyErr_Occurred() ? -1 : 0;
}

/* Address of a contiguous tensor's first element. */
static int torch_data(PyObject *x, char **data) {
  PyObject *p = call_method(x, T.s_data_ptr);
  if (p == NULL) {
    return -1;
  }
  *data = PyLong_AsVoidPtr(p);
  Py_DECREF(p);
  return PyErr_Occurred() ? -1 : 0;
}

static int torch_get(PyObject *x, pyar_array_t *a, const char *fname, const char *what) {
  PyObject *v = PyObject_GetAttr(x, T.s_layout);
  if (v == NULL) {
    return -1;
  }
  int strided = v == T.strided;
  Py_DECREF(v);
  if (!strided) {
    PyErr_Format(PyExc_TypeError, "%s: %s is not a strided (dense) tensor", fname, what);
    return -1;
  }
  if ((v = PyObject_GetAttr(x, T.s_is_cpu)) == NULL) {
    return -1;
  }
  int cpu = v == Py_True;
  Py_DECREF(v);
  if (!cpu) {
    return torch_device_error(x, fname, what);
  }
  if (torch_dtype(x, a, fname, what) < 0 || torch_shape(x, a, fname, what) < 0) {
    return -1;
  }
  a->count = 1;
  for (int i = 0; i < a->ndim; i++) {
    a->count *= (size_t)a->shape[i];
  }
  if ((v = call_method(x, T.s_is_contiguous)) == NULL) {
    return -1;
  }
  a->c_contig = v == Py_True;
  a->f_contig = a->c_contig && (a->ndim <= 1 || a->count <= 1);
  Py_DECREF(v);
  if (a->c_contig && torch_data(x, &a->data) < 0) {
    return -1;
  }
  a->kind = PYAR_TORCH;
  a->readonly = 0;
  Py_INCREF(x);
  a->obj = x;
  return 0;
}

/* ---- buffer-protocol objects -------------------------------------------------------------- */

static const char *format_name(char c) {
  switch (c) {
  case 'h':
    return "int16";
  case 'H':
    return "uint16";
  case 'g':
    return "long double";
  case 'c':
  case 's':
  case 'p':
    return "bytes";
  case 'Z':
    return "complex";
  case 'O':
    return "object";
  default:
    return "this type";
  }
}

static int is_signed_code(char c) {
  return c == 'b' || c == 'h' || c == 'i' || c == 'l' || c == 'q' || c == 'n';
}

static int is_unsigned_code(char c) {
  return c == 'B' || c == 'H' || c == 'I' || c == 'L' || c == 'Q' || c == 'N';
}

/* The element type of a struct-module format ("f", "<d", "=l", "?") and its item size. */
static int format_dtype(const char *fmt, Py_ssize_t itemsize, pyar_array_t *a, const char *fname,
                        const char *what) {
  const char *f = fmt ? fmt : "B";
  int little = 1;
  const unsigned short probe = 1;
  int host_little = *(const unsigned char *)&probe == 1;
  if (*f == '@' || *f == '=') {
    f++;
  } else if (*f == '<' || *f == '>' || *f == '!') {
    little = *f == '<';
    f++;
  }
  int ok = f[0] != '\0' && f[1] == '\0' && little == host_little;
  int sized = itemsize == 1 || itemsize == 4 || itemsize == 8;
  a->is_bool = 0;
  if (ok && f[0] == '?' && itemsize == 1) {
    a->dtype = MPIAR_UINT8;
    a->is_bool = 1;
  } else if (ok && is_signed_code(f[0]) && sized) {
    a->dtype = itemsize == 1 ? MPIAR_INT8 : itemsize == 4 ? MPIAR_INT32 : MPIAR_INT64;
  } else if (ok && is_unsigned_code(f[0]) && sized) {
    a->dtype = itemsize == 1 ? MPIAR_UINT8 : itemsize == 4 ? MPIAR_UINT32 : MPIAR_UINT64;
  } else if (ok && f[0] == 'e' && itemsize == 2) {
    a->dtype = MPIAR_FLOAT16;
  } else if (ok && f[0] == 'f' && itemsize == 4) {
    a->dtype = MPIAR_FLOAT32;
  } else if (ok && f[0] == 'd' && itemsize == 8) {
    a->dtype = MPIAR_FLOAT64;
  } else {
    PyErr_Format(PyExc_TypeError,
                 "%s: %s has element format '%s' (%s, %zd bytes), which mpiar does not reduce "
                 "(native-endian int8/32/64, uint8/32/64, float16/32/64, bool)",
                 fname, what, fmt ? fmt : "B",
                 little == host_little ? format_name(f[0]) : "foreign byte order", itemsize);
    return -1;
  }
  return 0;
}

static int buffer_get(PyObject *obj, pyar_array_t *a, const char *fname, const char *what) {
  if (PyObject_GetBuffer(obj, &a->view, PyBUF_RECORDS_RO) < 0) {
    return -1;
  }
  a->has_view = 1;
  Py_INCREF(obj);
  a->obj = obj;
  a->kind = PYAR_BUFFER;
  if (format_dtype(a->view.format, a->view.itemsize, a, fname, what) < 0) {
    return -1;
  }
  if (a->view.ndim > PYAR_MAX_DIMS) {
    PyErr_Format(PyExc_ValueError, "%s: %s has more than %d dimensions", fname, what,
                 PYAR_MAX_DIMS);
    return -1;
  }
  a->ndim = a->view.ndim;
  for (int i = 0; i < a->ndim; i++) {
    a->shape[i] = a->view.shape ? a->view.shape[i] : a->view.len / a->view.itemsize;
  }
  a->count = (size_t)(a->view.len / a->view.itemsize);
  a->readonly = a->view.readonly;
  if (a->ndim <= 1 && a->view.suboffsets == NULL &&
      (a->ndim == 0 || a->view.strides == NULL || a->view.strides[0] == a->view.itemsize ||
       a->shape[0] <= 1)) {
    a->c_contig = a->f_contig = 1; /* the common case, without the general test */
  } else {
    a->c_contig = PyBuffer_IsContiguous(&a->view, 'C');
    a->f_contig = PyBuffer_IsContiguous(&a->view, 'F');
  }
  a->data = (a->c_contig || a->f_contig) ? a->view.buf : NULL;
  return 0;
}

/*
 * Whether @p obj has __array_interface__: 1, 0, or -1 with the exception its lookup raised (the
 * program's own, passed on as it is). An AttributeError raised by a descriptor that the type does
 * define (a property with a bug inside) counts as no interface, but is handed back in *@p cause
 * so that the "not an array" error can name it; a plain missing attribute has no cause.
 */
static int array_interface(PyObject *obj, PyObject **cause) {
  static PyObject *name;
  if (name == NULL && (name = PyUnicode_InternFromString("__array_interface__")) == NULL) {
    return -1;
  }
  PyObject *v = PyObject_GetAttr(obj, name);
  if (v != NULL) {
    Py_DECREF(v);
    return 1;
  }
  if (!PyErr_ExceptionMatches(PyExc_AttributeError)) {
    return -1;
  }
  PyObject *t, *e, *tb;
  PyErr_Fetch(&t, &e, &tb);
  if (_PyType_Lookup(Py_TYPE(obj), name) != NULL) {
    PyErr_NormalizeException(&t, &e, &tb);
    if (tb != NULL) {
      PyException_SetTraceback(e, tb);
    }
    *cause = e;
    e = NULL;
  }
  Py_XDECREF(t);
  Py_XDECREF(e);
  Py_XDECREF(tb);
  return 0;
}

int pyar_array_get(PyObject *obj, pyar_array_t *a, const char *fname, const char *what) {
  /* Tensors have no buffer protocol, so buffers (NumPy arrays) never pay for the tensor test. */
  if (PyObject_CheckBuffer(obj)) {
    return buffer_get(obj, a, fname, what);
  }
  if (is_tensor(obj)) {
    return torch_get(obj, a, fname, what);
  }
  PyObject *cause = NULL;
  int has = array_interface(obj, &cause);
  if (has < 0) {
    return -1;
  }
  if (has) {
    if (numpy_load(fname) < 0) {
      return -1;
    }
    PyObject *arr = PyObject_CallOneArg(np_asarray, obj);
    if (arr == NULL) {
      return -1;
    }
    int rc = buffer_get(arr, a, fname, what);
    Py_DECREF(arr);
    return rc;
  }
  PyErr_Format(PyExc_TypeError,
               "%s: %s must be a NumPy array, a torch.Tensor, or an object with the buffer "
               "protocol or __array_interface__, not %.200s",
               fname, what, Py_TYPE(obj)->tp_name);
  if (cause != NULL) {
    PyObject *t, *v, *tb;
    PyErr_Fetch(&t, &v, &tb);
    PyErr_NormalizeException(&t, &v, &tb);
    PyException_SetCause(v, cause); /* steals cause */
    PyErr_Restore(t, v, tb);
  }
  return -1;
}

/*
 * Autograd. mpiar writes tensors in place, as torch's in-place operations do, but autograd does
 * not see it. So it follows their two rules itself: under grad mode it refuses a tensor that
 * requires grad (torch refuses an in-place operation on such a leaf; on a non-leaf the write
 * would not be recorded in the graph, and mpiar's operations have no derivative), and every
 * write bumps the tensor's version counter, so that a backward pass that saved the tensor
 * detects the change instead of using the new values. torch 1.13 has no call that only bumps the
 * counter; an in-place operation on an empty view of a detached alias (which shares the counter)
 * does that and touches no element.
 */
static int torch_check_grad(const pyar_array_t *a, const char *fname, const char *what) {
  PyObject *v = PyObject_GetAttr(a->obj, T.s_requires_grad);
  if (v == NULL) {
    return -1;
  }
  int requires = v == Py_True;
  Py_DECREF(v);
  if (!requires) {
    return 0;
  }
  if ((v = PyObject_CallNoArgs(T.is_grad_enabled)) == NULL) {
    return -1;
  }
  int grad_mode = v == Py_True;
  Py_DECREF(v);
  if (!grad_mode) {
    return 0;
  }
  if ((v = PyObject_GetAttr(a->obj, T.s_is_leaf)) == NULL) {
    return -1;
  }
  int leaf = v == Py_True;
  Py_DECREF(v);
  PyErr_Format(PyExc_RuntimeError,
               "%s: %s is %s that requires grad, and mpiar writes it in place, which autograd "
               "cannot record; write it under torch.no_grad() or pass a tensor that does not "
               "require grad (x.detach())",
               fname, what, leaf ? "a leaf tensor" : "a tensor");
  return -1;
}

int pyar_array_written(pyar_array_t *a) {
  if (a->kind != PYAR_TORCH || a->obj == NULL) {
    return 0;
  }
  PyObject *alias = call_method(a->obj, T.s_detach);
  if (alias == NULL) {
    return -1;
  }
  if (a->ndim == 0) {
    PyObject *args[2] = {alias, T.minus_one};
    PyObject *flat = PyObject_VectorcallMethod(T.s_view, args, 2 | PY_VECTORCALL_ARGUMENTS_OFFSET,
                                               NULL);
    Py_DECREF(alias);
    if ((alias = flat) == NULL) {
      return -1;
    }
  }
  PyObject *none = PyObject_GetItem(alias, T.empty_slice);
  Py_DECREF(alias);
  if (none == NULL) {
    return -1;
  }
  PyObject *r = call_method(none, T.s_zero_);
  Py_DECREF(none);
  Py_XDECREF(r);
  return r == NULL ? -1 : 0;
}

int pyar_array_check_writable(const pyar_array_t *a, const char *fname, const char *what) {
  if (a->kind == PYAR_TORCH && torch_check_grad(a, fname, what) < 0) {
    return -1;
  }
  if (a->readonly) {
    PyErr_Format(PyExc_ValueError, "%s: %s is read-only", fname, what);
    return -1;
  }
  if (a->data == NULL && a->count > 0) {
    PyErr_Format(PyExc_ValueError,
                 "%s: %s is not contiguous; mpiar writes results into contiguous memory only",
                 fname, what);
    return -1;
  }
  return 0;
}

/* ---- new arrays and contiguous copies ----------------------------------------------------- */

PyObject *pyar_array_new_like(const pyar_array_t *a, const char *fname) {
  PyObject *tmpl = pyar_array_template(a);
  if (tmpl == NULL) {
    return NULL;
  }
  PyObject *r = pyar_new_from_template(tmpl, fname);
  Py_DECREF(tmpl);
  return r;
}

int pyar_array_data_in(pyar_array_t *a, char order, const void **data, const char *fname,
                       const char *what) {
  int laid_out = order == 'C' ? a->c_contig : a->f_contig;
  if (laid_out || a->count == 0) {
    *data = a->data;
    return 0;
  }
  if (a->kind == PYAR_TORCH) {
    if (order != 'C') {
      PyErr_Format(PyExc_ValueError,
                   "%s: the output is Fortran-ordered; a tensor %s needs a C-contiguous output",
                   fname, what);
      return -1;
    }
    a->copy_obj = call_method(a->obj, T.s_contiguous);
    if (a->copy_obj == NULL) {
      return -1;
    }
    char *p = NULL;
    if (torch_data(a->copy_obj, &p) < 0) {
      return -1;
    }
    *data = p;
    return 0;
  }
  a->copy = PyMem_Malloc((size_t)a->view.len);
  if (a->copy == NULL) {
    PyErr_NoMemory();
    return -1;
  }
  if (PyBuffer_ToContiguous(a->copy, &a->view, a->view.len, order) < 0) {
    return -1;
  }
  *data = a->copy;
  return 0;
}

/* ---- templates: what KVStore.value() creates ---------------------------------------------- */

PyObject *pyar_array_template(const pyar_array_t *a) {
  PyObject *shape = PyTuple_New(a->ndim);
  if (shape == NULL) {
    return NULL;
  }
  for (int i = 0; i < a->ndim; i++) {
    PyObject *d = PyLong_FromSsize_t(a->shape[i]);
    if (d == NULL) {
      Py_DECREF(shape);
      return NULL;
    }
    PyTuple_SET_ITEM(shape, i, d);
  }
  PyObject *dtype = NULL;
  if (a->kind == PYAR_TORCH) {
    dtype = PyObject_GetAttr(a->obj, T.s_dtype);
  } else {
    dtype = PyUnicode_FromString(a->view.format ? a->view.format : "B");
  }
  if (dtype == NULL) {
    Py_DECREF(shape);
    return NULL;
  }
  return Py_BuildValue("(iNN)", a->kind, shape, dtype);
}

PyObject *pyar_new_from_template(PyObject *tmpl, const char *fname) {
  int kind = 0;
  PyObject *shape = NULL, *dtype = NULL;
  if (!PyArg_ParseTuple(tmpl, "iOO", &kind, &shape, &dtype)) {
    return NULL;
  }
  PyObject *factory = NULL;
  if (kind == PYAR_TORCH) {
    if (!torch_ready()) {
      PyErr_Format(PyExc_RuntimeError, "%s: torch is not imported", fname);
      return NULL;
    }
    factory = T.empty;
  } else {
    if (numpy_load(fname) < 0) {
      return NULL;
    }
    factory = np_empty;
  }
  PyObject *args = PyTuple_Pack(1, shape);
  PyObject *kw = Py_BuildValue("{s:O}", "dtype", dtype);
  PyObject *r = NULL;
  if (args != NULL && kw != NULL) {
    r = PyObject_Call(factory, args, kw);
  }
  Py_XDECREF(args);
  Py_XDECREF(kw);
  return r;
}

int pyar_array_refresh(pyar_array_t *a, char order) {
  if (a->copy_obj != NULL) {
    PyObject *r = PyObject_CallMethod(a->copy_obj, "copy_", "O", a->obj);
    Py_XDECREF(r);
    return r == NULL ? -1 : 0;
  }
  if (a->copy != NULL) {
    return PyBuffer_ToContiguous(a->copy, &a->view, a->view.len, order);
  }
  return 0;
}
