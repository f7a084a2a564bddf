/*
 * Node-shared memory for Python (mpiar.alloc, mpiar.free; docs/python.md "Node-shared arrays").
 *
 * mpiar._mpiar.SharedBuffer is the memory of one mpiar_alloc() call, exported through the buffer
 * protocol (NumPy's frombuffer keeps the object as the array's base, so every array and tensor
 * over it keeps it alive). Freeing is collective, so this type never frees anything on its own:
 * its deallocation, which the garbage collector may run at a different moment on each rank,
 * leaves the memory mapped, and the package frees it later at a point every rank reaches
 * (_shm_release below, called by mpiar/__init__.py once every rank has dropped the buffer).
 */
#include <stdint.h>

#include "pyar.h"

typedef struct {
  PyObject_HEAD void *ptr;
  Py_ssize_t nbytes;
  PyObject *weakrefs;
} pyar_shm_t;

static int shm_getbuffer(pyar_shm_t *self, Py_buffer *view, int flags) {
  static char empty[1];
  return PyBuffer_FillInfo(view, (PyObject *)self, self->ptr != NULL ? self->ptr : empty,
                           self->nbytes, 0, flags);
}

static PyBufferProcs shm_as_buffer = {
    .bf_getbuffer = (getbufferproc)shm_getbuffer,
};

static void shm_dealloc(pyar_shm_t *self) {
  if (self->weakrefs != NULL) {
    PyObject_ClearWeakRefs((PyObject *)self);
  }
  Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *shm_address(pyar_shm_t *self, void *closure) {
  (void)closure;
  return PyLong_FromVoidPtr(self->ptr);
}

static PyObject *shm_nbytes(pyar_shm_t *self, void *closure) {
  (void)closure;
  return PyLong_FromSsize_t(self->nbytes);
}

static PyGetSetDef shm_getset[] = {
    {"address", (getter)shm_address, NULL, "The memory's address (an int).", NULL},
    {"nbytes", (getter)shm_nbytes, NULL, "Its size in bytes.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject shm_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "mpiar.SharedBuffer",
    .tp_basicsize = sizeof(pyar_shm_t),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Node-shared memory of one mpiar_alloc() (made by mpiar.alloc; freed collectively "
              "by the package, never by this object).",
    .tp_dealloc = (destructor)shm_dealloc,
    .tp_as_buffer = &shm_as_buffer,
    .tp_weaklistoffset = offsetof(pyar_shm_t, weakrefs),
    .tp_getset = shm_getset,
};

/* _shm_alloc(nbytes, comm): collective over comm (mpiar_alloc), the GIL released while it waits. */
static PyObject *pyar_shm_alloc(PyObject *mod, PyObject *args) {
  (void)mod;
  Py_ssize_t nbytes = 0;
  PyObject *comm_obj = Py_None;
  if (!PyArg_ParseTuple(args, "nO:_shm_alloc", &nbytes, &comm_obj)) {
    return NULL;
  }
  MPI_Comm comm;
  if (pyar_get_comm(comm_obj, &comm, "alloc") < 0) {
    return NULL;
  }
  /* A negative size still enters mpiar_alloc (as 2^63 bytes, refused there on every rank), so
   * that the other ranks do not wait for this one. */
  size_t bytes = nbytes < 0 ? SIZE_MAX : (size_t)nbytes;
  pyar_shm_t *self = PyObject_New(pyar_shm_t, &shm_type);
  void *ptr = NULL;
  int rc;
  Py_BEGIN_ALLOW_THREADS;
  rc = mpiar_alloc(comm, bytes, self != NULL ? &ptr : NULL);
  Py_END_ALLOW_THREADS;
  if (self == NULL) {
    /* mpiar_alloc failed on every rank (a NULL result pointer is agreed on). */
    return PyErr_NoMemory();
  }
  self->ptr = ptr;
  self->nbytes = nbytes;
  self->weakrefs = NULL;
  if (rc != MPIAR_SUCCESS) {
    Py_DECREF(self);
    if (nbytes < 0) {
      PyErr_Format(PyExc_ValueError, "alloc: the size (%zd bytes) is negative", nbytes);
      return NULL;
    }
    pyar_raise(rc, "alloc");
    return NULL;
  }
  return (PyObject *)self;
}

/* _shm_release(address): mpiar_free (collective over the node's ranks of the allocation). */
static PyObject *pyar_shm_release(PyObject *mod, PyObject *args) {
  (void)mod;
  PyObject *addr_obj = NULL;
  if (!PyArg_ParseTuple(args, "O:_shm_release", &addr_obj)) {
    return NULL;
  }
  void *ptr = PyLong_AsVoidPtr(addr_obj);
  if (ptr == NULL && PyErr_Occurred()) {
    return NULL;
  }
  int rc;
  Py_BEGIN_ALLOW_THREADS;
  rc = mpiar_free(ptr);
  Py_END_ALLOW_THREADS;
  if (rc != MPIAR_SUCCESS) {
    return pyar_raise(rc, "free"), NULL;
  }
  Py_RETURN_NONE;
}

static PyMethodDef shm_methods[] = {
    {"_shm_alloc", pyar_shm_alloc, METH_VARARGS,
     "_shm_alloc(nbytes, comm): a SharedBuffer of nbytes (collective, mpiar_alloc)."},
    {"_shm_release", pyar_shm_release, METH_VARARGS,
     "_shm_release(address): mpiar_free (collective)."},
    {NULL, NULL, 0, NULL},
};

int pyar_shm_init(PyObject *module) {
  if (PyType_Ready(&shm_type) < 0 || PyModule_AddFunctions(module, shm_methods) < 0) {
    return -1;
  }
  return pyar_module_add(module, "SharedBuffer", (PyObject *)&shm_type);
}
