// The one test binary: starts Python once (NumPy cannot be re-imported after
// finalisation), registers every tests/python/**/test_*.py function as a
// Catch2 test case tagged [python], then runs Catch2.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <deque>
#include <string>

#include <pybind11/embed.h>
#include <spdlog/spdlog.h>

#include "python/gil.h"
#include "python/interpreter.h"

namespace py = pybind11;

namespace {

// Runs one Python test function through tests/python/runner.py.
class PythonTestInvoker : public Catch::ITestInvoker {
 public:
  PythonTestInvoker(std::string file, std::string function) : file_(std::move(file)), function_(std::move(function)) {}
  void invoke() const override {
    try {
      accelopt::python::Gil gil;
      py::module_::import("runner").attr("run_one")(file_, function_);
    } catch (py::error_already_set& error) {
      std::string text;
      {
        accelopt::python::Gil gil;
        py::list lines = py::module_::import("traceback").attr("format_exception")(error.type(), error.value(), error.trace());
        for (auto line : lines) text += py::str(line).cast<std::string>();
      }
      FAIL(text);
    }
  }

 private:
  std::string file_;
  std::string function_;
};

std::deque<std::string> g_names;  // Catch2 keeps StringRefs: names must outlive the session

void RegisterPythonTests() {
  accelopt::python::Gil gil;
  py::list tests = py::module_::import("runner").attr("discover")();
  for (auto entry : tests) {
    auto pair = entry.cast<std::pair<std::string, std::string>>();
    g_names.push_back("python: " + pair.first + "::" + pair.second);
    new Catch::AutoReg(new PythonTestInvoker(pair.first, pair.second), CATCH_INTERNAL_LINEINFO, "",
                       Catch::NameAndTags{g_names.back(), "[python]"});
  }
}

}  // namespace

int main(int argc, char* argv[]) {
  spdlog::set_level(spdlog::level::warn);
  accelopt::python::Initialize({std::string(ACCELOPT_TEST_DIR) + "/python"});
  RegisterPythonTests();
  int failed = Catch::Session().run(argc, argv);
  // The interpreter is never finalised (interpreter.cc), so Python's atexit handlers would
  // not run: run them here, which removes the Python tests' temporary folders.
  {
    accelopt::python::Gil gil;
    py::module_::import("atexit").attr("_run_exitfuncs")();
  }
  return failed;
}
