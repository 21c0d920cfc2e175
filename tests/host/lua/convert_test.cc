// JSON <-> Lua conversion rules (null sentinel, array/object markers,
// integer vs float, paths in errors, depth limit).
#include <catch2/catch.hpp>

#include <string>

#include "lua/convert.h"
#include "lua/stage_script.h"

using accelopt::lua::JsonToLuaDebug;
using accelopt::lua::LuaError;
using accelopt::lua::RunStageFromSource;
using nlohmann::json;

namespace {

/// Runs `body` as the run function with input {"with": with}.
json RunWith(const std::string& body, const json& with = json::object()) {
  return RunStageFromSource("return { run = function(input)\n" + body + "\nend }", "convert.lua",
                            json{{"with", with}}, {});
}

LuaError RunWithError(const std::string& body, const json& with = json::object()) {
  try {
    RunWith(body, with);
  } catch (const LuaError& e) {
    return e;
  }
  FAIL("expected a LuaError from: " << body);
  throw std::logic_error("unreachable");
}

const char* kDocument = R"({"a":null,"b":{},"c":[],"d":1,"e":1.5,"f":[1,2,{"x":"y"}]})";

}  // namespace

TEST_CASE("lua convert: a document survives the round trip through Lua", "[lua][convert]") {
  json doc = json::parse(kDocument);
  json out = RunWith("return input.with", doc);
  CHECK(out == doc);
  CHECK(out.dump() == doc.dump());
  CHECK(out["d"].is_number_integer());
  CHECK(out["e"].is_number_float());
  CHECK(out["b"].is_object());
  CHECK(out["c"].is_array());
  CHECK(out["a"].is_null());

  // Also after Lua code touched every part of it.
  out = RunWith(R"(
    local w = input.with
    local t = { a = w.a, b = w.b, c = w.c, d = w.d, e = w.e, f = {} }
    for i, v in ipairs(w.f) do t.f[i] = v end
    return t)",
                doc);
  CHECK(out == doc);
}

TEST_CASE("lua convert: what Lua sees", "[lua][convert]") {
  json out = RunWith(R"(
    local w = input.with
    return {
      null_is_sentinel = w.a == accel.null,
      null_text = tostring(w.a),
      null_type = type(w.a),
      empty_object_len = #w.b,
      empty_array_len = #w.c,
      d_type = math.type(w.d),
      e_type = math.type(w.e),
      f_len = #w.f,
      nested = w.f[3].x,
      has_a = next(w) ~= nil,
    })",
                     json::parse(kDocument));
  CHECK(out == json{{"null_is_sentinel", true}, {"null_text", "null"}, {"null_type", "userdata"},
                    {"empty_object_len", 0}, {"empty_array_len", 0}, {"d_type", "integer"},
                    {"e_type", "float"}, {"f_len", 3}, {"nested", "y"}, {"has_a", true}});
}

TEST_CASE("lua convert: Lua tables to JSON", "[lua][convert]") {
  json out = RunWith(R"(
    return {
      empty = {},
      marked_array = accel.array(),
      marked_object = accel.object({}),
      seq = {1, 2, 3},
      obj = {x = 1, y = "two"},
      null = accel.null,
      float_int = 2.0,
      big = math.maxinteger,
      nested = {{1}, {{}}},
      marked_array_items = accel.array({"a", "b"}),
      utf8 = "h\u{E9}llo",
    })");
  CHECK(out == json::parse(R"({"empty": {}, "marked_array": [], "marked_object": {}, "seq": [1, 2, 3],
                               "obj": {"x": 1, "y": "two"}, "null": null, "float_int": 2.0,
                               "big": 9223372036854775807, "nested": [[1], [{}]],
                               "marked_array_items": ["a", "b"], "utf8": "h\u00e9llo"})"));
  CHECK(out["float_int"].is_number_float());
  CHECK(out["big"].is_number_integer());
}

TEST_CASE("lua convert: unconvertible values name their path", "[lua][convert]") {
  struct Case {
    const char* body;
    const char* message;
  } cases[] = {
      {"return { rows = { 1, 2, { fn = print } } }", "outputs.rows[3].fn: cannot convert a function to JSON"},
      {"return { co = coroutine.create(print) }", "outputs.co: cannot convert a thread (coroutine) to JSON"},
      {"return { x = 0/0 }", "outputs.x: cannot convert"},
      {"return { x = 1/0 }", "not a finite number"},
      {"return { [\"a b\"] = { bad = '\\xff' } }", "outputs[\"a b\"].bad: string is not valid UTF-8"},
      {"return { holes = { 1, nil, 3 } }", "outputs.holes: table keys are integers but not a sequence"},
      {"return { marked = accel.array({ 1, nil, 3 }) }", "outputs.marked: array has a hole at index 2"},
      {"return { mixed = { 1, x = 2 } }", "outputs.mixed: table key [1] is not a string"},
      {"return { float_key = { [1.5] = true } }", "table key [1.5] is not a string"},
      {"return { arr = accel.array({ x = 1 }) }", "outputs.arr: array has a key that is not an index"},
      {"local t = {} t.self = t return t", "nested deeper than 64 levels (cyclic table?)"},
  };
  for (const auto& c : cases) {
    INFO(c.body);
    LuaError e = RunWithError(c.body);
    CHECK(e.kind == "bad_output");
    CHECK_THAT(e.what(), Catch::Contains(c.message));
  }
}

TEST_CASE("lua convert: depth limit on input", "[lua][convert]") {
  json deep = json::array();
  for (int i = 0; i < 70; ++i) deep = json::array({deep});
  LuaError e = RunWithError("return {}", deep);
  CHECK(e.kind == "script_error");
  CHECK_THAT(e.what(), Catch::Contains("nested deeper than 64 levels"));

  json ok = json::array();
  for (int i = 0; i < 60; ++i) ok = json::array({ok});
  CHECK(RunWith("return input.with", ok) == ok);
}

TEST_CASE("lua convert: accel.json encode/decode", "[lua][convert]") {
  json out = RunWith(R"(
    local doc = accel.json.decode(input.with.text)
    doc.f[#doc.f + 1] = 4
    return {
      text = accel.json.encode(accel.json.decode(input.with.text)),
      doc = doc,
      big = accel.json.decode("18446744073709551615"),
      pretty = accel.json.encode({a = 1}, 2),
    })",
                     json{{"text", kDocument}});
  CHECK(out["text"] == json::parse(kDocument).dump());
  CHECK(out["doc"]["f"] == json::parse(R"([1, 2, {"x": "y"}, 4])"));
  CHECK(out["doc"]["b"] == json::object());
  CHECK(out["doc"]["c"] == json::array());
  CHECK(out["big"].is_number_float());
  CHECK(out["pretty"] == "{\n  \"a\": 1\n}");

  LuaError e = RunWithError("return accel.json.decode('{bad')");
  CHECK(e.kind == "script_error");
  CHECK_THAT(e.what(), Catch::Contains("accel.json.decode: [json.exception.parse_error"));
  e = RunWithError("return { s = accel.json.encode({ f = print }) }");
  CHECK_THAT(e.what(), Catch::Contains("value.f: cannot convert a function to JSON"));
}

TEST_CASE("lua convert: JsonToLuaDebug", "[lua][convert]") {
  CHECK(JsonToLuaDebug(json::parse(kDocument)) ==
        R"({a = accel.null, b = {}, c = accel.array{}, d = 1, e = 1.5, f = {1, 2, {x = "y"}}})");
}
