#include "python/interpreter.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <sstream>

#include <sys/stat.h>

#include <pybind11/embed.h>
#include "python/gil.h"
#include <spdlog/spdlog.h>

namespace py = pybind11;

// Read-only bytes owned by C++ (a frame's attachment), handed to Python
// without copying: NumPy views them through the buffer protocol, and the
// Python object keeps them alive for as long as any view exists.
struct PyBlob {
  std::string bytes;
};

// sys.stdout / sys.stderr replacement: whole lines go to spdlog.
PYBIND11_EMBEDDED_MODULE(_accelopt_host, m) {
  struct LogWriter {
    int level;
    std::string pending;
    void Write(const std::string& text) {
      pending += text;
      size_t newline;
      while ((newline = pending.find('\n')) != std::string::npos) {
        spdlog::log(static_cast<spdlog::level::level_enum>(level), "[py] {}", pending.substr(0, newline));
        pending.erase(0, newline + 1);
      }
    }
  };
  py::class_<PyBlob>(m, "Blob", py::buffer_protocol())
      .def_buffer([](PyBlob& blob) {
        return py::buffer_info(blob.bytes.data(), 1, py::format_descriptor<uint8_t>::format(), 1,
                               {static_cast<py::ssize_t>(blob.bytes.size())}, {1}, /*readonly=*/true);
      })
      .def("__len__", [](const PyBlob& blob) { return blob.bytes.size(); });
  py::class_<LogWriter>(m, "LogWriter")
      .def(py::init([](int level) { return LogWriter{level, {}}; }))
      .def("write", [](LogWriter& self, const std::string& text) { self.Write(text); return text.size(); })
      .def("flush", [](LogWriter& self) {
        if (!self.pending.empty()) self.Write("\n");
      })
      .def("isatty", [](LogWriter&) { return false; })
      .def_property_readonly("encoding", [](LogWriter&) { return "utf-8"; });
}

