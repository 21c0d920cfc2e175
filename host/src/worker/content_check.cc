#include "worker/content_check.h"

#include <Python.h>
#include <structmember.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "accelopt/api_entries.hpp"
#include "worker/dict_version.h"
#include "worker/raw_python.h"

namespace accelopt::worker {

// Record kinds: accelopt.sandbox.integrity's W_* constants.
enum Kind : int {
  kModule = 0,
  kDict = 1,
  kList = 2,
  kSet = 3,
  kFunction = 4,
  kCell = 5,
  kEmptyCell = 6,
  kType = 7,
  kAttribute = 8,
  kArray = 9,
  kObject = 10,
  kSlot = 11,
  kEmptySlot = 12,
  kModuleName = 13,
  kUncheckable = 14,
};

struct ContentSnapshot::Record {
  int kind = kUncheckable;
  PyObject* tuple = nullptr;       // the record as content_watch() made it (strong)
  std::vector<PyObject*> members;  // kSet: the recorded members, sorted by address
  uint64_t version = 0;            // kDict, kType: the dict's version tag when recorded (dict_version.h)
  Py_ssize_t offset = 0;           // kSlot, kEmptySlot: where the slot lives in the object
  PyObject* Item(Py_ssize_t i) const { return PyTuple_GET_ITEM(tuple, i); }
};

namespace {

// Items of `dict` in order, by identity, against the recorded key and value
// tuples; a dict whose version tag is still `version` was not modified.
bool SameItems(PyObject* dict, PyObject* keys, PyObject* values, uint64_t version) {
  if (dict == nullptr || PyDict_GET_SIZE(dict) != PyTuple_GET_SIZE(keys)) return false;
  if (version != 0 && DictVersion(dict) == version) return true;
  Py_ssize_t pos = 0, index = 0;
  PyObject *key, *value;
  while (PyDict_Next(dict, &pos, &key, &value)) {
    if (index >= PyTuple_GET_SIZE(keys) || PyTuple_GET_ITEM(keys, index) != key ||
        PyTuple_GET_ITEM(values, index) != value)
      return false;
    ++index;
  }
  return index == PyTuple_GET_SIZE(keys);
}

// A function's field as the record holds it: Python shows a missing one as None.
bool SameField(PyObject* now, PyObject* recorded) { return (now != nullptr ? now : Py_None) == recorded; }

std::vector<PyObject*> SetMembers(PyObject* set) {
  std::vector<PyObject*> members;
  Py_ssize_t pos = 0;
  PyObject* key;
  Py_hash_t hash;
  while (_PySet_NextEntry(set, &pos, &key, &hash)) members.push_back(key);
  std::sort(members.begin(), members.end());
  return members;
}

bool SameArray(PyObject* array, PyObject* bytes, PyObject* format, PyObject* shape) {
  Py_buffer view;
  if (PyObject_GetBuffer(array, &view, PyBUF_RECORDS_RO) != 0) {
    PyErr_Clear();
    return false;
  }
  bool same = view.len == PyBytes_GET_SIZE(bytes) && view.ndim == PyTuple_GET_SIZE(shape) &&
              std::strcmp(view.format != nullptr ? view.format : "B", PyUnicode_AsUTF8(format)) == 0;
  for (int i = 0; same && i < view.ndim; ++i) same = view.shape[i] == PyLong_AsSsize_t(PyTuple_GET_ITEM(shape, i));
  if (same) {
    std::string copy(static_cast<size_t>(view.len), '\0');
    same = PyBuffer_ToContiguous(copy.data(), &view, view.len, 'C') == 0 &&
           std::memcmp(copy.data(), PyBytes_AS_STRING(bytes), copy.size()) == 0;
  }
  PyBuffer_Release(&view);
  PyErr_Clear();
  return same;
}

// The interned "__name__" key, hash cached (reading a module's name writes nothing).
PyObject* NameKey() {
  static PyObject* key = [] {
    PyObject* text = PyUnicode_InternFromString("__name__");
    (void)PyObject_Hash(text);
    return text;
  }();
  return key;
}

// Checks a record's shape and prepares what Unchanged() needs; throws on a malformed one.
void Prepare(ContentSnapshot::Record& record, bool* checkable) {
  static const Py_ssize_t kSizes[] = {3, 4, 3, 3, 6, 3, 2, 5, 4, 5, 4, 4, 3, 3, 2};
  PyObject* t = record.tuple;
  if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) < 1 || !PyLong_Check(PyTuple_GET_ITEM(t, 0)))
    throw std::runtime_error("content_watch() returned a record that is not (kind, ...)");
  long kind = PyLong_AsLong(PyTuple_GET_ITEM(t, 0));
  if (kind < kModule || kind > kUncheckable || PyTuple_GET_SIZE(t) != kSizes[kind])
    throw std::runtime_error("content_watch() returned a malformed record of kind " + std::to_string(kind));
  record.kind = static_cast<int>(kind);
  auto require = [&](bool ok, const char* what) {
    if (!ok) throw std::runtime_error(std::string("content_watch(): ") + what);
  };
  switch (record.kind) {
    case kModule:
      require(PyUnicode_Check(record.Item(1)), "module record without a name");
      (void)PyObject_Hash(record.Item(1));  // cached in the str now, not written in a candidate process
      break;
    case kDict:
      require(PyDict_CheckExact(record.Item(1)) && PyTuple_Check(record.Item(2)) && PyTuple_Check(record.Item(3)) &&
                  PyTuple_GET_SIZE(record.Item(2)) == PyTuple_GET_SIZE(record.Item(3)),
              "malformed dict record");
      record.version = SameItems(record.Item(1), record.Item(2), record.Item(3), 0) ? DictVersion(record.Item(1)) : 0;
      break;
    case kList:
      require(PyList_CheckExact(record.Item(1)) && PyTuple_Check(record.Item(2)), "malformed list record");
      break;
    case kSet:
      require(PyAnySet_CheckExact(record.Item(1)) && PyTuple_Check(record.Item(2)), "malformed set record");
      record.members.assign(&PyTuple_GET_ITEM(record.Item(2), 0),
                            &PyTuple_GET_ITEM(record.Item(2), 0) + PyTuple_GET_SIZE(record.Item(2)));
      std::sort(record.members.begin(), record.members.end());
      break;
    case kFunction:
      require(PyFunction_Check(record.Item(1)), "function record without a function");
      break;
    case kCell:
    case kEmptyCell:
      require(PyCell_Check(record.Item(1)), "cell record without a cell");
      break;
    case kType:
      require(PyType_Check(record.Item(1)) && PyTuple_Check(record.Item(2)) && PyTuple_Check(record.Item(3)) &&
                  PyTuple_GET_SIZE(record.Item(2)) == PyTuple_GET_SIZE(record.Item(3)),
              "malformed class record");
      if (PyObject* dict = reinterpret_cast<PyTypeObject*>(record.Item(1))->tp_dict;
          SameItems(dict, record.Item(2), record.Item(3), 0))
        record.version = DictVersion(dict);
      break;
    case kAttribute:
      require(PyUnicode_Check(record.Item(2)), "attribute record without a name");
      break;
    case kArray:
      require(PyBytes_Check(record.Item(2)) && PyUnicode_Check(record.Item(3)) && PyTuple_Check(record.Item(4)),
              "malformed array record");
      break;
    case kObject:
      require(PyType_Check(record.Item(2)) && (record.Item(3) == Py_None || PyDict_CheckExact(record.Item(3))),
              "malformed object record");
      break;
    case kSlot:
    case kEmptySlot: {
      PyObject* descriptor = record.Item(2);
      require(Py_IS_TYPE(descriptor, &PyMemberDescr_Type), "slot record without a member descriptor");
      PyMemberDef* member = reinterpret_cast<PyMemberDescrObject*>(descriptor)->d_member;
      require(PyObject_TypeCheck(record.Item(1), PyDescr_TYPE(descriptor)), "slot record of another class");
      if (member->type != T_OBJECT_EX && member->type != T_OBJECT) *checkable = false;
      record.offset = member->offset;
      break;
    }
    case kModuleName:
      // A module subclass could answer __name__ another way: only plain modules are read directly.
      if (!PyModule_CheckExact(record.Item(1))) *checkable = false;
      break;
    case kUncheckable:
      *checkable = false;
      break;
  }
}

