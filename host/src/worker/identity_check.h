// identity_check.h - rule R5's identity check without touching objects.
//
// A candidate process is a fork of the worker: every Python object it
// merely *reads* through Python code gets its reference count written, which
// copies the page holding it (copy-on-write). Comparing thousands of module
// attributes that way costs milliseconds per candidate. This check walks
// the same namespaces with CPython's borrowed-reference API (PyDict_Next,
// PyFunction_GET_CODE), which writes nothing, and leaves the detailed
// report to Python (accelopt.sandbox.integrity.compare) when it finds a
// difference.
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace accelopt::worker {

/// The watched modules' namespaces as recorded in the worker (zygote).
class NamespaceSnapshot {
 public:
  /// Records every module accelopt.sandbox.integrity.watched_modules()
  /// returns: the module object, its namespace dict, every key and value in
  /// order, and the code object and defaults of every Python function in
  /// it. Holds strong references, so no recorded address can be reused.
  /// Takes the GIL. Throws std::runtime_error when Python fails.
  static std::shared_ptr<const NamespaceSnapshot> Take();

  /// True when every recorded module is still sys.modules[name], its
  /// namespace holds the same keys and values (by identity, in order), and
  /// every recorded function keeps its code object and defaults. False says
  /// only that something differs (a new submodule imported lazily does);
  /// integrity.compare() decides whether it matters. Takes the GIL.
  bool Unchanged() const;

  struct Module;  ///< one recorded module (identity_check.cc)

 private:
  std::vector<std::unique_ptr<Module>> modules_;
};

}  // namespace accelopt::worker
