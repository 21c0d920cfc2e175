// `${{ }}` expressions: values, builtins, type preservation, errors, limits.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdio>
#include <string>

#include "lua/expression.h"

using accelopt::lua::CheckExpressionSyntax;
using accelopt::lua::EvaluateExpression;
using accelopt::lua::Limits;
using accelopt::lua::LuaError;
using nlohmann::json;

namespace {

json Context() {
  return json::parse(R"({
    "vars": {"n": 4, "name": "matmul", "scale": 0.5, "tags": ["fast", "gpu"], "opt": null, "empty": []},
    "stages": {"baseline": {"outputs": {"latency_ms": 1.25, "ok": true, "rows": [{"id": 1}, {"id": 2}]}}},
    "cand": {"source": "k.cu", "score": 3}
  })");
}

json Eval(const std::string& expression, const json& context = Context()) {
  return EvaluateExpression(expression, context);
}

LuaError EvalError(const std::string& expression, const json& context = Context(),
                   const Limits& limits = accelopt::lua::kExpressionLimits) {
  try {
    EvaluateExpression(expression, context, limits);
  } catch (const LuaError& e) {
    return e;
  }
  FAIL("expected a LuaError from: " << expression);
  throw std::logic_error("unreachable");
}

}  // namespace

TEST_CASE("lua expression: arithmetic keeps integers and floats apart", "[lua][expression]") {
  CHECK(Eval("vars.n * 2 + 1") == 9);
  CHECK(Eval("vars.n * 2 + 1").is_number_integer());
  CHECK(Eval("vars.n / 2").is_number_float());
  CHECK(Eval("vars.n / 2") == 2.0);
  CHECK(Eval("7 // 2") == 3);
  CHECK(Eval("7 % 3") == 1);
  CHECK(Eval("2^10") == 1024.0);
  CHECK(Eval("vars.scale * vars.n") == 2.0);
  CHECK(Eval("-vars.n") == -4);
  CHECK(Eval("math.max(vars.n, 10)") == 10);
  CHECK(Eval("math.floor(stages.baseline.outputs.latency_ms)") == 1);
}

TEST_CASE("lua expression: comparisons and logic", "[lua][expression]") {
  CHECK(Eval("vars.n > 3") == true);
  CHECK(Eval("vars.n >= 5") == false);
  CHECK(Eval("vars.n == 4 and vars.name == 'matmul'") == true);
  CHECK(Eval("vars.n ~= 4 or not stages.baseline.outputs.ok") == false);
  CHECK(Eval("stages.baseline.outputs.latency_ms < 2.0") == true);
  CHECK(Eval("vars.opt == null") == true);
  CHECK(Eval("vars.opt == nil") == true);
  CHECK(Eval("not vars.opt") == true);  // null is falsy in expressions
  CHECK(Eval("vars.opt or 'fallback'") == "fallback");
  CHECK(Eval("null").is_null());
  CHECK(Eval("vars.missing == nil") == true);
  CHECK(Eval("vars.n > 3 and 'big' or 'small'") == "big");
  CHECK(Eval("stages.baseline.outputs.rows[2].id") == 2);
}

TEST_CASE("lua expression: string operations", "[lua][expression]") {
  CHECK(Eval("vars.name .. '-' .. vars.n") == "matmul-4");
  CHECK(Eval("vars.name:upper()") == "MATMUL");
  CHECK(Eval("string.format('%s:%.2f', vars.name, vars.scale)") == "matmul:0.50");
  CHECK(Eval("#vars.name") == 6);
  CHECK(Eval("vars.name:sub(1, 3)") == "mat");
  CHECK(Eval("cand.source:match('%.(%w+)$')") == "cu");
  CHECK(Eval("vars.name:find('mul', 1, true) ~= nil") == true);
}

