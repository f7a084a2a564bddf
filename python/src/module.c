/*
 * The module mpiar._mpiar. Importing it imports mpi4py.MPI (which initialises MPI) and first
 * checks that mpi4py runs on the MPI library this extension was compiled against: two MPI
 * libraries in one process disagree on every handle (an MPI_Comm is an int in MPICH and a
 * pointer in Open MPI), so a mismatch is an ImportError naming both, raised before any MPI call.
 * The check compares the vendor and major version of mpi.h at build time with mpi4py's
 * MPI.get_vendor(), and then that the process holds a single MPI library (libmpiar linked
 * against another MPI than the extension would load a second one).
 */
#include "pyar.h"

#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>

/* The MPI of mpi.h, named as mpi4py's MPI.get_vendor() names it. */
#if defined(OPEN_MPI) && OPEN_MPI
#define PYAR_MPI_VENDOR "Open MPI"
#define PYAR_MPI_MAJOR OMPI_MAJOR_VERSION
#define PYAR_MPI_MINOR OMPI_MINOR_VERSION
#define PYAR_MPI_PATCH OMPI_RELEASE_VERSION
#elif defined(MPICH_NUMVERSION)
#if defined(I_MPI_VERSION)
#define PYAR_MPI_VENDOR "Intel MPI"
#elif defined(MVAPICH2_VERSION)
#define PYAR_MPI_VENDOR "MVAPICH2"
#else
#define PYAR_MPI_VENDOR "MPICH"
#endif
#define PYAR_MPI_MAJOR (MPICH_NUMVERSION / 10000000)
#define PYAR_MPI_MINOR (MPICH_NUMVERSION / 100000 % 100)
#define PYAR_MPI_PATCH (MPICH_NUMVERSION / 1000 % 100)
#else
#define PYAR_MPI_VENDOR "unknown MPI"
#define PYAR_MPI_MAJOR 0
#define PYAR_MPI_MINOR 0
#define PYAR_MPI_PATCH 0
#endif

static int vendor_check(void) {
  PyObject *mpi = PyImport_ImportModule("mpi4py.MPI");
  if (mpi == NULL) {
    return -1;
  }
  PyObject *v = PyObject_CallMethod(mpi, "get_vendor", NULL);
  Py_DECREF(mpi);
  const char *name = NULL;
  int major = 0, minor = 0, patch = 0;
  if (v == NULL || !PyArg_ParseTuple(v, "s(iii)", &name, &major, &minor, &patch)) {
    Py_XDECREF(v);
    return -1;
  }
  int same = strcmp(name, PYAR_MPI_VENDOR) == 0 && major == PYAR_MPI_MAJOR;
  if (!same) {
    PyErr_Format(PyExc_ImportError,
                 "mpiar's Python module was built with %s %d.%d.%d (mpi.h) but mpi4py runs on "
                 "%s %d.%d.%d; one process cannot use both. Build the module against %s (CMake: "
                 "-DMPIAR_PYTHON_MPICC=<%s's mpicc>; pip: MPICC=<%s's mpicc>), or use an mpi4py "
                 "built with %s.",
                 PYAR_MPI_VENDOR, PYAR_MPI_MAJOR, PYAR_MPI_MINOR, PYAR_MPI_PATCH, name, major,
                 minor, patch, name, name, name, PYAR_MPI_VENDOR);
  }
  Py_DECREF(v);
  return same ? 0 : -1;
}

/* ---- one MPI library in the process ------------------------------------------------------- */

typedef struct {
  char paths[4][PATH_MAX];
  int n;
} mpi_libs_t;

static int is_mpi_library(const char *path) {
  const char *base = strrchr(path, '/');
  base = base ? base + 1 : path;
  return strncmp(base, "libmpi.so", 9) == 0 || strncmp(base, "libmpich.so", 11) == 0;
}

static int collect_mpi(struct dl_phdr_info *info, size_t size, void *data) {
  (void)size;
  mpi_libs_t *libs = data;
  if (info->dlpi_name == NULL || !is_mpi_library(info->dlpi_name)) {
    return 0;
  }
  char real[PATH_MAX];
  if (realpath(info->dlpi_name, real) == NULL) {
    snprintf(real, sizeof real, "%s", info->dlpi_name);
  }
  for (int i = 0; i < libs->n; i++) {
    if (strcmp(libs->paths[i], real) == 0) {
      return 0;
    }
  }
  if (libs->n < 4) {
    snprintf(libs->paths[libs->n++], PATH_MAX, "%s", real);
  }
  return 0;
}

static const char *libmpiar_path(void) {
  Dl_info info;
  if (dladdr((void *)mpiar_version, &info) != 0 && info.dli_fname != NULL) {
    return info.dli_fname;
  }
  return "libmpiar";
}