bool Holds(const ContentSnapshot::Record& r) {
  switch (r.kind) {
    case kModule: {
      PyObject* now = PyDict_GetItemWithError(PyImport_GetModuleDict(), r.Item(1));  // borrowed
      PyErr_Clear();
      return now == r.Item(2);
    }
    case kDict:
      return SameItems(r.Item(1), r.Item(2), r.Item(3), r.version);
    case kList: {
      PyObject *list = r.Item(1), *items = r.Item(2);
      if (PyList_GET_SIZE(list) != PyTuple_GET_SIZE(items)) return false;
      for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(items); ++i)
        if (PyList_GET_ITEM(list, i) != PyTuple_GET_ITEM(items, i)) return false;
      return true;
    }
    case kSet:
      return PySet_GET_SIZE(r.Item(1)) == static_cast<Py_ssize_t>(r.members.size()) &&
             SetMembers(r.Item(1)) == r.members;
    case kFunction: {
      PyObject* function = r.Item(1);
      return PyFunction_GET_CODE(function) == r.Item(2) && SameField(PyFunction_GET_DEFAULTS(function), r.Item(3)) &&
             SameField(PyFunction_GET_KW_DEFAULTS(function), r.Item(4)) &&
             SameField(PyFunction_GET_CLOSURE(function), r.Item(5));
    }
    case kCell:
      return PyCell_GET(r.Item(1)) == r.Item(2);
    case kEmptyCell:
      return PyCell_GET(r.Item(1)) == nullptr;
    case kType: {
      auto* type = reinterpret_cast<PyTypeObject*>(r.Item(1));
      if (!SameItems(type->tp_dict, r.Item(2), r.Item(3), r.version)) return false;
      if (!(type->tp_flags & Py_TPFLAGS_HEAPTYPE)) return true;  // a static type's name cannot be set
      return reinterpret_cast<PyHeapTypeObject*>(type)->ht_qualname == r.Item(4);
    }
    case kAttribute: {
      PyObject* now = PyObject_GetAttr(r.Item(1), r.Item(2));
      bool same = now == r.Item(3);
      Py_XDECREF(now);
      PyErr_Clear();
      return same;
    }
    case kArray:
      return SameArray(r.Item(1), r.Item(2), r.Item(3), r.Item(4));
    case kObject: {
      PyObject* object = r.Item(1);
      if (reinterpret_cast<PyObject*>(Py_TYPE(object)) != r.Item(2)) return false;
      PyObject** dict = _PyObject_GetDictPtr(object);
      PyObject* now = dict != nullptr ? *dict : nullptr;
      return now == (r.Item(3) == Py_None ? nullptr : r.Item(3));
    }
    case kSlot:
      return *reinterpret_cast<PyObject**>(reinterpret_cast<char*>(r.Item(1)) + r.offset) == r.Item(3);
    case kEmptySlot:
      return *reinterpret_cast<PyObject**>(reinterpret_cast<char*>(r.Item(1)) + r.offset) == nullptr;
    case kModuleName: {
      PyObject* now = PyDict_GetItemWithError(PyModule_GetDict(r.Item(1)), NameKey());  // borrowed
      PyErr_Clear();
      return Py_IS_TYPE(r.Item(1), &PyModule_Type) && now == r.Item(2);
    }
    default:
      return false;
  }
}

}  // namespace