TEST_CASE("lua expression: builtins", "[lua][expression]") {
  CHECK(Eval("len(vars.tags)") == 2);
  CHECK(Eval("len(vars)") == 6);
  CHECK(Eval("len(vars.name)") == 6);
  CHECK(Eval("len(vars.empty)") == 0);
  CHECK(Eval("len({1, 2, 3})") == 3);
  CHECK(Eval("#vars.tags") == 2);
  CHECK(Eval("contains(vars.tags, 'gpu')") == true);
  CHECK(Eval("contains(vars.tags, 'cpu')") == false);
  CHECK(Eval("contains(vars.name, 'mat')") == true);
  CHECK(Eval("contains(vars, 'name')") == true);
  CHECK(Eval("contains({1, 2, 3}, 2)") == true);
  CHECK(Eval("contains(stages.baseline.outputs.rows, fromjson('{\"id\": 2}'))") == true);
  CHECK(Eval("join(vars.tags, ', ')") == "fast, gpu");
  CHECK(Eval("join(vars.tags)") == "fast,gpu");
  CHECK(Eval("join({1, 2.5, true})") == "1,2.5,true");
  CHECK(Eval("keys(cand)") == json::array({"score", "source"}));
  CHECK(Eval("keys({b = 1, a = 2})") == json::array({"a", "b"}));
  CHECK(Eval("tostring(vars.n)") == "4");
  CHECK(Eval("tonumber('12') + 1") == 13);
  CHECK(Eval("tojson(vars.tags)") == R"(["fast","gpu"])");
  CHECK(Eval("tojson({a = 1})") == R"({"a":1})");
  CHECK(Eval("fromjson('[1, 2.5, null]')") == json::parse("[1, 2.5, null]"));
  CHECK(Eval("tostring(stages.baseline.outputs.rows[1])") == R"({"id":1})");
  CHECK(Eval("type(vars.n)") == "number");
  int sum = 0;
  CHECK(Eval("(function() local s = 0 for _, v in ipairs(stages.baseline.outputs.rows) do s = s + v.id end "
             "return s end)()") == 3);
  CHECK(Eval("(function() local n = 0 for k, v in pairs(vars) do n = n + 1 end return n end)()") == 6);
  (void)sum;
}

TEST_CASE("lua expression: status functions", "[lua][expression]") {
  json ctx = Context();
  CHECK(Eval("always()", ctx) == true);
  CHECK(Eval("success()", ctx) == true);
  CHECK(Eval("failure()", ctx) == false);
  ctx["__status"] = "failure";
  CHECK(Eval("success()", ctx) == false);
  CHECK(Eval("failure()", ctx) == true);
  CHECK(Eval("always() or failure()", ctx) == true);
  ctx["__status"] = "cancelled";
  CHECK(Eval("cancelled()", ctx) == true);
  // __-prefixed keys are hidden from expressions.
  LuaError e = EvalError("__status", ctx);
  CHECK_THAT(e.what(), Catch::Contains("unknown name '__status'"));
}

TEST_CASE("lua expression: results keep their JSON types", "[lua][expression]") {
  json ctx = Context();
  CHECK(Eval("vars", ctx) == ctx["vars"]);
  CHECK(Eval("stages.baseline.outputs", ctx) == ctx["stages"]["baseline"]["outputs"]);
  CHECK(Eval("vars.tags") == json::array({"fast", "gpu"}));
  CHECK(Eval("vars.empty").is_array());
  CHECK(Eval("vars.opt").is_null());
  CHECK(Eval("vars.missing").is_null());
  CHECK(Eval("vars.scale").is_number_float());
  CHECK(Eval("cand.score").is_number_integer());
  CHECK(Eval("{1, 2, vars.n}") == json::array({1, 2, 4}));
  CHECK(Eval("{best = stages.baseline.outputs.rows[1], n = vars.n}") ==
        json::parse(R"({"best": {"id": 1}, "n": 4})"));
  CHECK(Eval("{}") == json::object());
  CHECK(Eval("'text'") == "text");
  CHECK(Eval("vars.tags == vars.tags") == true);
}

