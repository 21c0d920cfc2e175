#include "pipeline/executor.h"

#include <chrono>
#include <fstream>
#include <future>
#include <mutex>
#include <thread>

#include <spdlog/spdlog.h>

#include "core/errors.h"
#include "core/text.h"
#include "pipeline/expressions.h"

namespace accelopt {

namespace fs = std::filesystem;
using nlohmann::json;

// The expression context of the stages being run (one per nesting level).
struct Executor::Scope {
  json context;
  bool in_loop = false;
};

struct Executor::StageRecord {
  std::string status = "ok";  // ok | failed | skipped
  json outputs;
  json error;
  int failed_items = 0;
};

namespace {

// A stage's log.txt, shared with threads that may outlive a timed-out call.
struct StageLog {
  std::mutex mutex;
  std::ofstream file;
  std::string prefix;
  void Write(int level, const std::string& message) {
    spdlog::log(static_cast<spdlog::level::level_enum>(level), "[{}] {}", prefix, message);
    std::lock_guard<std::mutex> lock(mutex);
    static const char* kNames[] = {"trace", "debug", "info", "warn", "error"};
    file << "[" << kNames[std::clamp(level, 0, 4)] << "] " << message << "\n";
    file.flush();
  }
};

std::string Pad(int index) {
  char buffer[16];
  std::snprintf(buffer, sizeof(buffer), "%02d", index);
  return buffer;
}

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

bool Retryable(const RetrySpec& retry, const std::string& kind) {
  if (retry.on.empty()) return kind != "config_error" && kind != "expression_error";
  return std::find(retry.on.begin(), retry.on.end(), kind) != retry.on.end();
}

std::atomic<int> g_abandoned_stages{0};

// Whether a timed-out stage's thread has finished, and whether it was given up on.
struct StageThreadState {
  std::mutex mutex;
  bool done = false;
  bool abandoned = false;
};

// Runs the stage, giving up after timeout_ms (0 = wait forever). On timeout
// the stage's cancel flag is raised; a stage that ignores it for 2 s more is
// left to finish in the background (counted by AbandonedStages) and its late
// result is discarded.
json RunWithTimeout(std::shared_ptr<Stage> stage, const StageInvocation& invocation) {
  if (invocation.timeout_ms <= 0) return stage->Run(invocation);
  auto promise = std::make_shared<std::promise<json>>();
  auto future = promise->get_future();
  auto state = std::make_shared<StageThreadState>();
  std::thread([stage, invocation, promise, state] {
    try {
      promise->set_value(stage->Run(invocation));
    } catch (...) {
      promise->set_exception(std::current_exception());
    }
    std::lock_guard<std::mutex> lock(state->mutex);
    state->done = true;
    if (state->abandoned) --g_abandoned_stages;
  }).detach();
  if (future.wait_for(std::chrono::milliseconds(invocation.timeout_ms)) == std::future_status::ready) return future.get();
  invocation.cancelled->store(true);
  if (future.wait_for(std::chrono::seconds(2)) == std::future_status::ready) {
    try {
      future.get();
    } catch (...) {
    }
  }
  {
    std::lock_guard<std::mutex> lock(state->mutex);
    if (!state->done) {
      state->abandoned = true;
      ++g_abandoned_stages;
    }
  }
  throw StageError("timeout", "stage exceeded its timeout of " + std::to_string(invocation.timeout_ms) + " ms");
}

// The stage's timeout in ms: the literal of the file, or its `${{ }}` expression
// resolved now (a duration string such as "90s", or a number of seconds).
int64_t ResolveTimeoutMs(const StageSpec& spec, const json& context) {
  if (spec.timeout_expr.is_null()) return spec.timeout_ms;
  json value = ResolveValue(spec.timeout_expr, context, spec.where);
  std::optional<std::chrono::milliseconds> parsed;
  if (value.is_number() && value.get<double>() >= 0) {
    parsed = std::chrono::milliseconds(static_cast<int64_t>(value.get<double>() * 1000.0));
  } else if (value.is_string()) {
    parsed = ParseDuration(value.get<std::string>());
  }
  if (!parsed) {
    throw StageError("config_error", spec.where.ToString() + ": timeout " + spec.timeout_expr.get<std::string>() +
                                         " resolved to " + value.dump() +
                                         "; expected a duration such as 30s, 500ms, 5m or a number of seconds");
  }
  return parsed->count();
}

}  // namespace

int AbandonedStages() { return g_abandoned_stages.load(); }

namespace {

// The first stage that `spec` takes inputs from (in `with` or `for_each`) that
// failed, or was skipped because one of its own inputs failed; "" if none.
// Running `spec` would only fail again on null inputs, so it is skipped.
std::string FailedInput(const StageSpec& spec, const json& context) {
  const json& stages = context.at("stages");
  for (const json* value : {&spec.with, &spec.for_each}) {
    for (const auto& id : ReferencedStages(*value)) {
      auto it = stages.find(id);
      if (it == stages.end()) continue;
      if ((*it).value("status", "") == "failed" || it->contains("failed_input")) return id;
    }
  }
  return "";
}

}  // namespace

namespace {

json ApplyDefaults(const json& with, const json& params) {
  json out = with;
  for (const auto& [name, param] : params.items()) {
    if (!out.contains(name) && param.contains("default")) out[name] = param["default"];
  }
  return out;
}

// The resolved `with` against the stage's schema, with validate's messages
// (pipeline/param_check.h), the YAML location and the expression text.
void CheckResolvedTypes(const json& with, const json& params, const std::string& uses, const StageSpec& spec) {
  auto where = [&](const std::string& name) {
    return (spec.with_where.count(name) ? spec.with_where.at(name) : spec.where).ToString() + ": ";
  };
  auto expression = [&](const std::string& name) -> std::string {
    if (!spec.with.contains(name) || !ContainsExpression(spec.with[name])) return "";
    return spec.with[name].is_string() ? spec.with[name].get<std::string>() : spec.with[name].dump();
  };
  for (const auto& [name, param] : params.items()) {
    if (param.value("required", false) && (!with.contains(name) || with[name].is_null())) {
      throw StageError("config_error", where(name) + MissingParamMessage(name, uses, expression(name)));
    }
  }
  for (const auto& [name, value] : with.items()) {
    if (!params.contains(name)) continue;
    if (auto problem = CheckParamValue(value, params[name])) {
      throw StageError("config_error", where(name) + ParamProblemMessage(name, uses, *problem, expression(name)));
    }
  }
}

}  // namespace

Executor::Executor(const Pipeline& pipeline, const ResolvedStages& stages, const RunDirectory& run_dir, Progress& progress)
    : pipeline_(pipeline), stages_(stages), run_dir_(run_dir), progress_(progress) {}

RunResult Executor::Run() {
  Scope scope;
  scope.context = {{"vars", pipeline_.vars},
                   {"backend", pipeline_.backend},
                   {"pipeline", {{"name", pipeline_.name}, {"file", pipeline_.file.string()}, {"dir", pipeline_.file.parent_path().string()}}},
                   {"run", {{"dir", run_dir_.path().string()}}},
                   {"stages", json::object()},
                   {"__status", "success"}};
  try {
    scope.context["vars"] = ResolveValue(pipeline_.vars, scope.context, {pipeline_.file.string()});
  } catch (const StageError& error) {
    spdlog::error("cannot resolve vars: {}", error.what());
    result_.status = "failed";
    result_.failed_stages = 1;
    return result_;
  }
  RunList(pipeline_.stages, run_dir_.path() / "stages", scope);
  if (Cancelled()) result_.status = "interrupted";
  else if (failed_) result_.status = "failed";
  return result_;
}

bool Executor::RunList(const std::vector<StageSpec>& list, const fs::path& dir, Scope& scope) {
  int index = 0;
  for (const auto& spec : list) {
    ++index;
    const fs::path stage_dir = dir / (Pad(index) + "-" + spec.id);
    StageRecord record;
    scope.context["__status"] = failed_ ? "failure" : "success";
    bool run = !Cancelled();
    // After a failure only stages that ask for it (always() / failure()) run.
    const bool wants_failure = spec.if_expr.find("always()") != std::string::npos ||
                               spec.if_expr.find("failure()") != std::string::npos;
    if (run && failed_ && !wants_failure) {
      run = false;
    } else if (run && !spec.if_expr.empty()) {
      try {
        run = EvaluateCondition(spec.if_expr, scope.context, spec.if_where);
      } catch (const StageError& error) {
        record.status = "failed";
        record.error = error.ToJson();
        run = false;
      }
    }
    std::string failed_input;
    if (run && !wants_failure) failed_input = FailedInput(spec, scope.context);
    if (!failed_input.empty()) {
      spdlog::warn("stage {} skipped: its input stage '{}' did not succeed", spec.id, failed_input);
      run = false;
    }
    if (run) {
      record = spec.loop ? RunLoop(spec, stage_dir, scope) : RunStage(spec, stage_dir, scope);
    } else if (record.status != "failed") {
      record.status = "skipped";
    }
    json entry = {{"status", record.status}, {"outputs", record.outputs}, {"error", record.error}};
    if (!failed_input.empty()) entry["failed_input"] = failed_input;
    scope.context["stages"][spec.id] = entry;
    if (scope.in_loop) scope.context["iter"][spec.id] = entry;
    {
      std::lock_guard<std::mutex> lock(result_mutex_);
      result_.stages[spec.id] = {{"status", record.status}, {"error", record.error}};
      result_.failed_items += record.failed_items;
      if (record.status == "failed") {
        ++result_.failed_stages;
        if (spec.on_failure != "continue") failed_ = true;
      }
    }
    if (record.status == "ok" && !spec.carry.empty() && scope.in_loop) {
      json context = scope.context;
      context["this"] = entry;
      context["outputs"] = record.outputs;
      try {
        for (const auto& [key, value] : spec.carry.items()) scope.context["carry"][key] = ResolveValue(value, context, spec.where);
      } catch (const StageError& error) {
        spdlog::error("{}: carry update failed: {}", spec.id, error.what());
        failed_ = true;
      }
    }
  }
  return !failed_;
}

Executor::StageRecord Executor::RunStage(const StageSpec& spec, const fs::path& dir, Scope& scope) {
  if (!spec.for_each.is_null()) return RunForEach(spec, dir, scope.context);
  StageRecord record;
  auto start = std::chrono::steady_clock::now();
  progress_.StageStarted(spec.id, 0);
  int attempts = 0;
  try {
    record.outputs = Invoke(spec, dir, scope.context, spec.id, &attempts);
  } catch (const StageError& error) {
    record.status = "failed";
    record.error = error.ToJson();
    spdlog::error("stage {} failed ({}): {}", spec.id, error.kind(), error.what());
  }
  run_dir_.WriteJson(dir / "status.json", {{"status", record.status}, {"attempts", attempts},
                                           {"seconds", SecondsSince(start)}, {"error", record.error}});
  Record({{"event", "stage_finished"}, {"stage", spec.id}, {"dir", fs::relative(dir, run_dir_.path()).string()},
          {"status", record.status}, {"reused", attempts == 0}});
  progress_.StageFinished(spec.id, record.status, SecondsSince(start));
  return record;
}

json Executor::Invoke(const StageSpec& spec, const fs::path& dir, const json& context, const std::string& label,
                      int* attempts) {
  auto stage = stages_.at(spec.id);
  fs::create_directories(dir);
  auto log = std::make_shared<StageLog>();
  log->file.open(dir / "log.txt", std::ios::app);
  log->prefix = label;
  json params = stage->Params();
  json resolved = json::object();
  for (const auto& [name, value] : spec.with.items()) {
    auto where = spec.with_where.count(name) ? spec.with_where.at(name) : spec.where;
    resolved[name] = ResolveValue(value, context, where);
  }
  json with = ApplyDefaults(resolved, params);
  if (auto previous = Reusable(dir, with)) {
    log->Write(2, "reusing the outputs of an earlier attempt (resume)");
    ++reused_;
    *attempts = 0;
    return *previous;
  }
  // A directory left by an interrupted attempt holds nothing we can trust.
  std::error_code ignored;
  fs::remove(dir / "outputs.json", ignored);
  fs::remove(dir / "status.json", ignored);
  run_dir_.WriteJson(dir / "inputs.json", {{"uses", spec.uses}, {"with", with}});
  CheckResolvedTypes(with, params, stage->Uses(), spec);

  StageInvocation invocation;
  invocation.stage_id = label;
  invocation.with = with;
  invocation.vars = context.value("vars", json::object());
  invocation.stage_dir = dir;
  invocation.run_dir = run_dir_.path();
  invocation.timeout_ms = ResolveTimeoutMs(spec, context);
  invocation.log = [log](int level, const std::string& message) { log->Write(level, message); };
  Progress* progress = &progress_;
  std::string id = spec.id;
  invocation.progress = [progress, id](int64_t done, int64_t total, const std::string& text) { progress->Item(id, done, total, text); };

  for (int attempt = 1;; ++attempt) {
    *attempts = attempt;
    invocation.cancelled = std::make_shared<std::atomic<bool>>(Cancelled());
    try {
      json outputs = RunWithTimeout(stage, invocation);
      run_dir_.WriteJson(dir / "outputs.json", outputs);
      return outputs;
    } catch (const StageError& error) {
      log->Write(4, "attempt " + std::to_string(attempt) + " failed (" + error.kind() + "): " + error.what());
      if (attempt >= spec.retry.max_attempts || !Retryable(spec.retry, error.kind()) || Cancelled()) throw;
    } catch (const std::exception& error) {
      log->Write(4, std::string("attempt failed: ") + error.what());
      if (attempt >= spec.retry.max_attempts || Cancelled()) throw StageError("stage_error", error.what());
    }
    int64_t delay_ms = spec.retry.backoff_ms << std::min(attempt - 1, 10);
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
  }
}

void Executor::Record(json event) {
  if (!journal_) return;
  try {
    journal_->Append(std::move(event));
  } catch (const std::exception& error) {
    spdlog::warn("journal: {}", error.what());
  }
}

std::optional<json> Executor::Reusable(const fs::path& dir, const json& with) const {
  if (!resume_) return std::nullopt;
  try {
    if (!fs::exists(dir / "status.json") || !fs::exists(dir / "outputs.json")) return std::nullopt;
    json status = json::parse(ReadFile(dir / "status.json"));
    json inputs = json::parse(ReadFile(dir / "inputs.json"));
    if (status.value("status", "") != "ok" || inputs.value("with", json()) != with) return std::nullopt;
    return json::parse(ReadFile(dir / "outputs.json"));
  } catch (const std::exception&) {
    return std::nullopt;  // unreadable or half-written: run again
  }
}

Executor::StageRecord Executor::RunForEach(const StageSpec& spec, const fs::path& dir, const json& context) {
  StageRecord record;
  auto start = std::chrono::steady_clock::now();
  json items;
  try {
    items = ResolveValue(spec.for_each, context, spec.for_each_where);
  } catch (const StageError& error) {
    record.status = "failed";
    record.error = error.ToJson();
    return record;
  }
  if (!items.is_array()) {
    record.status = "failed";
    record.error = StageError("config_error", spec.for_each_where.ToString() + ": for_each must resolve to a list, got " +
                                                  std::string(items.type_name())).ToJson();
    return record;
  }
  const int64_t total = static_cast<int64_t>(items.size());
  progress_.StageStarted(spec.id, total);
  std::vector<json> outputs(items.size());
  std::atomic<size_t> next{0};
  std::atomic<int64_t> done{0};
  std::atomic<int> errors{0};
  std::atomic<int> not_ok{0};
  auto worker = [&] {
    for (size_t i; (i = next.fetch_add(1)) < items.size();) {
      if (Cancelled()) {
        outputs[i] = {{"ok", false}, {"error", {{"kind", "cancelled"}, {"message", "run interrupted"}}}};
        errors++;
        continue;
      }
      json item_context = context;
      item_context[spec.as] = items[i];
      item_context["index"] = i;
      char name[32];
      std::snprintf(name, sizeof(name), "item-%04zu", i);
      int attempts = 0;
      try {
        outputs[i] = Invoke(spec, dir / name, item_context, spec.id + "[" + std::to_string(i) + "]", &attempts);
        if (outputs[i].is_object() && outputs[i].value("ok", true) == false) not_ok++;
        run_dir_.WriteJson(dir / name / "status.json", {{"status", "ok"}, {"attempts", attempts}});
        Record({{"event", "item_finished"}, {"stage", spec.id}, {"item", i}, {"status", "ok"}, {"reused", attempts == 0}});
      } catch (const StageError& error) {
        errors++;
        outputs[i] = {{"ok", false}, {"error", error.ToJson()}, {"item", items[i]}};
        run_dir_.WriteJson(dir / name / "status.json", {{"status", "failed"}, {"attempts", attempts}, {"error", error.ToJson()}});
        Record({{"event", "item_finished"}, {"stage", spec.id}, {"item", i}, {"status", "failed"}, {"kind", error.kind()}});
        spdlog::error("{}[{}] failed ({}): {}", spec.id, i, error.kind(), error.what());
      }
      progress_.Item(spec.id, ++done, total, "");
    }
  };
  int max_parallel = 1;
  try {
    json value = ResolveValue(spec.max_parallel, context, spec.where);
    if (value.is_number_integer() && value.get<int64_t>() >= 1) max_parallel = static_cast<int>(value.get<int64_t>());
    else spdlog::warn("{}: max_parallel resolved to {}, using 1", spec.id, value.dump());
  } catch (const StageError& error) {
    spdlog::warn("{}: {}; using max_parallel 1", spec.id, error.what());
  }
  int threads = std::max(1, std::min({max_parallel, parallel_cap_, static_cast<int>(items.size())}));
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (auto& thread : pool) thread.join();
  record.outputs = json(outputs);
  // Items that ran but reported ok: false (e.g. a wrong candidate kernel)
  // count toward the exit code unless the stage expects them.
  record.failed_items = errors + (spec.count_failed_items ? not_ok.load() : 0);
  if (errors > 0 && spec.on_failure != "continue") {
    record.status = "failed";
    record.error = {{"kind", "items_failed"}, {"message", std::to_string(errors.load()) + " of " + std::to_string(total) + " items failed"}};
  }
  run_dir_.WriteJson(dir / "outputs.json", record.outputs);
  run_dir_.WriteJson(dir / "status.json", {{"status", record.status}, {"items", total}, {"failed_items", record.failed_items},
                                           {"seconds", SecondsSince(start)}, {"error", record.error}});
  progress_.StageFinished(spec.id, record.status + " (" + std::to_string(total - record.failed_items) + "/" +
                                       std::to_string(total) + " items ok)", SecondsSince(start));
  return record;
}

Executor::StageRecord Executor::RunLoop(const StageSpec& spec, const fs::path& dir, Scope& outer) {
  StageRecord record;
  const LoopSpec& loop = *spec.loop;
  Scope scope;
  scope.context = outer.context;
  scope.in_loop = true;
  int64_t max_iterations = 0;
  try {
    json max = ResolveValue(loop.max_iterations, outer.context, loop.where);
    if (!max.is_number_integer() || max.get<int64_t>() < 1) {
      throw StageError("config_error", loop.where.ToString() + ": max_iterations must resolve to an integer >= 1, got " + max.dump());
    }
    max_iterations = max.get<int64_t>();
    scope.context["carry"] = ResolveValue(loop.carry, outer.context, loop.where);
  } catch (const StageError& error) {
    record.status = "failed";
    record.error = error.ToJson();
    return record;
  }
  int64_t iteration = 0;
  json last = json::object();
  for (; iteration < max_iterations && !Cancelled(); ++iteration) {
    scope.context["loop"] = {{"iteration", iteration}, {"max_iterations", max_iterations}, {"id", spec.id}};
    scope.context["iter"] = json::object();
    spdlog::info("loop {}: iteration {}/{}", spec.id, iteration + 1, max_iterations);
    bool ok = RunList(spec.body, dir / ("iter-" + std::to_string(iteration)), scope);
    last = scope.context["iter"];
    run_dir_.WriteJson(dir / "carry.json", {{"iteration", iteration}, {"carry", scope.context["carry"]}});
    if (!ok) {
      record.status = "failed";
      record.error = {{"kind", "loop_failed"}, {"message", "iteration " + std::to_string(iteration) + " failed"}};
      ++iteration;
      break;
    }
    if (!loop.until.empty()) {
      try {
        if (EvaluateCondition(loop.until, scope.context, loop.where)) {
          ++iteration;
          break;
        }
      } catch (const StageError& error) {
        record.status = "failed";
        record.error = error.ToJson();
        ++iteration;
        break;
      }
    }
  }
  // Stages of the loop body stay visible afterwards under stages.<id>.
  outer.context["stages"] = scope.context["stages"];
  record.outputs = {{"iterations", iteration}, {"carry", scope.context["carry"]}, {"last", last}};
  run_dir_.WriteJson(dir / "outputs.json", record.outputs);
  return record;
}

}  // namespace accelopt