std::shared_ptr<const ContentSnapshot> ContentSnapshot::Take() {
  Gil gil;
  auto snapshot = std::make_shared<ContentSnapshot>();
  PyObject* integrity = PyImport_ImportModule(accelopt::api::kIntegrityContentWatch.module);
  PyObject* listed =
      integrity ? PyObject_CallMethod(integrity, accelopt::api::kIntegrityContentWatch.function, nullptr) : nullptr;
  Py_XDECREF(integrity);
  if (listed == nullptr || !PyList_Check(listed)) {
    Py_XDECREF(listed);
    throw std::runtime_error("cannot record the cost model's content: " + PythonProblem());
  }
  (void)NameKey();
  try {
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(listed); ++i) {
      Record record;
      record.tuple = PyList_GET_ITEM(listed, i);
      Prepare(record, &snapshot->checkable_);
      Py_INCREF(record.tuple);
      snapshot->records_.push_back(std::move(record));
    }
  } catch (...) {
    Py_DECREF(listed);
    throw;
  }
  Py_DECREF(listed);
  return snapshot;
}

ContentSnapshot::~ContentSnapshot() = default;  // the records' references stay: they live as long as the worker

size_t ContentSnapshot::size() const { return records_.size(); }

bool ContentSnapshot::Unchanged() const {
  if (!checkable_) return false;
  Gil gil;
  for (const auto& record : records_) {
    if (!Holds(record)) return false;
  }
  return true;
}

}  // namespace accelopt::worker
