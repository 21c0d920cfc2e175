// accel.python_call: Lua stages call the embedded Python with positional and
// keyword arguments; Python exceptions fail the stage as python_error. Only
// the host's own functions listed in LUA_CALLABLE and the modules of the
// user's python_path folders are callable (tests/python is such a folder in
// this binary: tests/python/lua_call_helpers.py).
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>

#include "lua/stage_script.h"
#include "support/test_support.h"

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
  CHECK(Run("return { s = accel.python_call('lua_call_helpers', 'dumps', { {b = 1, a = 2} }, { sort_keys = true }) }")["s"] ==
        "{\"a\": 2, \"b\": 1}");
  CHECK(Run("return { m = accel.python_call('lua_call_helpers', 'largest', {3, 9, 4}) }")["m"] == 9);
  CHECK(Run("return { n = accel.python_call('lua_call_helpers', 'count', {accel.array()}) }")["n"] == 0);
  // A function of the host's own package that its module lists in LUA_CALLABLE.
  CHECK(Run("return { d = accel.python_call('accelopt.edits', 'looks_like_diff', {'@@ -1 +1 @@'}) }")["d"] == true);
}

TEST_CASE("accel.python_call failures carry kind python_error", "[lua][python]") {
  try {
    Run("accel.python_call('lua_call_helpers', 'parse', {'not json'})");
    FAIL("expected LuaError");
  } catch (const LuaError& error) {
    CHECK(error.kind == "stage_failure");
    CHECK(error.details["kind"] == "python_error");
    CHECK_THAT(error.details["message"].get<std::string>(), Catch::Contains("lua_call_helpers.parse: JSONDecodeError"));
  }
  // A module that is nowhere: not in a python_path folder, so not callable.
  CHECK(Run("local ok, err = pcall(accel.python_call, 'no_such_module_xyz', 'f')\nreturn { kind = err.kind }")["kind"] ==
        "forbidden_call");
  CHECK_THROWS_WITH(Run("accel.python_call('lua_call_helpers', 'dumps', 'x')"), Catch::Contains("args must be a list"));
}

namespace {

// The failure {kind, message} of a refused call, caught in Lua.
json Refused(const std::string& call) {
  return Run("local ok, err = pcall(" + call + ")\n"
             "if ok then return { kind = 'none', message = tostring(err) } end\n"
             "return { kind = err.kind, message = err.message }");
}

}  // namespace

TEST_CASE("accel.python_call cannot reach os, subprocess or builtins (issue 34)", "[lua][python][security]") {
  accelopt::testing::TempDir dir;
  const auto marker = dir.path() / "pwned";
  const std::string quoted = "'touch " + marker.string() + "'";
  for (const std::string& call : std::vector<std::string>{
           "accel.python_call, 'os', 'system', {" + quoted + "}",
        "accel.python_call, 'subprocess', 'check_call', {{'touch', '" + marker.string() + "'}}",
        "accel.python_call, 'builtins', 'exec', {\"open('" + marker.string() + "', 'w')\"}",
        "accel.python_call, 'importlib', 'import_module', {'os'}",
        "accel.python_call, 'posix', 'system', {" + quoted + "}",
        // re-exported by an allowed module: still os.system
        "accel.python_call, 'lua_call_helpers', 'run_shell', {" + quoted + "}",
        // the host's own package, but not listed in LUA_CALLABLE (it runs a kernel file as Python)
        "accel.python_call, 'accelopt.profile', 'profile_kernel', {{kernel = '/dev/null'}}",
        // imports the module at `reference` (a file the stage could write) to read its peak_work()
        "accel.python_call, 'accelopt.peak', 'describe', {{problem = 'silu', values = {}, reference = '/dev/null'}}",
        "accel.python_call, 'accelopt.edits', '_HUNK'",
        "accel.python_call, 'accelopt.edits', 're'",
        "accel.python_call, 'os.path', 'exists', {'/'}",
        "accel.python_call, 'lua_call_helpers', 'json'",
        "accel.python_call, '..os', 'system', {" + quoted + "}"}) {
    INFO(call);
    json out = Refused(call);
    CHECK(out["kind"] == "forbidden_call");
    CHECK_THAT(out["message"].get<std::string>(), Catch::Contains("not callable from Lua"));
  }
  CHECK_FALSE(std::filesystem::exists(marker));
}

TEST_CASE("accel.python_call cannot read the API key from the environment (issue 34)", "[lua][python][security]") {
  ::setenv("ACCELOPT_LLM_API_KEY", "sk-secret-from-env-1234", 1);
  ::setenv("OPENAI_API_KEY", "sk-openai-secret-5678", 1);
  json out = Run(
      "local seen = {}\n"
      "for _, call in ipairs({ {'os', 'getenv'}, {'posix', 'getenv'}, {'os', 'getenvb'} }) do\n"
      "  for _, name in ipairs({'ACCELOPT_LLM_API_KEY', 'OPENAI_API_KEY'}) do\n"
      "    local ok, value = pcall(accel.python_call, call[1], call[2], {name})\n"
      "    seen[#seen + 1] = ok and tostring(value) or value.kind\n"
      "  end\n"
      "end\n"
      "return { seen = table.concat(seen, ',') }");
  ::unsetenv("ACCELOPT_LLM_API_KEY");
  ::unsetenv("OPENAI_API_KEY");
  const std::string seen = out["seen"];
  CHECK(seen.find("secret") == std::string::npos);
  CHECK(seen == "forbidden_call,forbidden_call,forbidden_call,forbidden_call,forbidden_call,forbidden_call");
}
