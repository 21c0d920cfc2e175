// dict_version.h - a dict's modification counter (PEP 509), for the worker's
// integrity checks (identity_check.h, content_check.h).
//
// CPython gives every dict a version tag that takes a new, never reused value
// from a process-wide counter on each modification (insert, delete, replace
// by another object, clear). A candidate process is a fork of the worker, so
// a tag still equal to the one recorded in the worker means the dict was not
// modified: its items need no walk. Python code cannot set the tag.
#pragma once

#include <Python.h>

#include <cstdint>

namespace accelopt::worker {

/// The version tag of `dict` (a dict object), or 0 where this CPython has no
/// usable tag (3.12 turned it into a private field): callers then compare items.
inline uint64_t DictVersion(PyObject* dict) {
#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000
  return reinterpret_cast<PyDictObject*>(dict)->ma_version_tag;
#else
  (void)dict;
  return 0;
#endif
}

}  // namespace accelopt::worker
