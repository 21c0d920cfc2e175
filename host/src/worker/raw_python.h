// raw_python.h - the two helpers the worker's raw-CPython checks share.
//
// identity_check.cc and content_check.cc read Python objects through the
// borrowed-reference C API (no pybind11: it would write reference counts
// and copy pages after fork). Both need the GIL and, on failure, the text of
// the pending Python exception.
#pragma once

#include <Python.h>

#include <string>

#include "python/gil.h"

namespace accelopt::worker {

/// Holds the GIL for its lifetime (python/gil.h).
using Gil = accelopt::python::Gil;

/// str() of the pending Python exception, which it clears ("Python error"
/// when there is none or it cannot be printed). Call with the GIL held.
inline std::string PythonProblem() {
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);
  std::string text = "Python error";
  if (value != nullptr) {
    if (PyObject* str = PyObject_Str(value)) {
      if (const char* utf8 = PyUnicode_AsUTF8(str)) text = utf8;
      Py_DECREF(str);
    }
  }
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(traceback);
  PyErr_Clear();
  return text;
}

}  // namespace accelopt::worker
