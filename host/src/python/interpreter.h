// interpreter.h - the one embedded CPython of this process.
//
// Python is initialised once (isolated config, pinned to the interpreter
// CMake found: /usr/bin/python3.11 with Debian's NumPy) and never finalised:
// NumPy cannot be re-imported after Py_Finalize. After Initialize() the
// calling thread releases the GIL for good; every call takes it back with
// python::Gil (PyGILState_Ensure, see gil.h), so any thread may call CallJson().
#pragma once

#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "accelopt/api_entries.hpp"

namespace accelopt::python {

/// A Python exception turned into C++ inside the GIL scope.
class PythonError : public std::runtime_error {
 public:
  PythonError(std::string type, const std::string& message, std::string traceback);
  const std::string& type() const { return type_; }
  const std::string& traceback() const { return traceback_; }
  /// {"kind": "python_error", "type", "message", "traceback"}.
  nlohmann::json ToJson() const;

 private:
  std::string type_;
  std::string traceback_;
};

/// Facts about the embedded interpreter, for run.json and --version.
struct InterpreterInfo {
  std::string executable;
  std::string version;
  std::string numpy_version;
  std::string numpy_file;
};

/// Starts the interpreter (idempotent). Puts SysPathEntries(extra_paths) at
/// the front of sys.path, routes sys.stdout/sys.stderr into spdlog and
/// imports NumPy eagerly. Throws PythonError if NumPy cannot be imported.
void Initialize(const std::vector<std::string>& extra_paths = {});

/// The folders ACCELOPT_PYTHON_PATH adds (colon-separated; empty entries and
/// the host's own folder skipped). They add to the host's folder, never replace it.
std::vector<std::string> EnvPythonPaths();

/// The PyPI packages' virtual environment (scripts/setup_pypi.sh: torch, flashinfer-bench,
/// triton): `<venv>/lib/pythonX.Y/site-packages` of $ACCELOPT_VENV (opt-in, e.g. the source tree's
/// `.venv`); "" when ACCELOPT_VENV is unset or empty or the folder does not exist. It goes on sys.path
/// ahead of the system's packages (Debian's NumPy etc. stay visible behind it).
std::string VenvSitePackages();

/// The sys.path entries the host adds, in order and without duplicates:
/// HostPythonDir(), then EnvPythonPaths(), then `extra_paths`, then VenvSitePackages().
std::vector<std::string> SysPathEntries(const std::vector<std::string>& extra_paths = {});


/// True once Initialize() succeeded.
bool IsInitialized();

/// The user's folders on sys.path (ACCELOPT_PYTHON_PATH's and the
/// `extra_paths` given to Initialize: a pipeline's python_path:, --python-path),
/// without the host's own folder; empty before Initialize. accel.python_call
/// lets Lua stages call functions defined in modules of these folders only
/// (besides the host's functions listed in LUA_CALLABLE).
std::vector<std::string> UserPythonPaths();

/// Returns `module.function(json.loads(arg))` as JSON (the function's
/// result must be JSON-serialisable). Thread-safe; takes the GIL.
/// Throws PythonError with the formatted traceback on any exception.
nlohmann::json CallJson(const std::string& module, const std::string& function, const nlohmann::json& arg);

/// Returns `module.function(*args, **kwargs)` as JSON, where `args` is a JSON
/// array and `kwargs` a JSON object. Thread-safe; takes the GIL. Throws
/// std::invalid_argument for other shapes and PythonError with the formatted
/// traceback on any Python exception.
nlohmann::json CallJsonArgs(const std::string& module, const std::string& function, const nlohmann::json& args,
                            const nlohmann::json& kwargs = nlohmann::json::object());

/// JSON plus binary attachments ("blobs": raw array bytes that must not
/// travel as text). Used between the trusted harness and the workers.
struct Packed {
  nlohmann::json value;
  std::vector<std::string> blobs;  ///< raw bytes, referenced from `value` by index
};

/// Calls `module.function(arg, blobs)`, where `arg` is `packed.value` as a
/// Python object and `blobs` a list of read-only buffer objects that take
/// over `packed.blobs` without copying; the function must return a
/// 2-tuple (JSON-serialisable value, list of C-contiguous buffer objects such
/// as bytes or ndarrays). Each returned buffer is copied once into the
/// result. Thread-safe; takes the GIL. Throws PythonError on any exception
/// or when the return value has the wrong shape.
Packed CallPacked(const std::string& module, const std::string& function, Packed packed);

/// CallPacked's result with the returned buffers not copied: `blobs` are views
/// of the Python buffer objects, valid while this object lives (its
/// destruction takes the GIL to release them). Lets a candidate process write
/// its outputs into the reply frame straight from the kernel's arrays.
struct PackedView {
  nlohmann::json value;
  std::vector<std::string_view> blobs;
  std::shared_ptr<void> owner;  ///< holds the Python buffers
};

/// As CallPacked, returning views of the returned buffers instead of copies.
PackedView CallPackedView(const std::string& module, const std::string& function, Packed packed);

/// The same calls naming an entry of the declared boundary (accelopt/api_entries.hpp) instead of
/// a module and a function: the only way host code calls into the accelopt package.
inline nlohmann::json CallJson(const accelopt::api::Entry& entry, const nlohmann::json& arg) {
  return CallJson(entry.module, entry.function, arg);
}
inline nlohmann::json CallJsonArgs(const accelopt::api::Entry& entry, const nlohmann::json& args,
                                   const nlohmann::json& kwargs = nlohmann::json::object()) {
  return CallJsonArgs(entry.module, entry.function, args, kwargs);
}
inline Packed CallPacked(const accelopt::api::Entry& entry, Packed packed) {
  return CallPacked(entry.module, entry.function, std::move(packed));
}
inline PackedView CallPackedView(const accelopt::api::Entry& entry, Packed packed) {
  return CallPackedView(entry.module, entry.function, std::move(packed));
}

/// Checks the host's entries (accelopt::api::kAll) against the Python tree's declaration
/// (accelopt.api.check): throws PythonError (type "ApiMismatch") listing every difference,
/// e.g. a host binary run against another checkout's host/python. Call after Initialize.
void CheckApi();

/// Runs Python source in __main__ (tests, one-off setup). Throws PythonError.
void Exec(const std::string& source);

/// Interpreter facts (executable, version, NumPy version and location).
InterpreterInfo Info();

/// The directory holding the host's Python packages (nki_emu, accelopt): the
/// source tree's host/python. ACCELOPT_PYTHON_PATH does not change it.
std::string HostPythonDir();

}  // namespace accelopt::python