TEST_CASE("lua expression: errors name what is missing", "[lua][expression][errors]") {
  LuaError e = EvalError("vars.nope.field");
  CHECK(e.kind == "script_error");
  CHECK(std::string(e.what()) == "attempt to index a nil value (field 'nope')");
  e = EvalError("vars.n +\n  vars.nope.field");
  CHECK(std::string(e.what()) == "line 2: attempt to index a nil value (field 'nope')");

  e = EvalError("nosuch + 1");
  CHECK(e.kind == "script_error");
  CHECK_THAT(e.what(), Catch::Contains("unknown name 'nosuch' (the context has: cand, stages, vars)"));

  e = EvalError("vars.name + 1");
  CHECK(e.kind == "script_error");
  CHECK_THAT(e.what(), Catch::Contains("attempt to add a 'string' with a 'number'"));

  e = EvalError("vars + 1");
  CHECK_THAT(e.what(), Catch::Contains("attempt to perform arithmetic on a JSON object value (global 'vars')"));

  e = EvalError("len(vars.nope)");
  CHECK_THAT(e.what(), Catch::Contains("bad argument #1 to 'len' (string, array or object expected, got nil)"));

  e = EvalError("(function() vars.n = 5 end)()");
  CHECK_THAT(e.what(), Catch::Contains("read-only"));
  e = EvalError("(function() x = 5 end)()");
  CHECK_THAT(e.what(), Catch::Contains("globals are read-only (use local)"));
  e = EvalError("os.exit()");
  CHECK_THAT(e.what(), Catch::Contains("unknown name 'os'"));
  e = EvalError("print");
  CHECK_THAT(e.what(), Catch::Contains("unknown name 'print'"));

  e = EvalError("function() end");
  CHECK(e.kind == "bad_output");
  CHECK_THAT(e.what(), Catch::Contains("result: cannot convert a function to JSON"));
}

TEST_CASE("lua expression: syntax errors", "[lua][expression][errors]") {
  LuaError e = EvalError("vars.n +");
  CHECK(e.kind == "syntax_error");
  CHECK(std::string(e.what()) == "unexpected symbol near <eof>");

  e = EvalError("vars.n = 1");
  CHECK(e.kind == "syntax_error");
  CHECK(std::string(e.what()) == "<eof> expected near '='");
  e = EvalError("");
  CHECK(e.kind == "syntax_error");
  CHECK(std::string(e.what()) == "empty expression");

  CHECK(!CheckExpressionSyntax("vars.n * 2 + 1"));
  CHECK(!CheckExpressionSyntax("{a = 1, b = {2, 3}}"));
  CHECK(!CheckExpressionSyntax("x -- trailing comment"));
  CHECK(CheckExpressionSyntax("1 +") == std::string("unexpected symbol near <eof>"));
  CHECK(CheckExpressionSyntax("1, 2") == std::string("not a single expression"));
  CHECK(CheckExpressionSyntax("   ") == std::string("empty expression"));
  CHECK(CheckExpressionSyntax("1) os.exit(") == std::string("<eof> expected near ')'"));
  CHECK(CheckExpressionSyntax("'unterminated").has_value());
}

TEST_CASE("lua expression: limits", "[lua][expression][timeout]") {
  auto start = std::chrono::steady_clock::now();
  LuaError e = EvalError("(function() while true do end end)()", Context(),
                         Limits{16ll << 20, std::chrono::milliseconds(100)});
  CHECK(e.kind == "timeout");
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(2));

  e = EvalError("string.rep('x', 1 << 26)");
  CHECK(e.kind == "out_of_memory");
}

TEST_CASE("lua expression: cost does not grow with the context", "[lua][expression][perf]") {
  json ctx = {{"vars", {{"n", 4}}}, {"stages", json::object()}};
  for (int i = 0; i < 5000; ++i) {
    ctx["stages"]["s" + std::to_string(i)] = {
        {"outputs", {{"value", i}, {"name", "stage-" + std::to_string(i)}, {"ok", i % 2 == 0}}}};
  }
  CHECK(Eval("stages.s4999.outputs.value + vars.n", ctx) == 5003);
  constexpr int kRuns = 200;
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kRuns; ++i) Eval("stages.s" + std::to_string(i * 7) + ".outputs.value * 2 + vars.n", ctx);
  double per_eval_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count() / kRuns;
  std::printf("[lua expression] 5,000-entry context: %.3f ms per evaluation (%d runs)\n", per_eval_ms, kRuns);
  CHECK(per_eval_ms < 5.0);
}

TEST_CASE("lua expression: JSON built in C++ counts against the cap", "[lua][expression][memory]") {
  // 3 MB of text is 1.5 million values: 24 MB as a C++ tree, over the 16 MiB of an expression.
  CHECK(EvalError("fromjson('[' .. string.rep('0,', 1500000) .. '0]')").kind == "out_of_memory");
  // One 1 MiB string referenced 40 times: 40 MiB of JSON text.
  CHECK(EvalError("(function() local s = string.rep('x', 1 << 20) local t = {} for i = 1, 40 do t[i] = s end "
                  "return tojson(t) end)()")
            .kind == "out_of_memory");
  CHECK(EvaluateExpression("#fromjson('[1, 2, 3]')", json::object()) == 3);
}
