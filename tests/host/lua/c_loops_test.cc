// Library functions whose loops run in C, where the instruction-count hook
// never fires: `string.rep('', math.maxinteger)` (issue 34) and the table
// functions that walk a range or a __len, in `${{ }}` expressions and in Lua
// stages. Each must end at the memory or time budget with a clear error.
#include <catch2/catch.hpp>

#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>

#include "lua/expression.h"
#include "lua/stage_script.h"

using accelopt::lua::EvaluateExpression;
using accelopt::lua::HostHooks;
using accelopt::lua::Limits;
using accelopt::lua::LuaError;
using accelopt::lua::RunStageFromSource;
using nlohmann::json;

namespace {

struct Outcome {
  bool finished = false;
  std::string kind;  // "" when no error
  std::string message;
  double seconds = 0;
};

// Runs `fn` on a detached thread and waits at most `wait`: a loop that
// ignores the deadline must fail the test, not hang the suite (the thread
// dies with the test process).
template <typename Fn>
Outcome Bounded(Fn fn, std::chrono::seconds wait = std::chrono::seconds(10)) {
  auto done = std::make_shared<std::promise<Outcome>>();
  auto result = done->get_future();
  std::thread([done, fn] {
    Outcome out;
    auto start = std::chrono::steady_clock::now();
    try {
      fn();
    } catch (const LuaError& e) {
      out.kind = e.kind;
      out.message = e.what();
    }
    out.finished = true;
    out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    done->set_value(out);
  }).detach();
  if (result.wait_for(wait) != std::future_status::ready) return Outcome{};
  return result.get();
}

Outcome Expression(const std::string& text) {
  return Bounded([text] {
    EvaluateExpression(text, json::object(), Limits{16ll << 20, std::chrono::milliseconds(300)});
  });
}

Outcome Stage(const std::string& body) {
  std::string source = "return { run = function(input)\n" + body + "\nreturn {}\nend }\n";
  return Bounded([source] {
    RunStageFromSource(source, "loops.lua", json::object(), HostHooks{}, Limits{64ll << 20, std::chrono::milliseconds(300)});
  });
}

}  // namespace

TEST_CASE("lua: string.rep of an empty string a maxinteger times ends at once with a clear error",
          "[lua][expression][sandbox][timeout]") {
  for (const char* text : {"string.rep('', math.maxinteger)", "('').rep('', math.maxinteger, '')",
                           "#string.rep('', math.maxinteger)"}) {
    INFO(text);
    Outcome out = Expression(text);
    REQUIRE(out.finished);
    CHECK(out.seconds < 2.0);
    CHECK(out.kind == "out_of_memory");
    CHECK_THAT(out.message, Catch::Contains("string.rep") && Catch::Contains("repetitions"));
  }
  Outcome stage = Stage("local s = string.rep('', math.maxinteger)");
  REQUIRE(stage.finished);
  CHECK(stage.seconds < 2.0);
  CHECK(stage.kind == "out_of_memory");
  CHECK_THAT(stage.message, Catch::Contains("string.rep") && Catch::Contains("memory limit"));
  // pcall does not turn it into a loop either.
  stage = Stage("for i = 1, 3 do pcall(string.rep, '', math.maxinteger) end");
  REQUIRE(stage.finished);
  CHECK(stage.seconds < 2.0);

  // Ordinary uses are unchanged.
  CHECK(EvaluateExpression("string.rep('ab', 3, ',')", json::object()) == "ab,ab,ab");
  CHECK(EvaluateExpression("#string.rep('x', 1 << 20)", json::object()) == (1 << 20));
  CHECK(EvaluateExpression("string.rep('', 5)", json::object()) == "");
  CHECK(EvaluateExpression("string.rep('x', 0)", json::object()) == "");
}

TEST_CASE("lua: table.move/insert/remove over a huge range stop at the deadline",
          "[lua][expression][sandbox][timeout]") {
  Outcome out = Expression("table.move({}, 1, math.maxinteger, 1)");
  REQUIRE(out.finished);
  CHECK(out.kind == "timeout");
  CHECK(out.seconds < 2.0);

  for (const char* body : {"table.move({}, 1, math.maxinteger, 1)",
                           "local t = setmetatable({}, {__len = function() return math.maxinteger end})\n"
                           "table.remove(t, 1)",
                           "local t = setmetatable({}, {__len = function() return math.maxinteger - 1 end})\n"
                           "table.insert(t, 1, 'x')",
                           // the hook's own raise is caught by pcall: the next check raises again
                           "for i = 1, 5 do pcall(table.move, {}, 1, math.maxinteger, 1) end"}) {
    INFO(body);
    Outcome stage = Stage(body);
    REQUIRE(stage.finished);
    CHECK(stage.kind == "timeout");
    CHECK(stage.seconds < 2.0);
  }

  // Ordinary uses are unchanged.
  CHECK(EvaluateExpression("table.concat(table.move({1, 2, 3}, 1, 3, 2), ',')", json::object()) == "1,1,2,3");
  CHECK(EvaluateExpression("table.concat(table.move({1, 2, 3}, 2, 3, 1), ',')", json::object()) == "2,3,3");
  CHECK(EvaluateExpression("table.concat(table.move({1, 2, 3}, 1, 3, 1, {9}), ',')", json::object()) == "1,2,3");
  CHECK(EvaluateExpression("(function() local t = {1, 2, 3} table.insert(t, 1, 0) table.insert(t, 9) "
                           "return table.concat(t, ',') end)()",
                           json::object()) == "0,1,2,3,9");
  CHECK(EvaluateExpression("(function() local t = {1, 2, 3} local a = table.remove(t, 1) local b = table.remove(t) "
                           "return a .. b .. #t end)()",
                           json::object()) == "131");
  CHECK(EvaluateExpression("(function() local t = {} return tostring(table.remove(t)) .. #t end)()", json::object()) ==
        "nil0");
}
