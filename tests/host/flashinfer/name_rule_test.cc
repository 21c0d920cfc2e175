// The one rule for FIB names that become path components
// (accelopt::fib::NameProblem, accelopt.fib.names): the same cases give the
// same answers in C++ and in Python (docs/flashinfer.md, "Names").
#include <catch2/catch.hpp>

#include <string>
#include <utility>
#include <vector>

#include "flashinfer/model.h"
#include "python/interpreter.h"

using namespace accelopt::fib;
using nlohmann::json;

namespace {

// The same cases as tests/python/fib/test_fib_hardening.py (NAME_CASES).
const std::vector<std::pair<std::string, bool>>& NameCases() {
  static const std::vector<std::pair<std::string, bool>> cases = {
      {"rmsnorm_h16", true}, {"gpt-o3_triton_4c9c32", true}, {"claude-opus-4.1_cuda_0a1b2c", true},
      {"AccelOpt", true}, {"a+b", true}, {std::string(128, 'x'), true},
      {"", false}, {"..", false}, {".", false}, {"a..b", false}, {"../escape", false}, {"/etc/passwd", false},
      {"a/b", false}, {"a\\b", false}, {std::string("nul\0byte", 8), false}, {".hidden", false}, {"-rf", false},
      {"new\nline", false}, {"sp ace", false}, {std::string(129, 'x'), false}, {"caf\xc3\xa9", false},
  };
  return cases;
}

}  // namespace

TEST_CASE("fib names: one rule in C++ and Python for names that become path components", "[flashinfer]") {
  for (const auto& [name, safe] : NameCases()) {
    INFO(json(name).dump());
    auto problem = NameProblem(name);
    CHECK(problem.has_value() == !safe);
    json python = accelopt::python::CallJson("accelopt.fib.names", "problem", name);
    CHECK(python.is_null() == safe);
    if (safe) {
      CHECK(PathComponent(name, "author") == name);
    } else {
      CHECK_THROWS_WITH(PathComponent(name, "solution.author"), Catch::Contains("solution.author"));
    }
  }
}