static int single_mpi_check(void) {
  mpi_libs_t libs;
  libs.n = 0;
  dl_iterate_phdr(collect_mpi, &libs);
  if (libs.n > 1) {
    PyErr_Format(PyExc_ImportError,
                 "two MPI libraries are loaded in this process, %s and %s: %s and mpi4py were "
                 "built against different MPI libraries; build libmpiar and its Python module "
                 "with mpi4py's MPI (%s %d)",
                 libs.paths[0], libs.paths[1], libmpiar_path(), PYAR_MPI_VENDOR, PYAR_MPI_MAJOR);
    return -1;
  }
  return 0;
}

/* ---- module-level functions and data ------------------------------------------------------ */

static PyObject *algorithms(PyObject *self, PyObject *unused) {
  (void)self;
  (void)unused;
  int n = mpiar_algorithm_count();
  PyObject *t = PyTuple_New(n);
  for (int i = 0; t != NULL && i < n; i++) {
    PyObject *s = PyUnicode_FromString(mpiar_algorithm_name(i));
    if (s == NULL) {
      Py_CLEAR(t);
      break;
    }
    PyTuple_SET_ITEM(t, i, s);
  }
  return t;
}

static PyObject *kernel_level(PyObject *self, PyObject *unused) {
  (void)self;
  (void)unused;
  const char *k = mpiar_kernel_level();
  if (k == NULL) {
    pyar_raise(MPIAR_ERR_INTERNAL, "mpiar.kernel_level");
    return NULL;
  }
  return PyUnicode_FromString(k);
}

static PyObject *build_info(void) {
  return Py_BuildValue("{s:s,s:(iii),s:s,s:s,s:s}", "mpi_vendor", PYAR_MPI_VENDOR, "mpi_version",
                       PYAR_MPI_MAJOR, PYAR_MPI_MINOR, PYAR_MPI_PATCH, "mpiar_headers",
                       Py_STRINGIFY(MPIAR_VERSION_MAJOR) "." Py_STRINGIFY(
                           MPIAR_VERSION_MINOR) "." Py_STRINGIFY(MPIAR_VERSION_PATCH),
                       "mpiar_library", mpiar_version(), "libmpiar", libmpiar_path());
}

