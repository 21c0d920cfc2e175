#include "pipeline/executor.h"

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <fstream>
#include <future>
#include <mutex>
#include <optional>
#include <thread>

#include <spdlog/spdlog.h>

#include "core/digest.h"
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
  int64_t items = 0;       // for_each: items in all
  json first_item_error;  // for_each: the error of the first failed item
};

namespace {

// A stage's log.txt, shared with threads that may outlive a timed-out call.
// The file is opened without following symlinks (core/run_dir.h).
struct StageLog {
  std::mutex mutex;
  int fd = -1;
  std::string prefix;
  ~StageLog() {
    if (fd >= 0) ::close(fd);
  }
  void Write(int level, const std::string& message) {
    spdlog::log(static_cast<spdlog::level::level_enum>(level), "[{}] {}", prefix, message);
    std::lock_guard<std::mutex> lock(mutex);
    if (fd < 0) return;
    static const char* kNames[] = {"trace", "debug", "info", "warn", "error"};
    std::string line = std::string("[") + kNames[std::clamp(level, 0, 4)] + "] " + message + "\n";
    for (size_t done = 0; done < line.size();) {
      ssize_t n = ::write(fd, line.data() + done, line.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      done += static_cast<size_t>(n);
    }
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
//
// `run_cancelled` is the run's Ctrl-C flag: while the stage runs it is
// polled and copied into the stage's own cancel flag. `nominal_timeout_ms`
// is the stage's configured timeout, for the message (the invocation's
// timeout_ms is what was left of it once `with` was resolved).
json RunWithTimeout(std::shared_ptr<Stage> stage, const StageInvocation& invocation,
                    const std::shared_ptr<std::atomic<bool>>& run_cancelled, int64_t nominal_timeout_ms) {
  if (invocation.timeout_ms <= 0 && !run_cancelled) return stage->Run(invocation);
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
  // Wait in slices so that a Ctrl-C reaches the running stage at once.
  const auto deadline = invocation.timeout_ms > 0
                            ? std::chrono::steady_clock::now() + std::chrono::milliseconds(invocation.timeout_ms)
                            : std::chrono::steady_clock::time_point::max();
  while (true) {
    auto slice = std::chrono::milliseconds(100);
    if (deadline != std::chrono::steady_clock::time_point::max()) {
      slice = std::min(slice, std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()));
    }
    if (slice.count() > 0 && future.wait_for(slice) == std::future_status::ready) return future.get();
    if (future.wait_for(std::chrono::seconds(0)) == std::future_status::ready) return future.get();
    if (run_cancelled && run_cancelled->load()) invocation.cancelled->store(true);
    if (std::chrono::steady_clock::now() >= deadline) break;
  }
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
  throw StageError("timeout", "stage exceeded its timeout of " + std::to_string(nominal_timeout_ms) + " ms");
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

// For a stage that asks to run after a failure (always() / failure()): the
// first stage it takes inputs from that produced no outputs (skipped, or
// failed before it had any); "" if none. A failed loop keeps its carry, so a
// report over it still runs; a report over a stage that never ran would only
// add a follow-on error ("attempt to index a nil value"), so it is skipped.
std::string MissingInput(const StageSpec& spec, const json& context) {
  const json& stages = context.at("stages");
  for (const json* value : {&spec.with, &spec.for_each}) {
    const std::string text = value->dump();
    for (const auto& id : ReferencedStages(*value)) {
      // Only a stage whose outputs are read: its status (`stages.x.status`) is there either way.
      if (text.find("stages." + id + ".outputs") == std::string::npos) continue;
      auto it = stages.find(id);
      if (it == stages.end()) continue;
      const std::string status = (*it).value("status", "");
      if ((status == "skipped" || status == "failed") && (*it).value("outputs", json()).is_null()) return id;
    }
  }
  return "";
}

// " (the first cause: stage 'load' failed (config_error): ...)" from a run's first failure.
std::string FirstCause(const json& failure) {
  if (!failure.is_object()) return "";
  return " (the first cause: stage '" + failure.value("stage", std::string("?")) + "' failed (" +
         failure.value("kind", std::string("error")) + "): " + failure.value("message", std::string()) + ")";
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
    if (auto problem = CheckParamKeys(value, params[name], with)) {
      throw StageError("config_error", where(name) + ParamProblemMessage(name, uses, *problem, expression(name)));
    }
  }
}

}  // namespace

Executor::Executor(const Pipeline& pipeline, const ResolvedStages& stages, const RunDirectory& run_dir, Progress& progress)
    : pipeline_(pipeline), stages_(stages), run_dir_(run_dir), progress_(progress) {}

RunResult Executor::Run() {
  if (resume_ && journal_ != nullptr) {
    try {
      journaled_hashes_ = Journal::OutputHashes(Journal::Read(journal_->path()));
    } catch (const std::exception& error) {
      spdlog::warn("resume: cannot read the journal ({}); nothing is reused", error.what());
    }
  }
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
    result_.first_failure = {{"stage", "vars"}, {"dir", ""}, {"kind", error.kind()}, {"message", error.what()}};
    return result_;
  }
  RunList(pipeline_.stages, run_dir_.path() / "stages", scope);
  // One rule: any failed stage or counted item makes the run failed, also
  // when the pipeline went on past it (on_failure: continue).
  if (Cancelled()) result_.status = "interrupted";
  else if (failed_ || result_.failed_stages > 0 || result_.failed_items > 0) result_.status = "failed";
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
    if (run) failed_input = wants_failure ? MissingInput(spec, scope.context) : FailedInput(spec, scope.context);
    if (!failed_input.empty()) {
      json first;
      {
        std::lock_guard<std::mutex> lock(result_mutex_);
        first = result_.first_failure;
      }
      spdlog::warn("stage {} skipped: its input stage '{}' did not {}{}", spec.id, failed_input,
                   wants_failure ? "run" : "succeed", FirstCause(first));
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
      if (result_.first_failure.is_null() && (record.status == "failed" || record.failed_items > 0)) {
        json failure = {{"stage", spec.id}, {"dir", fs::relative(stage_dir, run_dir_.path()).string()}};
        if (record.status == "failed" && record.error.is_object()) {
          failure["kind"] = record.error.value("kind", "stage_error");
          failure["message"] = record.error.value("message", "");
        } else {
          failure["kind"] = "items_failed";
          std::string message = "stage '" + spec.id + "': " + std::to_string(record.failed_items) + " of " +
                                std::to_string(record.items) + " items failed";
          if (record.first_item_error.is_object()) {
            message += "; the first: " + record.first_item_error.value("kind", std::string("error")) + ": " +
                       record.first_item_error.value("message", std::string());
          }
          failure["message"] = message;
        }
        result_.first_failure = failure;
      }
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
        progress_.SearchCarry(scope.context["carry"]);
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
  std::string sha256;
  try {
    record.outputs = Invoke(spec, dir, scope.context, spec.id, &attempts, &sha256);
  } catch (const StageError& error) {
    record.status = "failed";
    record.error = error.ToJson();
    spdlog::error("stage {} failed ({}): {}", spec.id, error.kind(), error.what());
  } catch (const std::exception& error) {  // e.g. a symlink refused in the stage's folder
    record.status = "failed";
    record.error = StageError("stage_error", error.what()).ToJson();
    spdlog::error("stage {} failed (stage_error): {}", spec.id, error.what());
  }
  run_dir_.WriteJson(dir / "status.json", {{"status", record.status}, {"attempts", attempts},
                                           {"seconds", SecondsSince(start)}, {"error", record.error}});
  json event = {{"event", "stage_finished"}, {"stage", spec.id}, {"dir", fs::relative(dir, run_dir_.path()).string()},
                {"status", record.status}, {"reused", attempts == 0}};
  if (record.status == "ok" && !sha256.empty()) event["outputs_sha256"] = sha256;
  Record(std::move(event));
  progress_.StageFinished(spec.id, record.status, SecondsSince(start));
  return record;
}

json Executor::Invoke(const StageSpec& spec, const fs::path& dir, const json& context, const std::string& label,
                      int* attempts, std::string* outputs_sha256) {
  auto stage = stages_.at(spec.id);
  // Stage folders and their files never follow a symlink planted in the run directory.
  auto log = std::make_shared<StageLog>();
  try {
    run_dir_.EnsureDir(dir);
    log->fd = OpenForAppendNoFollow(run_dir_.path(), run_dir_.Relative(dir) / "log.txt");
  } catch (const std::exception& error) {
    throw StageError("stage_error", error.what());
  }
  log->prefix = label;
  json params = stage->Params();
  // The stage's clock starts here: resolving `with` counts against its timeout,
  // and each expression also stops at that deadline and on Ctrl-C.
  const int64_t timeout_ms = ResolveTimeoutMs(spec, context);
  const auto started = std::chrono::steady_clock::now();
  ExpressionBudget budget;
  budget.timeout_ms = timeout_ms;
  if (timeout_ms > 0) budget.deadline = started + std::chrono::milliseconds(timeout_ms);
  budget.cancelled = [this] { return Cancelled(); };
  json resolved = json::object();
  for (const auto& [name, value] : spec.with.items()) {
    auto where = spec.with_where.count(name) ? spec.with_where.at(name) : spec.where;
    resolved[name] = ResolveValue(value, context, where, &budget);
  }
  json with = ApplyDefaults(resolved, params);
  if (auto previous = Reusable(dir, with, outputs_sha256)) {
    log->Write(2, "reusing the outputs of an earlier attempt (resume)");
    ++reused_;
    *attempts = 0;
    return *previous;
  }
  // A directory left by an interrupted attempt holds nothing we can trust
  // (removed without following a symlink planted below the run directory).
  try {
    RemoveNoFollow(run_dir_.path(), run_dir_.Relative(dir) / "outputs.json");
    RemoveNoFollow(run_dir_.path(), run_dir_.Relative(dir) / "status.json");
  } catch (const std::exception& error) {
    throw StageError("stage_error", error.what());
  }
  run_dir_.WriteJson(dir / "inputs.json", {{"uses", spec.uses}, {"with", with}});
  CheckResolvedTypes(with, params, stage->Uses(), spec);

  StageInvocation invocation;
  invocation.stage_id = label;
  invocation.with = with;
  invocation.vars = context.value("vars", json::object());
  invocation.stage_dir = dir;
  invocation.run_dir = run_dir_.path();
  // What is left of the timeout after resolving `with` (at least 1 ms).
  invocation.timeout_ms = timeout_ms > 0 ? std::max<int64_t>(1, timeout_ms - static_cast<int64_t>(SecondsSince(started) * 1000)) : 0;
  invocation.log = [log](int level, const std::string& message) { log->Write(level, message); };
  Progress* progress = &progress_;
  std::string id = spec.id;
  invocation.progress = [progress, id](int64_t done, int64_t total, const std::string& text) { progress->Item(id, done, total, text); };

  for (int attempt = 1;; ++attempt) {
    *attempts = attempt;
    invocation.cancelled = std::make_shared<std::atomic<bool>>(Cancelled());
    try {
      json outputs = RunWithTimeout(stage, invocation, cancelled_, timeout_ms);
      *outputs_sha256 = WriteOutputs(dir, outputs);
      return outputs;
    } catch (const StageError& error) {
      log->Write(4, "attempt " + std::to_string(attempt) + " failed (" + error.kind() + "): " + error.what());
      if (attempt >= spec.retry.max_attempts || !Retryable(spec.retry, error.kind()) || Cancelled()) throw;
    } catch (const std::exception& error) {
      log->Write(4, std::string("attempt failed: ") + error.what());
      if (attempt >= spec.retry.max_attempts || Cancelled()) throw StageError("stage_error", error.what());
    }
    if (timeout_ms > 0) invocation.timeout_ms = timeout_ms;  // a retry gets the whole timeout
    int64_t delay_ms = spec.retry.backoff_ms << std::min(attempt - 1, 10);
    // Sleep in slices: Ctrl-C ends the backoff at once.
    const auto wake = std::chrono::steady_clock::now() + std::chrono::milliseconds(delay_ms);
    while (std::chrono::steady_clock::now() < wake) {
      if (Cancelled()) throw StageError("cancelled", "run interrupted during the retry backoff");
      std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(std::chrono::milliseconds(100),
                                                                                wake - std::chrono::steady_clock::now()));
    }
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

std::string Executor::WriteOutputs(const fs::path& dir, const json& outputs) const {
  std::string text = outputs.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
  run_dir_.WriteText(dir / "outputs.json", text);
  return Sha256Hex(text);
}

std::optional<json> Executor::Reusable(const fs::path& dir, const json& with, std::string* sha256) const {
  if (!resume_) return std::nullopt;
  try {
    if (!fs::exists(dir / "status.json") || !fs::exists(dir / "outputs.json")) return std::nullopt;
    json status = json::parse(ReadFile(dir / "status.json"));
    json inputs = json::parse(ReadFile(dir / "inputs.json"));
    if (status.value("status", "") != "ok" || inputs.value("with", json()) != with) return std::nullopt;
    // The outputs must be byte for byte what was journaled when they were written.
    const std::string rel = fs::relative(dir, run_dir_.path()).string();
    auto journaled = journaled_hashes_.find(rel);
    std::optional<std::string> actual = Sha256OfFile(dir / "outputs.json");
    if (journaled == journaled_hashes_.end()) {
      spdlog::warn("resume: {}/outputs.json has no journaled hash; running it again", rel);
      return std::nullopt;
    }
    if (!actual || *actual != journaled->second) {
      spdlog::warn("resume: {}/outputs.json changed after it was journaled (SHA-256 {} , journaled {}); running it again",
                   rel, actual.value_or("unreadable").substr(0, 12), journaled->second.substr(0, 12));
      return std::nullopt;
    }
    *sha256 = *actual;
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
  const bool in_search = context.contains("loop");  // items of a loop's for_each are the search's candidates
  if (in_search) progress_.SearchItemsPlanned(total);
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
      bool reused = false;
      std::string sha256;
      const std::string rel = fs::relative(dir / name, run_dir_.path()).string();
      auto fail = [&](const StageError& error) {
        errors++;
        outputs[i] = {{"ok", false}, {"error", error.ToJson()}, {"item", items[i]}};
        try {
          run_dir_.WriteJson(dir / name / "status.json", {{"status", "failed"}, {"attempts", attempts}, {"error", error.ToJson()}});
        } catch (const std::exception& write_error) {
          spdlog::error("{}[{}]: {}", spec.id, i, write_error.what());
        }
        Record({{"event", "item_finished"}, {"stage", spec.id}, {"item", i}, {"dir", rel}, {"status", "failed"}, {"kind", error.kind()}});
        spdlog::error("{}[{}] failed ({}): {}", spec.id, i, error.kind(), error.what());
      };
      try {
        outputs[i] = Invoke(spec, dir / name, item_context, spec.id + "[" + std::to_string(i) + "]", &attempts, &sha256);
        if (outputs[i].is_object() && outputs[i].value("ok", true) == false) not_ok++;
        run_dir_.WriteJson(dir / name / "status.json", {{"status", "ok"}, {"attempts", attempts}});
        reused = attempts == 0;
        json event = {{"event", "item_finished"}, {"stage", spec.id}, {"item", i}, {"dir", rel}, {"status", "ok"}, {"reused", reused}};
        if (!sha256.empty()) event["outputs_sha256"] = sha256;
        Record(std::move(event));
      } catch (const StageError& error) {
        fail(error);
      } catch (const std::exception& error) {  // e.g. a symlink refused in the item's folder: this item fails, not the host
        fail(StageError("stage_error", error.what()));
      }
      if (in_search) progress_.SearchItemDone(reused);
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
  record.items = total;
  for (const auto& output : outputs) {  // the first failed item, in item order
    const bool counted = output.is_object() && output.value("ok", true) == false &&
                         (spec.count_failed_items || output.contains("item"));
    if (!counted) continue;
    record.first_item_error = output.value("error", json());
    if (!record.first_item_error.is_object()) record.first_item_error = {{"kind", "not_ok"}, {"message", "the item reported ok: false"}};
    break;
  }
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
  std::optional<int64_t> budget;
  try {
    json max = ResolveValue(loop.max_iterations, outer.context, loop.where);
    if (!max.is_number_integer() || max.get<int64_t>() < 1) {
      throw StageError("config_error", loop.where.ToString() + ": max_iterations must resolve to an integer >= 1, got " + max.dump());
    }
    max_iterations = max.get<int64_t>();
    if (!loop.budget.is_null()) {
      json value = ResolveValue(loop.budget, outer.context, loop.where);
      if (!value.is_number_integer() || value.get<int64_t>() < 0) {
        throw StageError("config_error", loop.where.ToString() + ": loop budget must resolve to an integer >= 0, got " + value.dump());
      }
      budget = value.get<int64_t>();
    }
    scope.context["carry"] = ResolveValue(loop.carry, outer.context, loop.where);
  } catch (const StageError& error) {
    spdlog::error("stage {} failed ({}): {}", spec.id, error.kind(), error.what());
    record.status = "failed";
    record.error = error.ToJson();
    return record;
  }
  int64_t iteration = 0;
  json last = json::object();
  progress_.SearchStarted(spec.id, max_iterations, budget);
  progress_.SearchCarry(scope.context["carry"]);
  for (; iteration < max_iterations && !Cancelled(); ++iteration) {
    scope.context["loop"] = {{"iteration", iteration}, {"max_iterations", max_iterations}, {"id", spec.id}};
    scope.context["iter"] = json::object();
    spdlog::info("loop {}: iteration {}/{}", spec.id, iteration + 1, max_iterations);
    progress_.SearchIteration(iteration);
    bool ok = RunList(spec.body, dir / ("iter-" + std::to_string(iteration)), scope);
    progress_.SearchIterationFinished();
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
  progress_.SearchFinished();
  // Stages of the loop body stay visible afterwards under stages.<id>.
  outer.context["stages"] = scope.context["stages"];
  record.outputs = {{"iterations", iteration}, {"carry", scope.context["carry"]}, {"last", last}};
  run_dir_.WriteJson(dir / "outputs.json", record.outputs);
  return record;
}

}  // namespace accelopt