namespace accelopt::python {
namespace {

std::once_flag g_init_once;
bool g_initialized = false;
std::vector<std::string> g_user_paths;  // set once by Initialize

// Formats the pending Python exception; must run with the GIL held.
PythonError ConvertError(py::error_already_set& error) {
  std::string type = "Exception";
  std::string message = error.what();
  std::string traceback;
  try {
    type = py::str(error.type().attr("__name__"));
    message = py::str(error.value());
    py::object format = py::module_::import("traceback").attr("format_exception");
    py::list lines = format(error.type(), error.value(), error.trace());
    for (auto line : lines) traceback += py::str(line).cast<std::string>();
  } catch (...) {
    // Keep what we have; formatting a traceback must never mask the error.
  }
  return PythonError(type, message, traceback);
}

}  // namespace

PythonError::PythonError(std::string type, const std::string& message, std::string traceback)
    : std::runtime_error(type + ": " + message), type_(std::move(type)), traceback_(std::move(traceback)) {}

nlohmann::json PythonError::ToJson() const {
  return {{"kind", "python_error"}, {"type", type_}, {"message", what()}, {"traceback", traceback_}};
}

std::string HostPythonDir() { return ACCELOPT_PYTHON_DIR; }

std::vector<std::string> EnvPythonPaths() {
  std::vector<std::string> paths;
  const char* env = std::getenv("ACCELOPT_PYTHON_PATH");
  if (env == nullptr) return paths;
  std::stringstream parts(env);
  for (std::string part; std::getline(parts, part, ':');) {
    if (!part.empty() && part != HostPythonDir()) paths.push_back(part);
  }
  return paths;
}

std::string VenvSitePackages() {
  const char* env = std::getenv("ACCELOPT_VENV");
  // Opt-in: the venv is 8.3 GB that only the FlashInfer path needs. Workers get the
  // variable too (worker_process.cc), so they import the same torch as the host.
  if (env == nullptr || *env == '\0') return "";
  std::string venv = env;
  std::string site = venv + "/lib/python" + std::to_string(PY_MAJOR_VERSION) + "." +
                     std::to_string(PY_MINOR_VERSION) + "/site-packages";
  struct stat info {};
  if (::stat(site.c_str(), &info) != 0 || !S_ISDIR(info.st_mode)) return "";
  return site;
}

std::vector<std::string> SysPathEntries(const std::vector<std::string>& extra_paths) {
  std::vector<std::string> entries{HostPythonDir()};
  for (const auto& path : EnvPythonPaths()) entries.push_back(path);
  for (const auto& path : extra_paths) entries.push_back(path);
  if (auto site = VenvSitePackages(); !site.empty()) entries.push_back(site);
  std::vector<std::string> unique;
  for (const auto& entry : entries) {
    if (std::find(unique.begin(), unique.end(), entry) == unique.end()) unique.push_back(entry);
  }
  return unique;
}

void Initialize(const std::vector<std::string>& extra_paths) {
  std::call_once(g_init_once, [&] {
    PyConfig config;
    PyConfig_InitIsolatedConfig(&config);
    config.install_signal_handlers = 0;  // the host owns SIGINT/SIGTERM
    config.write_bytecode = 0;
    // Without this, sys.executable resolves through PATH to a pyenv shim.
    PyConfig_SetBytesString(&config, &config.executable, ACCEL_PYTHON_EXECUTABLE);
    // Never destroyed: finalising would break a later NumPy import.
    new py::scoped_interpreter(&config, 0, nullptr, false);
    {
      py::module_ sys = py::module_::import("sys");
      py::list path = sys.attr("path");
      auto entries = SysPathEntries(extra_paths);
      for (auto it = entries.rbegin(); it != entries.rend(); ++it) path.insert(0, *it);
      py::module_ host = py::module_::import("_accelopt_host");
      sys.attr("stdout") = host.attr("LogWriter")(static_cast<int>(spdlog::level::info));
      sys.attr("stderr") = host.attr("LogWriter")(static_cast<int>(spdlog::level::warn));
      try {
        py::module_::import("numpy");
      } catch (py::error_already_set& error) {
        throw ConvertError(error);
      }
    }
    for (const auto& entry : SysPathEntries(extra_paths)) {
      if (entry != HostPythonDir()) g_user_paths.push_back(entry);
    }
    PyEval_SaveThread();  // release the GIL for the rest of the process
    g_initialized = true;
  });
  if (!g_initialized) throw PythonError("RuntimeError", "embedded Python failed to initialise", "");
}

bool IsInitialized() { return g_initialized; }

void CheckApi() {
  nlohmann::json table = nlohmann::json::array();
  for (const auto& entry : accelopt::api::kAll) {
    table.push_back({{"name", entry.name}, {"module", entry.module}, {"function", entry.function},
                     {"version", entry.version}});
  }
  nlohmann::json problems = CallJson(accelopt::api::kModule, "check", table);
  if (!problems.is_array() || problems.empty()) return;
  std::string text = "this host and the Python tree it loads (" + HostPythonDir() + ") disagree on the boundary:";
  for (const auto& problem : problems) {
    text += "\n  " + (problem.is_string() ? problem.get<std::string>() : problem.dump());
  }
  throw PythonError("ApiMismatch", text, "");
}

std::vector<std::string> UserPythonPaths() { return g_initialized ? g_user_paths : std::vector<std::string>{}; }

namespace {

// Python's json emits NaN/Infinity, which nlohmann rejects: map to null.
nlohmann::json ParsePythonJson(std::string text) {
  auto parsed = nlohmann::json::parse(text, nullptr, false, true);
  if (!parsed.is_discarded()) return parsed;
  for (const char* token : {"-Infinity", "Infinity", "NaN"}) {
    for (size_t pos; (pos = text.find(token)) != std::string::npos;) text.replace(pos, std::strlen(token), "null");
  }
  return nlohmann::json::parse(text);
}

// Copies a C-contiguous buffer object into bytes; must run with the GIL held.
std::string BufferBytes(const py::handle& object) {
  Py_buffer view;
  if (PyObject_GetBuffer(object.ptr(), &view, PyBUF_C_CONTIGUOUS) != 0) throw py::error_already_set();
  std::string bytes(static_cast<const char*>(view.buf), static_cast<size_t>(view.len));
  PyBuffer_Release(&view);
  return bytes;
}

// module.function(value, blobs) for CallPacked and CallPackedView, with the
// GIL held: hands the packed blobs over (packed.blobs is left empty), checks
// the (value, blobs) reply, writes the value's JSON text to *text and
// returns the reply's blobs object. Throws py::error_already_set or
// PythonError.
py::object CallWithBlobs(const std::string& module, const std::string& function, Packed& packed, std::string* text) {
  py::module_ json = py::module_::import("json");
  py::object fn = py::module_::import(module.c_str()).attr(function.c_str());
  py::list blobs;
  py::module_::import("_accelopt_host");  // registers the Blob type
  for (auto& blob : packed.blobs) blobs.append(py::cast(PyBlob{std::move(blob)}));
  packed.blobs.clear();
  py::object value = fn(json.attr("loads")(packed.value.dump()), blobs);
  if (!py::isinstance<py::tuple>(value) || py::len(value) != 2)
    throw PythonError("TypeError", module + "." + function + " must return (value, blobs)", "");
  py::tuple pair = value.cast<py::tuple>();
  *text = json.attr("dumps")(pair[0], py::arg("allow_nan") = true).cast<std::string>();
  return pair[1];
}

}  // namespace

Packed CallPacked(const std::string& module, const std::string& function, Packed packed) {
  std::string text;
  Packed out;
  {
    Gil gil;
    try {
      py::object returned = CallWithBlobs(module, function, packed, &text);
      for (auto blob : returned) out.blobs.push_back(BufferBytes(blob));
    } catch (py::error_already_set& error) {
      throw ConvertError(error);
    }
  }
  out.value = ParsePythonJson(std::move(text));
  return out;
}

namespace {

// Python buffers exported for a PackedView; released with the GIL held.
struct HeldBuffers {
  std::vector<Py_buffer> views;
  ~HeldBuffers() {
    if (views.empty() || !Py_IsInitialized()) return;
    Gil gil;
    for (auto& view : views) PyBuffer_Release(&view);
  }
};

}  // namespace

PackedView CallPackedView(const std::string& module, const std::string& function, Packed packed) {
  std::string text;
  PackedView out;
  auto held = std::make_shared<HeldBuffers>();
  {
    Gil gil;
    try {
      py::object returned = CallWithBlobs(module, function, packed, &text);
      held->views.reserve(py::len(returned));
      for (auto blob : returned) {
        Py_buffer view;
        if (PyObject_GetBuffer(blob.ptr(), &view, PyBUF_C_CONTIGUOUS) != 0) throw py::error_already_set();
        held->views.push_back(view);
      }
    } catch (py::error_already_set& error) {
      throw ConvertError(error);
    }
  }
  for (const auto& view : held->views)
    out.blobs.emplace_back(static_cast<const char*>(view.buf), static_cast<size_t>(view.len));
  out.owner = held;
  out.value = ParsePythonJson(std::move(text));
  return out;
}

// ACCELOPT_API_VALIDATE=1 (the test suite's setting): every JSON call into an entry of the
// declared boundary is checked against the entry's schema first (accelopt.api.validate_call).
static bool ValidateApiCalls() {
  static const bool on = [] {
    const char* value = std::getenv("ACCELOPT_API_VALIDATE");
    return value != nullptr && std::string(value) == "1";
  }();
  return on;
}

nlohmann::json CallJson(const std::string& module, const std::string& function, const nlohmann::json& arg) {
  std::string result;
  {
    Gil gil;
    try {
      py::module_ json = py::module_::import("json");
      py::object loaded = json.attr("loads")(arg.dump());
      if (ValidateApiCalls() && module.rfind("accelopt.", 0) == 0)
        py::module_::import(accelopt::api::kModule).attr("validate_call")(module, function, loaded);
      py::object fn = py::module_::import(module.c_str()).attr(function.c_str());
      py::object value = fn(loaded);
      result = json.attr("dumps")(value, py::arg("allow_nan") = true).cast<std::string>();
    } catch (py::error_already_set& error) {
      throw ConvertError(error);
    }
  }
  return ParsePythonJson(std::move(result));
}

nlohmann::json CallJsonArgs(const std::string& module, const std::string& function, const nlohmann::json& args,
                            const nlohmann::json& kwargs) {
  if (!args.is_array()) throw std::invalid_argument(module + "." + function + ": positional arguments must be a JSON array");
  if (!kwargs.is_object()) throw std::invalid_argument(module + "." + function + ": keyword arguments must be a JSON object");
  std::string result;
  {
    Gil gil;
    try {
      py::module_ json = py::module_::import("json");
      py::object fn = py::module_::import(module.c_str()).attr(function.c_str());
      py::tuple positional(json.attr("loads")(args.dump()));
      py::dict keywords(json.attr("loads")(kwargs.dump()));
      py::object value = fn(*positional, **keywords);
      result = json.attr("dumps")(value, py::arg("allow_nan") = true).cast<std::string>();
    } catch (py::error_already_set& error) {
      throw ConvertError(error);
    }
  }
  return ParsePythonJson(std::move(result));
}

void Exec(const std::string& source) {
  Gil gil;
  try {
    py::exec(source);
  } catch (py::error_already_set& error) {
    throw ConvertError(error);
  }
}

InterpreterInfo Info() {
  Gil gil;
  InterpreterInfo info;
  py::module_ sys = py::module_::import("sys");
  info.executable = py::str(sys.attr("executable"));
  info.version = py::str(sys.attr("version")).cast<std::string>().substr(0, 6);
  py::module_ numpy = py::module_::import("numpy");
  info.numpy_version = py::str(numpy.attr("__version__"));
  info.numpy_file = py::str(numpy.attr("__file__"));
  return info;
}

}  // namespace accelopt::python
