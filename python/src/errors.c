/*
 * Exceptions: mpiar.Error and one subclass per C error code, made from the library's own error
 * list (MPIAR_ERRNO_MAP), so a code added to the library gets its class without a change here.
 * MPIAR_ERR_TIMEOUT becomes mpiar.TimeoutError, MPIAR_ERR_KEY_UNKNOWN mpiar.KeyUnknownError, and
 * so on. Some classes also derive from the built-in exception a Python programmer would catch
 * (TimeoutError, NotImplementedError, MemoryError, OSError, ValueError, TypeError, LookupError).
 *
 * Every class has the attributes `code` (the negative C code) and `name` ("MPIAR_ERR_TIMEOUT");
 * every raised instance also has `detail`, the library's message for that failure.
 */
#include "pyar.h"

#include <ctype.h>
#include <stdarg.h>
#include <string.h>

/* Codes are small negative numbers; this bounds the table, not the library. */
#define PYAR_MAX_CODES 128

static PyObject *error_base;
static PyObject *error_classes[PYAR_MAX_CODES];

static const struct {
  int code;
  const char *name;
} codes[] = {
#define PYAR_CODE_(name, value, text) {MPIAR_##name, #name},
    MPIAR_ERRNO_MAP(PYAR_CODE_)
#undef PYAR_CODE_
};

/* The built-in exception a code's class also derives from, or NULL. */
static PyObject *builtin_base(int code) {
  switch (code) {
  case MPIAR_ERR_INVALID_ARG:
  case MPIAR_ERR_NULL_BUFFER:
  case MPIAR_ERR_OVERLAP:
  case MPIAR_ERR_COMM:
  case MPIAR_ERR_UNKNOWN_ALGORITHM:
  case MPIAR_ERR_ENV:
  case MPIAR_ERR_KEY_EXISTS:
  case MPIAR_ERR_MISMATCH:
    return PyExc_ValueError;
  case MPIAR_ERR_BAD_DTYPE_OP:
    return PyExc_TypeError;
  case MPIAR_ERR_UNSUPPORTED:
    return PyExc_NotImplementedError;
  case MPIAR_ERR_NOMEM:
    return PyExc_MemoryError;
  case MPIAR_ERR_TIMEOUT:
    return PyExc_TimeoutError;
  case MPIAR_ERR_KEY_UNKNOWN:
    return PyExc_LookupError;
  case MPIAR_ERR_IO:
    return PyExc_OSError;
  default:
    return NULL;
  }
}

/* "ERR_KEY_UNKNOWN" -> "KeyUnknownError"; "ERR_NOMEM" -> "NoMemoryError". */
static void class_name(const char *code_name, char *out, size_t size) {
  if (strncmp(code_name, "ERR_", 4) == 0) {
    code_name += 4;
  }
  if (strcmp(code_name, "NOMEM") == 0) {
    code_name = "NO_MEMORY";
  }
  size_t n = 0;
  int upper = 1;
  for (const char *p = code_name; *p != '\0' && n + 6 < size; p++) {
    if (*p == '_') {
      upper = 1;
      continue;
    }
    out[n++] = (char)(upper ? toupper((unsigned char)*p) : tolower((unsigned char)*p));
    upper = 0;
  }
  snprintf(out + n, size - n, "Error");
}

static int add_class(PyObject *module, PyObject *all, int code, const char *code_name) {
  char cname[64], qualified[80], full[64];
  class_name(code_name, cname, sizeof cname);
  snprintf(qualified, sizeof qualified, "mpiar.%s", cname);
  snprintf(full, sizeof full, "MPIAR_%s", code_name);
  PyObject *extra = builtin_base(code);
  PyObject *bases = extra ? PyTuple_Pack(2, error_base, extra) : PyTuple_Pack(1, error_base);
  PyObject *dict = Py_BuildValue("{s:i,s:s}", "code", code, "name", full);
  PyObject *cls = NULL;
  int rc = -1;
  if (bases != NULL && dict != NULL) {
    cls = PyErr_NewException(qualified, bases, dict);
  }
  if (cls != NULL && pyar_module_add(module, cname, cls) == 0 && PyList_Append(all, cls) == 0) {
    error_classes[-code] = cls;
    cls = NULL;
    rc = 0;
  }
  Py_XDECREF(cls);
  Py_XDECREF(bases);
  Py_XDECREF(dict);
  return rc;
}

