#include <catch2/catch.hpp>
#include <cstdlib>
#include <string>
#include <thread>

#include <Python.h>

#include "python/interpreter.h"

using namespace accelopt;

TEST_CASE("embedded Python is Debian's python3.11 with Debian's NumPy", "[python]") {
  auto info = python::Info();
  CHECK(info.executable == ACCEL_PYTHON_EXECUTABLE);
  CHECK(info.version.rfind("3.11", 0) == 0);
  CHECK(info.numpy_file.rfind("/usr/lib/python3/dist-packages/numpy", 0) == 0);
}

TEST_CASE("CallJson round-trips JSON through a Python function", "[python]") {
  python::Exec("import types, sys\nm = types.ModuleType('t_echo')\nexec('def f(x):\\n    return {\"n\": x[\"n\"] * 2, \"s\": [1, None]}', m.__dict__)\nsys.modules['t_echo'] = m\n");
  auto out = python::CallJson("t_echo", "f", {{"n", 21}});
  CHECK(out["n"] == 42);
  CHECK(out["s"][1].is_null());
}

TEST_CASE("Python exceptions become PythonError with a traceback", "[python]") {
  python::Exec("import types, sys\nm = types.ModuleType('t_bad')\nexec('def f(x):\\n    raise ValueError(\"boom\")', m.__dict__)\nsys.modules['t_bad'] = m\n");
  try {
    python::CallJson("t_bad", "f", nullptr);
    FAIL("expected PythonError");
  } catch (const python::PythonError& error) {
    CHECK(error.type() == "ValueError");
    CHECK(std::string(error.what()).find("boom") != std::string::npos);
    CHECK(error.traceback().find("Traceback") != std::string::npos);
  }
}

TEST_CASE("Python calls from several threads are serialised by the GIL", "[python]") {
  python::Exec("import types, sys\nm = types.ModuleType('t_np')\nexec('import numpy as np\\ndef f(n):\\n    a = np.ones((n, n), np.float32)\\n    return float((a @ a).sum())', m.__dict__)\nsys.modules['t_np'] = m\n");
  std::vector<std::thread> threads;
  std::vector<double> sums(4);
  for (int i = 0; i < 4; ++i) threads.emplace_back([&, i] { sums[i] = python::CallJson("t_np", "f", 64).get<double>(); });
  for (auto& t : threads) t.join();
  for (double s : sums) CHECK(s == 64.0 * 64 * 64);
}

TEST_CASE("CallJsonArgs passes positional and keyword arguments", "[python]") {
  using nlohmann::json;
  CHECK(accelopt::python::CallJsonArgs("json", "dumps", json::array({{{"b", 1}, {"a", 2}}}), {{"sort_keys", true}}) ==
        "{\"a\": 2, \"b\": 1}");
  CHECK(accelopt::python::CallJsonArgs("builtins", "max", json::array({3, 9, 4})) == 9);
  CHECK_THROWS_AS(accelopt::python::CallJsonArgs("builtins", "max", json::object()), std::invalid_argument);
  CHECK_THROWS_WITH(accelopt::python::CallJsonArgs("builtins", "max", json::array()), Catch::Contains("TypeError: max expected at least 1 argument"));
}

TEST_CASE("ACCELOPT_PYTHON_PATH adds folders to the host's own, never replaces it", "[python]") {
  namespace py = accelopt::python;
  ::setenv("ACCELOPT_PYTHON_PATH", ("/tmp/a::/tmp/b:" + py::HostPythonDir()).c_str(), 1);
  ::setenv("ACCELOPT_VENV", "", 1);  // no PyPI environment
  auto entries = py::SysPathEntries({"/tmp/c", "/tmp/a"});
  ::unsetenv("ACCELOPT_PYTHON_PATH");
  ::unsetenv("ACCELOPT_VENV");
  CHECK(entries == std::vector<std::string>{py::HostPythonDir(), "/tmp/a", "/tmp/b", "/tmp/c"});
  CHECK(py::HostPythonDir() == ACCELOPT_PYTHON_DIR);
}

TEST_CASE("the PyPI virtual environment's site-packages follow the host's folders", "[python]") {
  namespace py = accelopt::python;
  std::string venv = "/tmp/accelopt-venv-test";
  std::string site = venv + "/lib/python" + std::to_string(PY_MAJOR_VERSION) + "." +
                     std::to_string(PY_MINOR_VERSION) + "/site-packages";
  std::system(("mkdir -p " + site).c_str());
  ::setenv("ACCELOPT_VENV", venv.c_str(), 1);
  auto entries = py::SysPathEntries({"/tmp/c"});
  ::setenv("ACCELOPT_VENV", "/tmp/accelopt-venv-missing", 1);
  auto missing = py::SysPathEntries({"/tmp/c"});
  ::unsetenv("ACCELOPT_VENV");
  CHECK(entries == std::vector<std::string>{py::HostPythonDir(), "/tmp/c", site});
  CHECK(missing == std::vector<std::string>{py::HostPythonDir(), "/tmp/c"});
}

TEST_CASE("with ACCELOPT_API_VALIDATE=1 a call that breaks its entry's schema fails before the call", "[python][api]") {
  const char* on = std::getenv("ACCELOPT_API_VALIDATE");
  if (on == nullptr || std::string(on) != "1") {
    WARN("skipped: ACCELOPT_API_VALIDATE is not 1 (scripts/test.sh sets it)");
    return;
  }
  // rules.apply's schema requires "source".
  try {
    python::CallJson(accelopt::api::kRulesApply, {{"plan", nlohmann::json::object()}});
    FAIL("the call passed");
  } catch (const python::PythonError& error) {
    CHECK_THAT(error.what(), Catch::Contains("breaks its contract") && Catch::Contains("'source' is a required property"));
  }
  // A call that keeps the contract runs (and answers with its own error for a bad plan).
  auto out = python::CallJson(accelopt::api::kRulesApply, {{"source", "x = 1\n"}, {"plan", nlohmann::json::object()}});
  CHECK(out.contains("error"));
}
