// Sandbox escapes, deadlines and memory caps of the Lua module.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <string>

#include "lua/stage_script.h"

using accelopt::lua::HostHooks;
using accelopt::lua::Limits;
using accelopt::lua::LuaError;
using accelopt::lua::RunStageFromSource;
using nlohmann::json;

namespace {

json RunLua(const std::string& source, const HostHooks& hooks = {}, const Limits& limits = {}) {
  return RunStageFromSource(source, "sandbox.lua", json::object(), hooks, limits);
}

LuaError RunLuaError(const std::string& source, const HostHooks& hooks = {}, const Limits& limits = {}) {
  try {
    RunLua(source, hooks, limits);
  } catch (const LuaError& e) {
    return e;
  }
  FAIL("expected a LuaError from:\n" << source);
  throw std::logic_error("unreachable");
}

/// A `run` body wrapped as a stage script.
std::string Stage(const std::string& body) { return "return { run = function(input)\n" + body + "\nend }\n"; }

Limits Fast(int64_t memory_bytes = 64ll << 20) { return Limits{memory_bytes, std::chrono::milliseconds(200)}; }

}  // namespace

TEST_CASE("lua sandbox: dangerous functions and libraries are absent", "[lua][sandbox]") {
  json out = RunLua(Stage(R"(
    return {
      io = type(io), os = type(os), package = type(package), require = type(require),
      debug = type(debug), dofile = type(dofile), loadfile = type(loadfile),
      collectgarbage = type(collectgarbage), rawget = type(rawget), rawset = type(rawset),
      rawequal = type(rawequal), rawlen = type(rawlen), dump = type(string.dump),
      string_mt = tostring(getmetatable("")),
      -- what must still be there
      pcall = type(pcall), string = type(string), coroutine = type(coroutine), utf8 = type(utf8),
      math = type(math), table = type(table), accel = type(accel), load = type(load),
    })"));
  for (const char* name : {"io", "os", "package", "require", "debug", "dofile", "loadfile", "collectgarbage",
                           "rawget", "rawset", "rawequal", "rawlen", "dump"}) {
    INFO(name);
    CHECK(out[name] == "nil");
  }
  CHECK(out["string_mt"] == "string");  // protected: the string table is not reachable
  CHECK(out["pcall"] == "function");
  CHECK(out["string"] == "table");
  CHECK(out["coroutine"] == "table");
  CHECK(out["utf8"] == "table");
  CHECK(out["math"] == "table");
  CHECK(out["table"] == "table");
  CHECK(out["accel"] == "table");
  CHECK(out["load"] == "function");
}

TEST_CASE("lua sandbox: io, os and require calls fail as script errors", "[lua][sandbox]") {
  struct Case {
    const char* code;
    const char* message;
  } cases[] = {
      {R"(io.open("/etc/passwd"))", "attempt to index a nil value (global 'io')"},
      {R"(os.execute("true"))", "attempt to index a nil value (global 'os')"},
      {R"(require("os"))", "attempt to call a nil value (global 'require')"},
      {R"(debug.getregistry())", "attempt to index a nil value (global 'debug')"},
      {R"(string.dump(function() end))", "attempt to call a nil value (field 'dump')"},
  };
  for (const auto& c : cases) {
    INFO(c.code);
    LuaError e = RunLuaError(Stage(c.code));
    CHECK(e.kind == "script_error");
    CHECK_THAT(e.what(), Catch::Contains(c.message));
    CHECK(e.location == "sandbox.lua:2");
  }
}

TEST_CASE("lua sandbox: load accepts only text and keeps the sandbox environment", "[lua][sandbox]") {
  json out = RunLua(Stage(R"lua(
    local bytecode = "\27Lua\84\0\25\147\13\10\26\10\4\8\8\120\86\0\0\0\0\0\0\0\0\0\0\0\40\119\64"
    local f, err = load(bytecode)
    local g = load("return type(io), type(accel)")
    local io_type, accel_type = g()
    local ok, assign_err = pcall(load("leaked = 1"))
    local h, syntax = load("return +")
    return { f = type(f), err = err, io = io_type, accel = accel_type, assign_ok = ok, assign_err = assign_err,
             syntax = syntax }
  )lua"));
  CHECK(out["f"] == "nil");
  CHECK_THAT(out["err"].get<std::string>(), Catch::Contains("attempt to load a binary chunk"));
  CHECK(out["io"] == "nil");
  CHECK(out["accel"] == "table");
  CHECK(out["assign_ok"] == false);
  CHECK_THAT(out["assign_err"].get<std::string>(), Catch::Contains("globals are read-only (use local)"));
  CHECK_THAT(out["syntax"].get<std::string>(), Catch::Contains("unexpected symbol"));

  LuaError e = RunLuaError(Stage("return load(function() return nil end)"));
  CHECK_THAT(e.what(), Catch::Contains("only string chunks"));
}

TEST_CASE("lua sandbox: globals are read-only", "[lua][sandbox]") {
  LuaError e = RunLuaError("counter = 1\nreturn { run = function() end }");
  CHECK(e.kind == "script_error");
  CHECK(e.location == "sandbox.lua:1");
  CHECK_THAT(e.what(), Catch::Contains("cannot assign to global 'counter': globals are read-only (use local)"));

  // Neither through _G nor by stripping the proxy's metatable.
  e = RunLuaError(Stage("_G.x = 1"));
  CHECK_THAT(e.what(), Catch::Contains("globals are read-only"));
  e = RunLuaError(Stage("setmetatable(_G, nil)"));
  CHECK_THAT(e.what(), Catch::Contains("cannot change a protected metatable"));
  // Locals work.
  CHECK(RunLua(Stage("local counter = 1 counter = counter + 1 return {counter = counter}"))["counter"] == 2);
}

TEST_CASE("lua sandbox: finalizers (__gc) are refused", "[lua][sandbox]") {
  LuaError e = RunLuaError(Stage("setmetatable({}, {__gc = function() while true do end end})"));
  CHECK(e.kind == "script_error");
  CHECK_THAT(e.what(), Catch::Contains("__gc metamethods are not allowed"));
  // Marker metatables are protected, so __gc cannot be planted on them either.
  e = RunLuaError(Stage("getmetatable(accel.array{}).__gc = function() end"));
  CHECK_THAT(e.what(), Catch::Contains("attempt to index a string value"));
  // Ordinary metatables still work.
  json out = RunLua(Stage(R"(
    local V = {}
    V.__index = V
    V.__add = function(a, b) return setmetatable({x = a.x + b.x}, V) end
    local v = setmetatable({x = 1}, V) + setmetatable({x = 2}, V)
    return {x = v.x})"));
  CHECK(out["x"] == 3);
}

TEST_CASE("lua sandbox: an infinite loop times out", "[lua][sandbox][timeout]") {
  auto start = std::chrono::steady_clock::now();
  LuaError e = RunLuaError(Stage("while true do end"), {}, Fast());
  auto elapsed = std::chrono::steady_clock::now() - start;
  CHECK(e.kind == "timeout");
  CHECK(e.location == "sandbox.lua:2");
  CHECK_THAT(e.what(), Catch::StartsWith("sandbox.lua:2: timed out after 200 ms"));
  CHECK(elapsed < std::chrono::seconds(3));
}

TEST_CASE("lua sandbox: pcall cannot swallow the deadline", "[lua][sandbox][timeout]") {
  const char* loops[] = {
      "while true do pcall(function() while true do end end) end",
      "while true do pcall(pcall, function() while true do end end) end",
      "for i = 1, math.huge do local ok, err = pcall(error, 'x') end",
      "while true do xpcall(function() while true do end end, function(m) while true do end end) end",
      "while true do local co = coroutine.wrap(function() while true do end end) pcall(co) end",
      "while true do local co = coroutine.create(function() while true do end end) coroutine.resume(co) end",
      // a coroutine killed by the hook must not run its __close handlers unhooked
      R"(local co = coroutine.create(function()
           local guard <close> = setmetatable({}, {__close = function() while true do end end})
           while true do end
         end)
         print(coroutine.resume(co))
         coroutine.close(co))",
      "local t = setmetatable({}, {__close = function() while true do end end}) do local x <close> = t end",
  };
  for (const char* loop : loops) {
    INFO(loop);
    auto start = std::chrono::steady_clock::now();
    LuaError e = RunLuaError(Stage(loop), {}, Fast());
    auto elapsed = std::chrono::steady_clock::now() - start;
    CHECK(e.kind == "timeout");
    CHECK(elapsed < std::chrono::seconds(3));
  }
}

TEST_CASE("lua sandbox: the host can cancel a running script", "[lua][sandbox][timeout]") {
  std::atomic<int> polls{0};
  HostHooks hooks;
  hooks.cancelled = [&] { return ++polls > 5; };
  LuaError e = RunLuaError(Stage("while true do end"), hooks, Limits{64ll << 20, std::chrono::milliseconds(0)});
  CHECK(e.kind == "cancelled");
  CHECK(polls > 5);
}

TEST_CASE("lua sandbox: a memory bomb hits the cap and the host carries on", "[lua][sandbox][memory]") {
  const char* bombs[] = {
      "local t = {} for i = 1, 1e9 do t[i] = string.rep('x', 100) .. i end",
      "return { big = string.rep('x', 1 << 30) }",
      "local s = 'x' while true do s = s .. s end",
      "local root = {} local t = root while true do t.next = {} t = t.next end",
  };
  for (const char* bomb : bombs) {
    INFO(bomb);
    LuaError e = RunLuaError(Stage(bomb), {}, Limits{8ll << 20, std::chrono::milliseconds(5000)});
    CHECK(e.kind == "out_of_memory");
    CHECK_THAT(e.what(), Catch::Contains("out of memory (limit 8388608 bytes)"));
  }
  // The next state is unaffected.
  json out = RunLua(Stage("local t = {} for i = 1, 1000 do t[i] = i end return {n = #t}"), {},
                    Limits{8ll << 20, std::chrono::milliseconds(5000)});
  CHECK(out["n"] == 1000);
}

TEST_CASE("lua sandbox: C++ exceptions in host functions become catchable Lua errors", "[lua][sandbox]") {
  json out = RunLua(Stage(R"(
    local ok, err = pcall(accel.fs.read, "x.txt")
    return { ok = ok, err = err })"));
  CHECK(out["ok"] == false);
  CHECK_THAT(out["err"].get<std::string>(), Catch::Contains("accel.fs.read: not available (no run directory)"));
}

TEST_CASE("lua sandbox: JSON built in C++ from a shared string counts against the cap", "[lua][sandbox][memory]") {
  // One 1 MiB string referenced 200 times is 1 MiB in the Lua heap, but 200 MiB once copied to JSON.
  const char* bombs[] = {
      "local s = string.rep('x', 1 << 20) local t = {} for i = 1, 200 do t[i] = s end return {n = #accel.json.encode(t)}",
      "local s = string.rep('x', 1 << 20) local t = {} for i = 1, 200 do t[i] = s end return {t = t}",
      // a pcall cannot make the conversion fit; the next encode fails the same way
      "local s = string.rep('\\n', 1 << 20) local t = {} for i = 1, 200 do t[i] = s end "
      "local ok = pcall(accel.json.encode, t) return {ok = ok, n = #accel.json.encode(t)}",
  };
  for (const char* bomb : bombs) {
    INFO(bomb);
    LuaError e = RunLuaError(Stage(bomb), {}, Limits{16ll << 20, std::chrono::milliseconds(5000)});
    CHECK(e.kind == "out_of_memory");
    CHECK_THAT(e.what(), Catch::Contains("out of memory (limit 16777216 bytes)"));
  }
  // Honest work of the same shape, within the cap, still converts.
  json out = RunLua(Stage("local s = string.rep('x', 1 << 10) local t = {} for i = 1, 200 do t[i] = s end "
                          "return {n = #accel.json.encode(t), t = t}"),
                    {}, Limits{16ll << 20, std::chrono::milliseconds(5000)});
  CHECK(out["n"] == 200 * 1027 + 1);
  CHECK(out["t"].size() == 200);
}

TEST_CASE("lua sandbox: accel.json.decode counts the parsed tree against the cap", "[lua][sandbox][memory]") {
  // 8 MB of text is 4 million values: 64 MB as a C++ tree before it reaches the Lua heap.
  LuaError e = RunLuaError(Stage("local text = '[' .. string.rep('0,', 4000000) .. '0]' return {n = #accel.json.decode(text)}"),
                           {}, Limits{32ll << 20, std::chrono::milliseconds(10000)});
  CHECK(e.kind == "out_of_memory");
  json out = RunLua(Stage("return {n = #accel.json.decode('[' .. string.rep('0,', 1000) .. '0]')}"), {},
                    Limits{32ll << 20, std::chrono::milliseconds(10000)});
  CHECK(out["n"] == 1001);
}
