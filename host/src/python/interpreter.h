// interpreter.h - the one embedded CPython of this process.
//
// Python is initialised once (isolated config, pinned to the interpreter
// CMake found: /usr/bin/python3.11 with Debian's NumPy) and never finalised:
// NumPy cannot be re-imported after Py_Finalize. After Initialize() the
// calling thread releases the GIL for good; every call takes it back with
// pybind11::gil_scoped_acquire, so any thread may call CallJson().
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

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

/// Starts the interpreter (idempotent). Adds the host's Python directory
/// (ACCELOPT_PYTHON_PATH, else the source tree's host/python) and
/// `extra_paths` to sys.path, routes sys.stdout/sys.stderr into spdlog and
/// imports NumPy eagerly. Throws PythonError if NumPy cannot be imported.
void Initialize(const std::vector<std::string>& extra_paths = {});

/// True once Initialize() succeeded.
bool IsInitialized();

/// Returns `module.function(json.loads(arg))` as JSON (the function's
/// result must be JSON-serialisable). Thread-safe; takes the GIL.
/// Throws PythonError with the formatted traceback on any exception.
nlohmann::json CallJson(const std::string& module, const std::string& function, const nlohmann::json& arg);

/// Runs Python source in __main__ (tests, one-off setup). Throws PythonError.
void Exec(const std::string& source);

/// Interpreter facts (executable, version, NumPy version and location).
InterpreterInfo Info();

/// The directory holding the host's Python packages (nki_emu, accelopt).
std::string HostPythonDir();

}  // namespace accelopt::python
