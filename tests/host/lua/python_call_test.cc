// accel.python_call: Lua stages call the embedded Python with positional and
// keyword arguments; Python exceptions fail the stage as python_error.
#include <catch2/catch.hpp>

#include "lua/stage_script.h"

using accelopt::lua::HostHooks;
using accelopt::lua::LuaError;
using accelopt::lua::RunStageFromSource;
using nlohmann::json;

namespace {

json Run(const std::string& body) {
  return RunStageFromSource("return function(input)\n" + body + "\nend\n", "p.lua", json::object(), HostHooks{});
}

}  // namespace

TEST_CASE("accel.python_call passes args and kwargs and returns JSON", "[lua][python]") {
  CHECK(Run("return { s = accel.python_call('json', 'dumps', { {b = 1, a = 2} }, { sort_keys = true }) }")["s"] ==
        "{\"a\": 2, \"b\": 1}");
  CHECK(Run("return { m = accel.python_call('builtins', 'max', {3, 9, 4}) }")["m"] == 9);
  CHECK(Run("return { n = accel.python_call('builtins', 'len', {accel.array()}) }")["n"] == 0);
}

TEST_CASE("accel.python_call failures carry kind python_error", "[lua][python]") {
  try {
    Run("accel.python_call('json', 'loads', {'not json'})");
    FAIL("expected LuaError");
  } catch (const LuaError& error) {
    CHECK(error.kind == "stage_failure");
    CHECK(error.details["kind"] == "python_error");
    CHECK_THAT(error.details["message"].get<std::string>(), Catch::Contains("json.loads: JSONDecodeError"));
  }
  CHECK(Run("local ok, err = pcall(accel.python_call, 'no_such_module_xyz', 'f')\nreturn { kind = err.kind }")["kind"] ==
        "python_error");
  CHECK_THROWS_WITH(Run("accel.python_call('json', 'dumps', 'x')"), Catch::Contains("args must be a list"));
}
