// string.find/match/gmatch/gsub: the Lua 5.4 pattern language, with a step
// budget that stops backtracking patterns at the deadline.
#include <catch2/catch.hpp>

#include <chrono>
#include <string>

#include "lua/expression.h"
#include "lua/stage_script.h"

using accelopt::lua::EvaluateExpression;
using accelopt::lua::HostHooks;
using accelopt::lua::Limits;
using accelopt::lua::LuaError;
using accelopt::lua::RunStageFromSource;
using nlohmann::json;

namespace {

// Runs `body` as a stage's run() and returns its outputs.
json Run(const std::string& body, const Limits& limits = {}) {
  return RunStageFromSource("return { run = function(input)\n" + body + "\nend }\n", "pattern.lua", json::object(), HostHooks{},
                            limits);
}

// The value of one Lua expression, through a stage (so accel.null etc. are available).
json Eval(const std::string& expression) { return Run("return { v = accel.array({" + expression + "}) }")["v"]; }

std::string ErrorOf(const std::string& expression) {
  try {
    Eval(expression);
  } catch (const LuaError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("patterns: find", "[lua][pattern]") {
  CHECK(Eval("string.find('hello world', 'o w')") == json::array({5, 7}));
  CHECK(Eval("string.find('hello', 'l+')") == json::array({3, 4}));
  CHECK(Eval("string.find('a.b', '.', 1, true)") == json::array({2, 2}));
  CHECK(Eval("string.find('abc', '')") == json::array({1, 0}));
  CHECK(Eval("string.find('abc', '', 10)") == json::array());
  CHECK(Eval("string.find('abcabc', 'b', -3)") == json::array({5, 5}));
  CHECK(Eval("string.find('abc', '^b')") == json::array());
  CHECK(Eval("string.find('abc', 'c$')") == json::array({3, 3}));
  CHECK(Eval("string.find('a$c', '$c')") == json::array({2, 3}));
  CHECK(Eval("string.find('key = value', '(%w+)%s*=%s*(%w+)')") == json::array({1, 11, "key", "value"}));
  CHECK(Eval("('x'):find('y')") == json::array());
}

TEST_CASE("patterns: match, classes, sets and quantifiers", "[lua][pattern]") {
  CHECK(Eval("string.match('  trim me  ', '^%s*(.-)%s*$')") == json::array({"trim me"}));
  CHECK(Eval("string.match('2026-11-25', '(%d+)-(%d+)-(%d+)')") == json::array({"2026", "11", "25"}));
  CHECK(Eval("string.match('abc123', '%a+')") == json::array({"abc"}));
  CHECK(Eval("string.match('abc123', '%A+')") == json::array({"123"}));
  CHECK(Eval("string.match('x = [a]', '%[(.)%]')") == json::array({"a"}));
  CHECK(Eval("string.match('hex: 0x1F;', '0x([%x]+)')") == json::array({"1F"}));
  CHECK(Eval("string.match('a-b_c', '[_%-]')") == json::array({"-"}));
  CHECK(Eval("string.match('abc]', '[]]')") == json::array({"]"}));
  CHECK(Eval("string.match('Hello', '[^%l]')") == json::array({"H"}));
  CHECK(Eval("string.match('m5', '[a-z]%d?')") == json::array({"m5"}));
  CHECK(Eval("string.match('aaa', 'a-')") == json::array({""}));
  CHECK(Eval("string.match('aaab', 'a-b')") == json::array({"aaab"}));
  CHECK(Eval("string.match('hello', '()ll()')") == json::array({3, 5}));
  CHECK(Eval("string.match('f(a(b)c)d', '%b()')") == json::array({"(a(b)c)"}));
  CHECK(Eval("string.match('THE (quick) fox', '%f[%a]%a+', 5)") == json::array({"quick"}));
  CHECK(Eval("string.match('say \"hi\" now', '([\"\\'])(.-)%1')") == json::array({"\"", "hi"}));
  CHECK(Eval("string.match('abc', 'b', -1)") == json::array());
}

TEST_CASE("patterns: gmatch and gsub", "[lua][pattern]") {
  CHECK(Run("local t = accel.array() for w in string.gmatch('one two  three', '%a+') do t[#t + 1] = w end return {t = t}")["t"] ==
        json::array({"one", "two", "three"}));
  CHECK(Run("local t = accel.array() for k, v in ('a=1, b=2'):gmatch('(%w+)=(%w+)') do t[#t + 1] = k .. v end return {t = t}")["t"] ==
        json::array({"a1", "b2"}));
  // Empty matches advance (Lua 5.4: not again at the end of the previous match).
  CHECK(Run("local t = accel.array() for w in ('abc'):gmatch('x*') do t[#t + 1] = w end return {n = #t}")["n"] == 4);
  CHECK(Run("local t = accel.array() for p in ('abc'):gmatch('()', 2) do t[#t + 1] = p end return {t = t}")["t"] ==
        json::array({2, 3, 4}));
  CHECK(Eval("string.gsub('hello world', 'o', '0')") == json::array({"hell0 w0rld", 2}));
  CHECK(Eval("string.gsub('hello world', '(%w+)', '<%1>')") == json::array({"<hello> <world>", 2}));
  CHECK(Eval("string.gsub('hello', '', '-')") == json::array({"-h-e-l-l-o-", 6}));
  CHECK(Eval("string.gsub('abc', '%w', '%0%0', 2)") == json::array({"aabbc", 2}));
  CHECK(Eval("string.gsub('$name is $age', '%$(%w+)', {name = 'Ann', age = 7})") == json::array({"Ann is 7", 2}));
  CHECK(Eval("string.gsub('a b', '%w', function(c) if c == 'a' then return 'A' end end)") == json::array({"A b", 2}));
  CHECK(Eval("string.gsub('abc', '^a', 'x')") == json::array({"xbc", 1}));
  CHECK(Eval("string.gsub('50%', '%%', ' percent')") == json::array({"50 percent", 1}));
}

TEST_CASE("patterns: malformed patterns raise Lua's messages", "[lua][pattern]") {
  CHECK_THAT(ErrorOf("string.find('a', '%')"), Catch::Contains("malformed pattern (ends with '%')"));
  CHECK_THAT(ErrorOf("string.find('a', '[a')"), Catch::Contains("malformed pattern (missing ']')"));
  CHECK_THAT(ErrorOf("string.find('a', '(a')"), Catch::Contains("unfinished capture"));
  CHECK_THAT(ErrorOf("string.match('a', 'a)')"), Catch::Contains("invalid pattern capture"));
  CHECK(Eval("string.find('a)', 'a)')") == json::array({1, 2}));  // no specials: a plain search, as in Lua
  CHECK_THAT(ErrorOf("string.find('a', '%1')"), Catch::Contains("invalid capture index %1"));
  CHECK_THAT(ErrorOf("string.find('a', '%f')"), Catch::Contains("missing '[' after '%f' in pattern"));
  CHECK_THAT(ErrorOf("string.find('a', '%b')"), Catch::Contains("missing arguments to '%b'"));
  CHECK_THAT(ErrorOf("string.gsub('a', 'a', '%x')"), Catch::Contains("invalid use of '%' in replacement string"));
  CHECK_THAT(ErrorOf("string.gsub('a', 'a', {a = {}})"), Catch::Contains("invalid replacement value (a table)"));
  CHECK_THAT(ErrorOf("string.find('a', string.rep('(', 40) .. 'a')"), Catch::Contains("too many captures"));
  CHECK_THAT(ErrorOf("string.match(string.rep('a', 300), string.rep('a?', 300))"), Catch::Contains("pattern too complex"));
}

TEST_CASE("patterns: a backtracking pattern stops at the deadline", "[lua][pattern][timeout]") {
  const Limits fast{64ll << 20, std::chrono::milliseconds(200)};
  const char* hostile[] = {
      "return { string.find(string.rep('a', 5000), '.-.-.-.-.-.-b') }",
      "return { pcall(string.match, string.rep('a', 5000), '(.-)(.-)(.-)(.-)(.-)b') }",
      "return { (string.rep('a', 5000)):gsub('a*a*a*a*a*b', 'x') }",
      "for w in string.gmatch(string.rep('a', 5000), '.-.-.-.-.-b') do end",
      "return { string.find(string.rep('a', 1 << 24), string.rep('a', 1 << 22) .. 'b', 1, true) }",
  };
  for (const char* body : hostile) {
    INFO(body);
    try {
      Run(body, fast);
      FAIL("expected a timeout");
    } catch (const LuaError& e) {
      CHECK(e.kind == "timeout");
      CHECK_THAT(e.what(), Catch::Contains("timed out after 200 ms"));
    }
  }
  // In an expression too (what `with:` runs), and honest work right after is unaffected.
  try {
    EvaluateExpression("string.find(string.rep('a', 5000), '.-.-.-.-.-.-b')", json::object());
    FAIL("expected a timeout");
  } catch (const LuaError& e) {
    CHECK(e.kind == "timeout");
  }
  try {
    EvaluateExpression("contains(string.rep('a', 1 << 22), string.rep('a', 1 << 21) .. 'b')", json::object());
    FAIL("expected a timeout");
  } catch (const LuaError& e) {
    CHECK(e.kind == "timeout");
  }
  CHECK(EvaluateExpression("string.match('v=42', 'v=(%d+)')", json::object()) == "42");
}
