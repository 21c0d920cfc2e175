// Lua stage scripts: contract, errors with locations and tracebacks,
// accel.fail, logging and the accel.fs sandbox.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "lua/stage_script.h"

namespace fs = std::filesystem;
using accelopt::lua::HostHooks;
using accelopt::lua::LoadStageInfo;
using accelopt::lua::LoadStageInfoFromSource;
using accelopt::lua::LuaError;
using accelopt::lua::RunStage;
using accelopt::lua::RunStageFromSource;
using nlohmann::json;

namespace {

/// A fresh directory under the system temp dir, removed at scope exit.
struct TempDir {
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "accelopt-lua-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path = fs::canonical(pattern);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  fs::path path;
};

void WriteFile(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

template <typename Fn>
LuaError ExpectLuaError(Fn&& fn) {
  try {
    fn();
  } catch (const LuaError& e) {
    return e;
  }
  FAIL("expected a LuaError");
  throw std::logic_error("unreachable");
}

}  // namespace

TEST_CASE("lua stage: run receives the input and returns outputs", "[lua][stage]") {
  TempDir dir;
  WriteFile(dir.path / "double.lua", R"(-- doubles with.n
return {
  description = "Doubles a number.",
  params = { n = { type = "integer", required = true, doc = "the number" } },
  run = function(input)
    return { doubled = input.with.n * 2, id = input.stage_id, half = input.with.n / 2 }
  end,
}
)");
  json input = {{"with", {{"n", 21}}}, {"vars", json::object()}, {"stage_id", "double"}};
  json out = RunStage(dir.path / "double.lua", input, HostHooks{});
  CHECK(out == json{{"doubled", 42}, {"id", "double"}, {"half", 10.5}});
  CHECK(out["doubled"].is_number_integer());

  auto info = LoadStageInfo(dir.path / "double.lua");
  CHECK(info.description == "Doubles a number.");
  CHECK(info.params == json::parse(R"({"n": {"type": "integer", "required": true, "doc": "the number"}})"));
}

TEST_CASE("lua stage: the function form and nil outputs", "[lua][stage]") {
  CHECK(RunStageFromSource("return function(input) return {ok = true} end", "f.lua", json::object(), {}) ==
        json{{"ok", true}});
  CHECK(RunStageFromSource("return { run = function() end }", "f.lua", json::object(), {}) == json::object());
  auto info = LoadStageInfoFromSource("return function() end", "f.lua");
  CHECK(info.description.empty());
  CHECK(info.params == json::object());
}

TEST_CASE("lua stage: scripts that break the contract", "[lua][stage]") {
  LuaError e = ExpectLuaError([] { RunStageFromSource("return 42", "bad.lua", json::object(), {}); });
  CHECK(e.kind == "script_error");
  CHECK_THAT(e.what(), Catch::Contains("bad.lua: the script must return a table"));
  CHECK_THAT(e.what(), Catch::Contains("it returned number"));

  e = ExpectLuaError([] { LoadStageInfoFromSource("return { description = 'x' }", "norun.lua"); });
  CHECK(e.kind == "script_error");
  CHECK_THAT(e.what(), Catch::Contains("norun.lua: the returned table has no 'run' function"));

  e = ExpectLuaError([] {
    LoadStageInfoFromSource("return { params = { n = { type = 'int' } }, run = function() end }", "p.lua");
  });
  CHECK(e.kind == "script_error");
  CHECK_THAT(e.what(), Catch::Contains("p.lua: params.n.type: must be one of"));

  e = ExpectLuaError([] {
    LoadStageInfoFromSource("return { params = { n = { type = 'string', requried = true } }, run = function() end }",
                            "p.lua");
  });
  CHECK_THAT(e.what(), Catch::Contains("params.n.requried: unknown field"));

  e = ExpectLuaError([] { LoadStageInfo("/nonexistent/dir/stage.lua"); });
  CHECK(e.kind == "script_error");
  CHECK_THAT(e.what(), Catch::Contains("cannot read Lua stage script"));
}

TEST_CASE("lua stage: a syntax error reports file and line", "[lua][stage][errors]") {
  TempDir dir;
  WriteFile(dir.path / "broken.lua", "return {\n  run = function(input)\n    local x = = 1\n  end,\n}\n");
  LuaError e = ExpectLuaError([&] { RunStage(dir.path / "broken.lua", json::object(), {}); });
  CHECK(e.kind == "syntax_error");
  CHECK(e.location == "broken.lua:3");
  CHECK_THAT(e.what(), Catch::StartsWith("broken.lua:3: unexpected symbol near '='"));

  e = ExpectLuaError([&] { LoadStageInfo(dir.path / "broken.lua"); });
  CHECK(e.kind == "syntax_error");
  CHECK(e.location == "broken.lua:3");

  // A shebang line does not shift line numbers.
  e = ExpectLuaError([] { RunStageFromSource("#!/usr/bin/env lua\nreturn {\n  run = (\n}", "sb.lua", {}, {}); });
  CHECK(e.kind == "syntax_error");
  CHECK(e.location == "sb.lua:4");
}

TEST_CASE("lua stage: a runtime error carries location and traceback", "[lua][stage][errors]") {
  TempDir dir;
  WriteFile(dir.path / "filter.lua", R"(local function pick(rows, i)
  local row = rows[i]
  return row.value
end
return {
  run = function(input)
    return { v = pick(input.with.rows, 5) }
  end,
}
)");
  json input = {{"with", {{"rows", json::array({json{{"value", 1}}})}}}};
  LuaError e = ExpectLuaError([&] { RunStage(dir.path / "filter.lua", input, {}); });
  CHECK(e.kind == "script_error");
  CHECK(e.location == "filter.lua:3");
  CHECK_THAT(e.what(), Catch::StartsWith("filter.lua:3: attempt to index a nil value (local 'row')"));
  CHECK_THAT(e.traceback, Catch::StartsWith("stack traceback:"));
  CHECK_THAT(e.traceback, Catch::Contains("filter.lua:3: in"));
  CHECK_THAT(e.traceback, Catch::Contains("filter.lua:7: in"));
  CHECK(e.details.is_null());

  // error() with a table or a level-0 string still gets a location.
  e = ExpectLuaError([] { RunStageFromSource("return { run = function()\n error({code = 7})\nend }", "t.lua", {}, {}); });
  CHECK(e.kind == "script_error");
  CHECK(e.location == "t.lua:2");
  CHECK_THAT(e.what(), Catch::Contains(R"(error object: {"code":7})"));
  e = ExpectLuaError([] { RunStageFromSource("return { run = function()\n error('plain', 0)\nend }", "t.lua", {}, {}); });
  CHECK(std::string(e.what()) == "t.lua:2: plain");
}

TEST_CASE("lua stage: accel.fail round trip", "[lua][stage][errors]") {
  LuaError e = ExpectLuaError([] {
    RunStageFromSource(R"(return { run = function(input)
      accel.fail("compile_error", "nvcc exited 1", { log = "main.cu:3: error", code = 2, lines = {1, 2} })
    end })",
                       "compile.lua", json::object(), {});
  });
  CHECK(e.kind == "stage_failure");
  CHECK(e.location == "compile.lua:2");
  CHECK(std::string(e.what()) == "compile.lua:2: compile_error: nvcc exited 1");
  CHECK(e.details == json::parse(R"({"kind": "compile_error", "message": "nvcc exited 1",
                                     "details": {"log": "main.cu:3: error", "code": 2, "lines": [1, 2]}})"));
  CHECK_THAT(e.traceback, Catch::Contains("compile.lua:2"));

  // Scripts can catch a failure and look inside; details are optional.
  json out = RunStageFromSource(R"(return { run = function()
      local ok, err = pcall(accel.fail, "wrong_result", "max error 0.5")
      return { ok = ok, kind = err.kind, message = err.message, text = tostring(err) }
    end })",
                                "c.lua", json::object(), {});
  CHECK(out == json{{"ok", false}, {"kind", "wrong_result"}, {"message", "max error 0.5"},
                    {"text", "wrong_result: max error 0.5"}});

  // Unconvertible details are rejected at the call, with a path.
  e = ExpectLuaError([] {
    RunStageFromSource("return { run = function() accel.fail('k', 'm', { fn = print }) end }", "d.lua", {}, {});
  });
  CHECK(e.kind == "script_error");
  CHECK_THAT(e.what(), Catch::Contains("details.fn: cannot convert a function to JSON"));
}