int pyar_errors_init(PyObject *module) {
  PyObject *dict = Py_BuildValue("{s:i,s:s}", "code", 0, "name", "MPIAR_ERR");
  if (dict == NULL) {
    return -1;
  }
  error_base = PyErr_NewException("mpiar.Error", NULL, dict);
  Py_DECREF(dict);
  if (error_base == NULL || pyar_module_add(module, "Error", error_base) < 0) {
    return -1;
  }
  PyObject *all = PyList_New(0);
  if (all == NULL) {
    return -1;
  }
  for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) {
    int code = codes[i].code;
    if (code >= 0 || -code >= PYAR_MAX_CODES) {
      continue;
    }
    if (add_class(module, all, code, codes[i].name) < 0) {
      Py_DECREF(all);
      return -1;
    }
  }
  int rc = pyar_module_add(module, "_error_classes", all);
  Py_DECREF(all);
  return rc;
}

PyObject *pyar_error_class(int rc) {
  if (rc < 0 && -rc < PYAR_MAX_CODES && error_classes[-rc] != NULL) {
    return error_classes[-rc];
  }
  return error_base;
}

static int raise_with(int rc, const char *message, const char *detail) {
  PyObject *cls = pyar_error_class(rc);
  PyObject *exc = PyObject_CallFunction(cls, "s", message);
  if (exc == NULL) {
    return -1;
  }
  PyObject *d = PyUnicode_DecodeUTF8(detail, (Py_ssize_t)strlen(detail), "replace");
  if (d == NULL || PyObject_SetAttrString(exc, "detail", d) < 0) {
    Py_XDECREF(d);
    Py_DECREF(exc);
    return -1;
  }
  Py_DECREF(d);
  PyErr_SetObject(cls, exc);
  Py_DECREF(exc);
  return -1;
}

/* ---- interrupts (Ctrl-C) ---------------------------------------------------------------- */

/*
 * The library calls this while a call of the thread that imported mpiar waits for other ranks
 * (at most every 20 ms, the GIL released): it takes the GIL and runs Python's signal handlers.
 * When one raises (KeyboardInterrupt for SIGINT), the exception is kept here and the library
 * abandons the wait; the call then fails with MPIAR_ERR_INTERRUPTED and raises the kept
 * exception instead of an mpiar error (pyar_raise_detail).
 */
static _Thread_local PyObject *interrupt_type, *interrupt_value, *interrupt_tb;

static int interrupt_check(void *arg) {
  (void)arg;
  PyGILState_STATE g = PyGILState_Ensure();
  int stop = 0;
  if (PyErr_CheckSignals() < 0) {
    Py_CLEAR(interrupt_type);
    Py_CLEAR(interrupt_value);
    Py_CLEAR(interrupt_tb);
    PyErr_Fetch(&interrupt_type, &interrupt_value, &interrupt_tb);
    stop = 1;
  }
  PyGILState_Release(g);
  return stop;
}

void pyar_interrupts_init(void) {
  mpiar_set_interrupt(interrupt_check, NULL);
}

/* Raise the exception a signal handler raised during the last wait, if there is one. */
static int raise_interrupt(void) {
  if (interrupt_type == NULL) {
    return 0;
  }
  PyErr_Restore(interrupt_type, interrupt_value, interrupt_tb);
  interrupt_type = interrupt_value = interrupt_tb = NULL;
  return 1;
}

int pyar_raise(int rc, const char *fname) {
  /* Read the detail first: it is thread-local and the next mpiar call clears it. */
  char detail[1024];
  snprintf(detail, sizeof detail, "%s", mpiar_last_error());
  return pyar_raise_detail(rc, fname, detail);
}

int pyar_raise_detail(int rc, const char *fname, const char *detail) {
  if (raise_interrupt()) {
    return -1; /* the handler's exception (the call failed because it was raised) */
  }
  char message[1200];
  if (detail[0] != '\0') {
    snprintf(message, sizeof message, "%s: %s: %s", fname, mpiar_strerror(rc), detail);
  } else {
    snprintf(message, sizeof message, "%s: %s", fname, mpiar_strerror(rc));
  }
  return raise_with(rc, message, detail);
}

int pyar_raise_code(int rc, const char *fmt, ...) {
  char detail[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(detail, sizeof detail, fmt, ap);
  va_end(ap);
  return raise_with(rc, detail, detail);
}