static PyMethodDef methods[] = {
    {"allreduce", PYAR_FASTCALL(pyar_allreduce), METH_FASTCALL | METH_KEYWORDS,
     "allreduce($module, /, x, op='sum', out=None, comm=None, algorithm=None, "
     "segment_bytes=None, timeout_ms=None, check=True)\n--\n\nReduce x over every rank of comm "
     "(default MPI.COMM_WORLD) "
     "into out and return out: a new array like x when out is None, x itself (in place) when out "
     "is x. x: a NumPy array, a CPU torch.Tensor, or any object with the buffer protocol or "
     "__array_interface__. check=True verifies first, with one small allreduce, that every rank "
     "passes matching arguments."},
    {"bcast", PYAR_FASTCALL(pyar_bcast), METH_FASTCALL | METH_KEYWORDS,
     "bcast($module, /, x, root=0, comm=None, algorithm=None, segment_bytes=None, "
     "timeout_ms=None, check=True)\n--\n\nBroadcast root's x into x on every rank (in place) and "
     "return x."},
    {"iallreduce", PYAR_FASTCALL(pyar_iallreduce), METH_FASTCALL | METH_KEYWORDS,
     "iallreduce($module, /, x, op='sum', out=None, comm=None, algorithm=None, "
     "segment_bytes=None, timeout_ms=None, check=True)\n--\n\nStart allreduce(x, ...) and "
     "return an mpiar.Request; its wait() returns the output. The request keeps x, out and any "
     "copy alive until the operation completes."},
    {"ibcast", PYAR_FASTCALL(pyar_ibcast), METH_FASTCALL | METH_KEYWORDS,
     "ibcast($module, /, x, root=0, comm=None, algorithm=None, segment_bytes=None, "
     "timeout_ms=None, check=True)\n--\n\nStart bcast(x, ...) and return an mpiar.Request."},
    {"allreduce_init", PYAR_FASTCALL(pyar_allreduce_init), METH_FASTCALL | METH_KEYWORDS,
     "allreduce_init($module, /, x, op='sum', out=None, comm=None, algorithm=None, "
     "segment_bytes=None, timeout_ms=None, check=True)\n--\n\nA persistent allreduce of x into "
     "out: an inactive mpiar.Request whose start() reduces x's current contents again and again "
     "(wait() or test() completes each run)."},
    {"bcast_init", PYAR_FASTCALL(pyar_bcast_init), METH_FASTCALL | METH_KEYWORDS,
     "bcast_init($module, /, x, root=0, comm=None, algorithm=None, segment_bytes=None, "
     "timeout_ms=None, check=True)\n--\n\nA persistent broadcast of x (see allreduce_init)."},
    {"reduce_scatter_block", PYAR_FASTCALL(pyar_reduce_scatter_block),
     METH_FASTCALL | METH_KEYWORDS,
     "reduce_scatter_block($module, /, x, op='sum', out=None, comm=None, algorithm=None, "
     "segment_bytes=None, timeout_ms=None, check=True)\n--\n\nReduce x (p equal blocks, p = the "
     "size of comm) over every rank and return rank r's block r of the result: out, or a new "
     "one-dimensional array of x.size / p elements like x. algorithm: 'ring', "
     "'recursive_halving', 'direct', 'repro_direct' or None (auto)."},
    {"allgather", PYAR_FASTCALL(pyar_allgather), METH_FASTCALL | METH_KEYWORDS,
     "allgather($module, /, x, out=None, comm=None, algorithm=None, segment_bytes=None, "
     "timeout_ms=None, check=True)\n--\n\nGather every rank's x (the same size on every rank) "
     "into out in rank order and return it: out, or a new one-dimensional array of p * x.size "
     "elements like x. algorithm: 'ring', 'recursive_doubling', 'bruck', 'direct' or None."},
    {"ireduce_scatter_block", PYAR_FASTCALL(pyar_ireduce_scatter_block),
     METH_FASTCALL | METH_KEYWORDS,
     "ireduce_scatter_block($module, /, x, op='sum', out=None, comm=None, algorithm=None, "
     "segment_bytes=None, timeout_ms=None, check=True)\n--\n\nStart reduce_scatter_block(x, ...) "
     "and return an mpiar.Request; its wait() returns the output."},
    {"iallgather", PYAR_FASTCALL(pyar_iallgather), METH_FASTCALL | METH_KEYWORDS,
     "iallgather($module, /, x, out=None, comm=None, algorithm=None, segment_bytes=None, "
     "timeout_ms=None, check=True)\n--\n\nStart allgather(x, ...) and return an mpiar.Request."},
    {"reduce_scatter_block_init", PYAR_FASTCALL(pyar_reduce_scatter_block_init),
     METH_FASTCALL | METH_KEYWORDS,
     "reduce_scatter_block_init($module, /, x, op='sum', out=None, comm=None, algorithm=None, "
     "segment_bytes=None, timeout_ms=None, check=True)\n--\n\nA persistent reduce_scatter_block "
     "(see allreduce_init)."},
    {"allgather_init", PYAR_FASTCALL(pyar_allgather_init), METH_FASTCALL | METH_KEYWORDS,
     "allgather_init($module, /, x, out=None, comm=None, algorithm=None, segment_bytes=None, "
     "timeout_ms=None, check=True)\n--\n\nA persistent allgather (see allreduce_init)."},
    {"waitall", PYAR_FASTCALL(pyar_waitall), METH_FASTCALL | METH_KEYWORDS,
     "waitall($module, /, requests)\n--\n\nWait for every request (advancing them all "
     "together) and return the list of their results; raise the first error in list order once "
     "all have completed."},
    {"waitany", PYAR_FASTCALL(pyar_waitany), METH_FASTCALL | METH_KEYWORDS,
     "waitany($module, /, requests)\n--\n\nWait until a request of the list is done and return "
     "its position (a request already done counts); its wait() then returns at once, with its "
     "result or its error."},
    {"testany", PYAR_FASTCALL(pyar_testany), METH_FASTCALL | METH_KEYWORDS,
     "testany($module, /, requests)\n--\n\nThe position of a request of the list that is done "
     "(advancing the active ones once), or None."},
    {"select", PYAR_FASTCALL(pyar_select), METH_FASTCALL | METH_KEYWORDS,
     "select($module, /, nbytes, nranks)\n--\n\nThe (algorithm, segment_bytes) that 'auto' "
     "picks for nbytes on nranks ranks."},
    {"_c_loop", PYAR_FASTCALL(pyar_c_loop), METH_FASTCALL | METH_KEYWORDS,
     "_c_loop(x, iters, out=None, op='sum', comm=None) -> seconds: the C allreduce alone, iters "
     "times, for benchmarks."},
    {"algorithms", algorithms, METH_NOARGS, "The allreduce algorithms of the registry."},
    {"kernel_level", kernel_level, METH_NOARGS,
     "The reduction kernel level in use: 'reference', 'avx2' or 'avx512'."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT,
    "mpiar._mpiar",
    "MPI allreduce built by hand from point-to-point messages (the C extension of mpiar).",
    -1,
    methods,
    NULL,
    NULL,
    NULL,
    NULL};

PyMODINIT_FUNC PyInit__mpiar(void) {
  if (vendor_check() < 0 || single_mpi_check() < 0 || pyar_comm_init() < 0) {
    return NULL;
  }
  pyar_interrupts_init();
  PyObject *m = PyModule_Create(&moduledef);
  if (m == NULL) {
    return NULL;
  }
  PyObject *info = build_info();
  if (info == NULL || pyar_module_add(m, "build_info", info) < 0 || pyar_errors_init(m) < 0 ||
      pyar_request_init(m) < 0 || pyar_kvstore_init(m) < 0 || pyar_shm_init(m) < 0 ||
      PyModule_AddStringConstant(m, "__version__", mpiar_version()) < 0) {
    Py_XDECREF(info);
    Py_DECREF(m);
    return NULL;
  }
  Py_DECREF(info);
  return m;
}