TEST_CASE("lua stage: outputs that are not JSON are reported with their path", "[lua][stage][convert]") {
  LuaError e = ExpectLuaError([] {
    RunStageFromSource(R"(return { run = function()
      return { rows = { {a = 1}, {a = 2}, {a = 3, fn = function() end} } }
    end })",
                       "out.lua", json::object(), {});
  });
  CHECK(e.kind == "bad_output");
  CHECK_THAT(e.what(), Catch::Contains("outputs.rows[3].fn: cannot convert a function to JSON"));
  CHECK_THAT(e.what(), Catch::StartsWith("out.lua: "));
}

TEST_CASE("lua stage: print and accel.log go to the host log", "[lua][stage]") {
  std::vector<std::pair<int, std::string>> lines;
  HostHooks hooks;
  hooks.log = [&](int level, const std::string& text) { lines.emplace_back(level, text); };
  RunStageFromSource(R"(return { run = function()
      print("hello", 42, nil)
      accel.info("info", 1.5)
      accel.warn("careful")
      accel.error("bad")
      accel.debug("dbg")
      accel.log("trace", "t")
      accel.log(3, "w3")
    end })",
                     "log.lua", json::object(), hooks);
  std::vector<std::pair<int, std::string>> expected = {{2, "hello\t42\tnil"}, {2, "info 1.5"}, {3, "careful"},
                                                       {4, "bad"},           {1, "dbg"},      {0, "t"},
                                                       {3, "w3"}};
  CHECK(lines == expected);
  LuaError e =
      ExpectLuaError([&] { RunStageFromSource("return { run = function() accel.log('loud', 'x') end }", "l.lua", {}, hooks); });
  CHECK_THAT(e.what(), Catch::Contains("invalid option 'loud'"));
}

