#include "worker/identity_check.h"

#include <Python.h>

#include <stdexcept>

#include "accelopt/api_entries.hpp"
#include "worker/dict_version.h"
#include "worker/raw_python.h"

namespace accelopt::worker {

struct NamespaceSnapshot::Module {
  PyObject* name = nullptr;    // str, strong
  PyObject* module = nullptr;  // strong
  PyObject* dict = nullptr;    // strong
  uint64_t version = 0;        // the dict's version tag when recorded (dict_version.h)
  std::vector<std::pair<PyObject*, PyObject*>> items;  // strong
  struct Function {
    PyObject* function;
    PyObject* code;
    PyObject* defaults;  // may be null
  };
  std::vector<Function> functions;  // borrowed from items
};

std::shared_ptr<const NamespaceSnapshot> NamespaceSnapshot::Take() {
  Gil gil;
  auto snapshot = std::make_shared<NamespaceSnapshot>();
  PyObject* integrity = PyImport_ImportModule(accelopt::api::kIntegrityWatchedModules.module);
  PyObject* listed =
      integrity ? PyObject_CallMethod(integrity, accelopt::api::kIntegrityWatchedModules.function, nullptr) : nullptr;
  Py_XDECREF(integrity);
  if (listed == nullptr || !PyList_Check(listed)) {
    Py_XDECREF(listed);
    throw std::runtime_error("cannot list the watched modules: " + PythonProblem());
  }
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(listed); ++i) {
    PyObject* pair = PyList_GET_ITEM(listed, i);
    if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2) continue;
    auto record = std::make_unique<Module>();
    record->name = PyTuple_GET_ITEM(pair, 0);
    record->module = PyTuple_GET_ITEM(pair, 1);
    PyObject* dict = PyModule_Check(record->module) ? PyModule_GetDict(record->module) : nullptr;
    if (dict == nullptr || !PyUnicode_Check(record->name)) continue;
    record->dict = dict;
    record->version = DictVersion(dict);
    Py_INCREF(record->name);
    (void)PyObject_Hash(record->name);  // cached in the str now, not written in a candidate process
    Py_INCREF(record->module);
    Py_INCREF(record->dict);
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    while (PyDict_Next(dict, &pos, &key, &value)) {
      Py_INCREF(key);
      Py_INCREF(value);
      record->items.emplace_back(key, value);
      if (PyFunction_Check(value)) {
        PyObject* code = PyFunction_GET_CODE(value);
        PyObject* defaults = PyFunction_GET_DEFAULTS(value);
        Py_XINCREF(code);
        Py_XINCREF(defaults);
        record->functions.push_back({value, code, defaults});
      }
    }
    snapshot->modules_.push_back(std::move(record));
  }
  Py_DECREF(listed);
  return snapshot;
}

bool NamespaceSnapshot::Unchanged() const {
  Gil gil;
  PyObject* modules = PyImport_GetModuleDict();  // borrowed
  for (const auto& record : modules_) {
    PyObject* current = PyDict_GetItemWithError(modules, record->name);  // borrowed; str hashes are cached
    if (current != record->module) {
      PyErr_Clear();
      return false;
    }
    PyObject* dict = PyModule_GetDict(record->module);
    if (dict != record->dict || PyDict_GET_SIZE(dict) != static_cast<Py_ssize_t>(record->items.size())) return false;
    Py_ssize_t pos = 0;
    size_t index = 0;
    PyObject *key, *value;
    // Not modified since recorded: same items (the walk below costs ~0.3 ms over all modules).
    bool untouched = record->version != 0 && DictVersion(dict) == record->version;
    while (!untouched && PyDict_Next(dict, &pos, &key, &value)) {
      if (index >= record->items.size() || record->items[index].first != key || record->items[index].second != value)
        return false;
      ++index;
    }
    for (const auto& function : record->functions) {
      if (PyFunction_GET_CODE(function.function) != function.code ||
          PyFunction_GET_DEFAULTS(function.function) != function.defaults)
        return false;
    }
  }
  return true;
}

}  // namespace accelopt::worker
