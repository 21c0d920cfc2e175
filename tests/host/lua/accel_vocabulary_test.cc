// One Lua vocabulary: the `accel` table in stages and in `${{ }}` expressions,
// the expression short forms, JSON null in both forms, and the documented
// search-strategy example (docs/examples/greedy_select.lua).
#include <catch2/catch.hpp>

#include "lua/expression.h"
#include "lua/stage_script.h"
#include "support/test_support.h"

using accelopt::lua::EvaluateExpression;
using accelopt::lua::RunStage;
using accelopt::lua::RunStageFromSource;
using nlohmann::json;

namespace {

json Eval(const std::string& expression) {
  static const json context = json::parse(R"({
    "vars": {"opt": null, "tags": ["fast", "gpu"], "n": 4},
    "stages": {"load": {"outputs": {"rows": [{"id": 1}, {"id": 2}], "by": {"b": 1, "a": 2}}}}
  })");
  return EvaluateExpression(expression, context);
}

json Stage(const std::string& body) {
  return RunStageFromSource("return function(input)\n" + body + "\nend", "v.lua",
                            {{"with", {{"opt", nullptr}, {"tags", {"fast", "gpu"}}}}}, {});
}

}  // namespace

TEST_CASE("expressions have the accel table stages have", "[lua][vocabulary]") {
  CHECK(Eval("accel.len(vars.tags)") == 2);
  CHECK(Eval("accel.contains(vars.tags, 'gpu')") == true);
  CHECK(Eval("accel.join(vars.tags, '+')") == "fast+gpu");
  CHECK(Eval("accel.keys(stages.load.outputs.by)") == json({"a", "b"}));
  CHECK(Eval("accel.json.encode(vars.tags)") == R"(["fast","gpu"])");
  CHECK(Eval("accel.json.decode('[1, null]')") == json::parse("[1, null]"));
  CHECK(Eval("accel.is_null(vars.opt) and accel.is_null(accel.json.decode('null'))") == true);
  CHECK(Eval("accel.is_null(vars.n)") == false);
  CHECK(Eval("accel.array()") == json::array());
  CHECK(Eval("accel.always() and accel.success() and not accel.failure() and not accel.cancelled()") == true);
  CHECK(EvaluateExpression("accel.failure()", {{"__status", "failure"}}) == true);
  CHECK(Eval("accel.log") == nullptr);  // no side effects in expressions
  CHECK(Eval("accel.fs") == nullptr);
}

TEST_CASE("the expression short forms are the accel functions", "[lua][vocabulary]") {
  CHECK(Eval("len == accel.len and contains == accel.contains and join == accel.join and keys == accel.keys") == true);
  CHECK(Eval("always == accel.always and success == accel.success and failure == accel.failure") == true);
  CHECK(Eval("cancelled == accel.cancelled") == true);
  CHECK(Eval("tojson == accel.json.encode and fromjson == accel.json.decode") == true);
  CHECK(Eval("null == nil and vars.opt == null") == true);
}

TEST_CASE("stages have the shared entries and the status tests are expression-only", "[lua][vocabulary]") {
  CHECK(Stage("return {n = accel.len(input.with.tags), has = accel.contains(input.with.tags, 'fast')}") ==
        json{{"n", 2}, {"has", true}});
  CHECK(Stage("return {s = accel.join(accel.keys({b = 1, a = 2}), ',')}") == json{{"s", "a,b"}});
  CHECK(Stage("return {a = accel.is_null(input.with.opt), b = accel.is_null(nil), c = accel.is_null(0)}") ==
        json{{"a", true}, {"b", true}, {"c", false}});
  CHECK(Stage("return {none = accel.always == nil and accel.failure == nil}") == json{{"none", true}});
}

TEST_CASE("the documented search strategy keeps the fastest kernel per problem", "[lua][vocabulary][examples]") {
  json beam = json::array({{{"id", "silu_ID0"}, {"case_name", "silu"}, {"latency_ms", 2.0}},
                           {{"id", "mm_ID0"}, {"case_name", "mm"}, {"latency_ms", 5.0}}});
  json records = {{"records", json::array({{{"id", "silu-1"}, {"case_name", "silu"}, {"status", "ok"}, {"latency_ms", 1.5}},
                                           {{"id", "silu-2"}, {"case_name", "silu"}, {"status", "ok"}, {"latency_ms", 1.2}},
                                           {{"id", "mm-1"}, {"case_name", "mm"}, {"status", "failed"}, {"latency_ms", nullptr}},
                                           {{"id", "mm-2"}, {"case_name", "mm"}, {"status", "ok"}, {"latency_ms", 9.0}}})}};
  json input = {{"with", {{"beam", beam}, {"records", records}, {"best", json::object()}, {"beam_width", 1}}}};
  json out = RunStage(accelopt::testing::SourcePath("docs/examples/greedy_select.lua"), input, {});
  REQUIRE(out["beam"].size() == 2);
  CHECK(out["beam"][0]["id"] == "mm_ID0");  // sorted by case name; the slower mm-2 did not replace it
  CHECK(out["beam"][1]["id"] == "silu-2");
  CHECK(out["best"]["silu"]["latency_ms"] == 1.2);
  CHECK(out["improved"] == json::array({"silu"}));
}