TEST_CASE("lua stage: accel.fs stays inside its roots", "[lua][stage][fs]") {
  TempDir dir;
  fs::path run = dir.path / "run";
  fs::path stage = run / "stages" / "0001-filter";
  fs::create_directories(stage);
  WriteFile(run / "data.txt", "payload");
  WriteFile(run / "sub" / "nested.txt", "nested");
  WriteFile(dir.path / "secret.txt", "secret");
  fs::create_symlink(dir.path, run / "escape");                          // a directory link leading out
  fs::create_symlink(dir.path / "secret.txt", run / "secret-link.txt");  // a file link leading out
  fs::create_symlink(run / "data.txt", run / "inner-link.txt");          // a link that stays inside
  fs::create_symlink(dir.path / "planted.txt", stage / "dangling.txt");  // a dangling link leading out

  HostHooks hooks;
  hooks.read_root = run;
  hooks.write_root = stage;
  json out = RunStageFromSource(R"(
local function try(f, ...)
  local ok, res = pcall(f, ...)
  if ok then return res end
  return "ERR " .. res
end
return { run = function()
  return {
    data = try(accel.fs.read, "data.txt"),
    nested = try(accel.fs.read, "sub/../sub/nested.txt"),
    inner_link = try(accel.fs.read, "inner-link.txt"),
    exists = try(accel.fs.exists, "data.txt"),
    missing = try(accel.fs.exists, "nope.txt"),
    list = try(accel.fs.list, "."),
    parent = try(accel.fs.read, "../secret.txt"),
    deep_parent = try(accel.fs.read, "sub/../../secret.txt"),
    absolute = try(accel.fs.read, "/etc/passwd"),
    dir_link = try(accel.fs.read, "escape/secret.txt"),
    file_link = try(accel.fs.read, "secret-link.txt"),
    exists_escape = try(accel.fs.exists, "../secret.txt"),
    write_ok = try(accel.fs.write, "out/result.txt", "written"),
    write_parent = try(accel.fs.write, "../../escape.txt", "x"),
    write_absolute = try(accel.fs.write, "/tmp/accelopt-escape.txt", "x"),
    write_dangling = try(accel.fs.write, "dangling.txt", "x"),
    missing_file = try(accel.fs.read, "nope.txt"),
  }
end }
)",
                                "fs.lua", json::object(), hooks);
  INFO(out.dump(2));
  CHECK(out["data"] == "payload");
  CHECK(out["nested"] == "nested");
  CHECK(out["inner_link"] == "payload");
  CHECK(out["exists"] == true);
  CHECK(out["missing"] == false);
  CHECK(out["list"] == json::array({"data.txt", "escape/", "inner-link.txt", "secret-link.txt", "stages/", "sub/"}));
  CHECK_THAT(out["parent"].get<std::string>(), Catch::Contains("ERR accel.fs.read: '../secret.txt': path escapes the run directory"));
  CHECK_THAT(out["deep_parent"].get<std::string>(), Catch::Contains("path escapes the run directory"));
  CHECK_THAT(out["absolute"].get<std::string>(), Catch::Contains("absolute paths are not allowed"));
  CHECK_THAT(out["dir_link"].get<std::string>(), Catch::Contains("escapes the run directory (symlink?)"));
  CHECK_THAT(out["file_link"].get<std::string>(), Catch::Contains("escapes the run directory (symlink?)"));
  CHECK_THAT(out["exists_escape"].get<std::string>(), Catch::Contains("path escapes"));
  CHECK(!out.contains("write_ok"));  // write returns nothing
  CHECK(ReadFile(stage / "out" / "result.txt") == "written");
  CHECK_THAT(out["write_parent"].get<std::string>(), Catch::Contains("path escapes the stage directory"));
  CHECK_THAT(out["write_absolute"].get<std::string>(), Catch::Contains("absolute paths are not allowed"));
  CHECK_THAT(out["write_dangling"].get<std::string>(), Catch::Contains("symlink leads outside the stage directory"));
  CHECK_THAT(out["missing_file"].get<std::string>(), Catch::Contains("no such file"));
  CHECK(!fs::exists(dir.path / "planted.txt"));
  CHECK(!fs::exists(run / "escape.txt"));
  CHECK(!fs::exists("/tmp/accelopt-escape.txt"));
}

