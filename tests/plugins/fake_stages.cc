// Test-only plugin: small deterministic stages for executor tests.
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <thread>

#include "accelopt/plugin_sdk.hpp"

using nlohmann::json;
using accelopt::sdk::StageContext;
using accelopt::sdk::StageFailure;

namespace {

// Returns {"value": with.value} (echo), for expression and fan-out tests.
json Echo(StageContext& ctx) { return {{"value", ctx.With().value("value", json())}, {"stage_id", ctx.StageId()}}; }

// Adds with.a + with.b.
json Add(StageContext& ctx) { return {{"sum", ctx.With().at("a").get<int64_t>() + ctx.With().at("b").get<int64_t>()}}; }

// Fails with kind with.kind (default "boom") when with.fail is true.
json MaybeFail(StageContext& ctx) {
  if (ctx.With().value("fail", false)) throw StageFailure(ctx.With().value("kind", "boom"), "asked to fail");
  return {{"ok", true}};
}

// Sleeps with.ms milliseconds, polling the cancel flag.
json Sleep(StageContext& ctx) {
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ctx.With().value("ms", 0));
  while (std::chrono::steady_clock::now() < until) {
    if (ctx.Cancelled()) throw StageFailure("cancelled", "cancelled while sleeping");
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return {{"slept_ms", ctx.With().value("ms", 0)}};
}

// Counts calls per process and fails the first with.failures of them
// (for retry tests; the counter key is with.key).
json Flaky(StageContext& ctx) {
  static std::map<std::string, int> calls;
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  int n = ++calls[ctx.With().value("key", "default")];
  if (n <= ctx.With().value("failures", 0)) throw StageFailure("transient", "failure #" + std::to_string(n));
  return {{"calls", n}};
}

// Sleeps with.ms and reports the most items this stage had in flight at
// once (process-wide), to observe for_each parallelism without timing.
json Concurrent(StageContext& ctx) {
  static std::atomic<int> in_flight{0};
  static std::atomic<int> max_seen{0};
  int now = ++in_flight;
  for (int seen = max_seen.load(); now > seen && !max_seen.compare_exchange_weak(seen, now);) {
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(ctx.With().value("ms", 50)));
  --in_flight;
  return {{"max_in_flight", max_seen.load()}};
}

// Returns with.value itself as the outputs (e.g. {"ok": false}).
json Return(StageContext& ctx) { return ctx.With().value("value", json::object()); }

// Fails with a message that is not valid UTF-8 (the SDK's error path must not throw).
json BadUtf8(StageContext&) { throw StageFailure("boom", "bad byte \xff here", {{"raw", "\xfe"}}); }

// Returns with.mode (declared with an enum).
json Choice(StageContext& ctx) { return {{"mode", ctx.With().value("mode", "")}}; }

// Calls with.module.with.function(*with.args, **with.kwargs) through python_call_args.
json PythonArgs(StageContext& ctx) {
  return {{"result", ctx.PythonCallArgs(ctx.With().at("module"), ctx.With().at("function"),
                                        ctx.With().value("args", json::array()), ctx.With().value("kwargs", json::object()))}};
}

const AccelStageDescriptor kStages[] = {
    ACCELOPT_STAGE("test_return", "Return `value` as the outputs.", R"JSON({"value": {"type": "any"}})JSON", Return),
    ACCELOPT_STAGE("test_concurrent", "Sleep and report the peak number of concurrent calls.",
                   R"JSON({"ms": {"type": "integer", "default": 50}})JSON", Concurrent),
    ACCELOPT_STAGE("test_echo", "Echo `value`.", R"JSON({"value": {"type": "any", "doc": "anything"}})JSON", Echo),
    ACCELOPT_STAGE_WITH_OUTPUTS("test_add", "Add two integers.",
                                R"JSON({"a": {"type": "integer", "required": true}, "b": {"type": "integer", "default": 0}})JSON",
                                R"JSON({"sum": {"type": "integer", "doc": "a + b"}})JSON", Add),
    ACCELOPT_STAGE("test_maybe_fail", "Fail on request.",
                   R"JSON({"fail": {"type": "boolean", "default": false}, "kind": {"type": "string"}})JSON", MaybeFail),
    ACCELOPT_STAGE("test_sleep", "Sleep some milliseconds.", R"JSON({"ms": {"type": "integer", "required": true}})JSON", Sleep),
    ACCELOPT_STAGE("test_flaky", "Fail the first N calls.",
                   R"JSON({"failures": {"type": "integer", "default": 0}, "key": {"type": "string"}})JSON", Flaky),
    ACCELOPT_STAGE("test_bad_utf8", "Fail with a message that is not UTF-8.", R"JSON({})JSON", BadUtf8),
    ACCELOPT_STAGE_WITH_OUTPUTS("test_choice", "Return `mode`, one of a closed set.",
                                R"JSON({"mode": {"type": "string", "default": "fast", "enum": ["fast", "slow"]}})JSON",
                                R"JSON({"mode": {"type": "string", "enum": ["fast", "slow"]}})JSON", Choice),
    ACCELOPT_STAGE("test_python_args", "Call Python with positional and keyword arguments.",
                   R"JSON({"module": {"type": "string", "required": true}, "function": {"type": "string", "required": true},
                           "args": {"type": "array"}, "kwargs": {"type": "object"}})JSON", PythonArgs),
};

}  // namespace

ACCELOPT_EXPORT_PLUGIN("fake_stages", "1.0.0", kStages)