TEST_CASE("lua stage: accel.fs.write never writes through a symlink in the stage directory", "[lua][stage][fs]") {
  TempDir dir;
  fs::path stage = dir.path / "run" / "stages" / "01-s";
  fs::create_directories(stage / "real");
  WriteFile(stage / "real" / "kept.txt", "kept");
  fs::create_directory_symlink(stage / "real", stage / "inner-dir");    // a folder link that stays inside
  fs::create_symlink(stage / "real" / "kept.txt", stage / "link.txt");  // a file link that stays inside
  HostHooks hooks;
  hooks.write_root = stage;
  json out = RunStageFromSource(R"(return { run = function()
    local ok, err = pcall(accel.fs.write, "inner-dir/x.txt", "through a folder link")
    accel.fs.write("link.txt", "replaces the link")
    accel.fs.write("fresh/dir/y.txt", "honest")
    return { ok = ok, err = err }
  end })", "w.lua", json::object(), hooks);
  CHECK(out["ok"] == false);
  CHECK_THAT(out["err"].get<std::string>(), Catch::Contains("refusing a symlink"));
  CHECK_FALSE(fs::exists(stage / "real" / "x.txt"));
  CHECK_FALSE(fs::is_symlink(stage / "link.txt"));  // the link was replaced by a file ...
  CHECK(ReadFile(stage / "link.txt") == "replaces the link");
  CHECK(ReadFile(stage / "real" / "kept.txt") == "kept");  // ... and its target kept
  CHECK(ReadFile(stage / "fresh" / "dir" / "y.txt") == "honest");
}

TEST_CASE("lua stage: scripts are read from regular files of bounded size", "[lua][stage]") {
  LuaError e = ExpectLuaError([] { LoadStageInfo("/dev/zero"); });
  CHECK(e.kind == "script_error");
  CHECK_THAT(e.what(), Catch::Contains("cannot read Lua stage script '/dev/zero': not a regular file (a device)"));
  TempDir dir;
  WriteFile(dir.path / "big.lua", "return function() end\n--" + std::string(5u << 20, 'x') + "\n");
  e = ExpectLuaError([&] { LoadStageInfo(dir.path / "big.lua"); });
  CHECK_THAT(e.what(), Catch::Contains("exceeds the limit of 4194304 bytes for Lua stage scripts"));
}

TEST_CASE("lua stage: a log line built from one string referenced many times is truncated", "[lua][stage][memory]") {
  std::vector<std::string> lines;
  HostHooks hooks;
  hooks.log = [&](int, const std::string& line) { lines.push_back(line); };
  json out = RunStageFromSource(R"(return { run = function()
    local s = string.rep("x", 1 << 20)
    local t = {}
    for i = 1, 4000 do t[i] = s end
    print(table.unpack(t))   -- 4 GB as one C++ string without the cap
    accel.info("honest line")
    return { ok = true }
  end })", "log.lua", json::object(), hooks);
  CHECK(out["ok"] == true);
  REQUIRE(lines.size() == 2);
  CHECK(lines[0].size() < (1u << 20) + 100);
  CHECK_THAT(lines[0], Catch::EndsWith("more bytes not logged)"));
  CHECK(lines[1] == "honest line");
}
