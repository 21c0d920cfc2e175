// native:score and native:fixer.
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>

#include "prompt_data.h"
#include "stages.h"

namespace fs = std::filesystem;

namespace accelopt_optimize {
namespace {

// Fills status/latency/speedups/error of `record` from one profile_kernel result.
void ApplyProfile(json& record, const json& result) {
  const bool ok = result.value("correct", false) && Number(result, "latency_ms").value_or(0) > 0;
  record["compiled"] = result.value("compiled", false);
  record["correct"] = result.value("correct", false);
  record["metrics"] = result.value("metrics", json::object());
  record["estimated"] = result.value("estimated", false);
  if (result.contains("peak")) record["peak"] = result["peak"];
  else record.erase("peak");
  // The kernel's argument shapes: the rule-based moves read them (accelopt.rules.propose).
  if (result.contains("input_shapes")) record["input_shapes"] = result["input_shapes"];
  // How the kernel was checked (native:profile's screen-then-confirm; none = every seed).
  record["validation"] = result.value("validation", "full");
  record["validated_seeds"] = result.value("validated_seeds", json());
  if (result.contains("confirm")) {
    const json& confirm = result["confirm"];
    record["confirm"] = {{"seeds", confirm.value("seeds", json())}, {"correct", confirm.value("correct", false)},
                         {"wall_s", confirm.value("wall_s", json())}};
  } else {
    record.erase("confirm");
  }
  if (result.contains("screened_latency_ms")) record["screened_latency_ms"] = result["screened_latency_ms"];
  else record.erase("screened_latency_ms");
  if (ok) {
    const double latency = result["latency_ms"].get<double>();
    record["status"] = "ok";
    record["latency_ms"] = latency;
    record["error"] = nullptr;
    auto parent = Number(record, "parent_latency_ms");
    auto baseline = Number(record, "baseline_latency_ms");
    record["speedup"] = parent && *parent > 0 ? json(*parent / latency) : json(nullptr);
    record["speedup_vs_baseline"] = baseline && *baseline > 0 ? json(*baseline / latency) : json(nullptr);
  } else {
    record["status"] = "failed";
    record["latency_ms"] = nullptr;
    record["speedup"] = nullptr;
    record["speedup_vs_baseline"] = nullptr;
    json error = result.value("error", json());
    if (!error.is_object()) {
      error = {{"kind", result.value("correct", false) ? "timing_error" : "wrong_result"}, {"message", "no latency measured"}};
    }
    json compact = {{"kind", error.value("kind", "error")}, {"message", error.value("message", "")}};
    if (error.contains("traceback") && error["traceback"].is_string()) {
      std::string tb = error["traceback"];
      if (tb.size() > 4000) tb = "..." + tb.substr(tb.size() - 4000);
      compact["traceback"] = tb;
    }
    record["error"] = compact;
  }
}

// The candidate ids already in a run's records.jsonl, read once per process
// and kept up to date by the appends below. A score stage that runs again on
// `run --resume` (its inputs changed: e.g. --set vars.budget=...) then appends
// only the candidates the file does not hold yet: one line per candidate.
class RecordLog {
 public:
  static RecordLog& Instance() {
    static RecordLog log;
    return log;
  }
  // Appends `line` unless a line with its id is already there; true when appended.
  bool Append(const fs::path& path, const json& line) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto& ids = IdsOf(path);
    const std::string id = line.value("id", std::string());
    if (!id.empty() && !ids.insert(id).second) return false;
    AppendJsonLine(path, line);
    return true;
  }

 private:
  std::set<std::string>& IdsOf(const fs::path& path) {
    auto found = ids_.find(path.string());
    if (found != ids_.end()) return found->second;
    std::set<std::string>& ids = ids_[path.string()];
    std::ifstream in(path);
    for (std::string text; std::getline(in, text);) {
      json record = json::parse(text, nullptr, false);
      if (record.is_object() && record.contains("id") && record["id"].is_string()) ids.insert(record["id"].get<std::string>());
    }
    return ids;
  }
  std::mutex mutex_;
  std::map<std::string, std::set<std::string>> ids_;
};

bool Fixable(const json& record) {
  if (record.value("status", "") != "failed" || !record.contains("kernel")) return false;
  static const std::vector<std::string> kinds = {"compile_error", "runtime_error", "shape_mismatch", "nan_inf",
                                                  "wrong_result", "precision_downgrade", "timeout"};
  const std::string kind = record.value("error", json::object()).value("kind", "");
  return std::find(kinds.begin(), kinds.end(), kind) != kinds.end();
}

}  // namespace

json RunScore(StageContext& ctx) {
  const json& with = ctx.With();
  const json results = ListParam(with.value("results", json()), "results");
  const json failures = ListParam(with.value("failures", json()), "failures");
  json records = json::array();
  json kinds = json::object();
  int ok = 0;
  double best = 0;
  std::string best_id;
  for (const auto& result : results) {
    json record;
    if (result.contains("case") && result["case"].is_object()) {
      record = result["case"];
      ApplyProfile(record, result);
    } else {
      // A for_each item that failed as a stage: {"ok": false, "error", "item"}.
      record = result.value("item", json::object());
      record["status"] = "failed";
      record["latency_ms"] = nullptr;
      record["speedup"] = nullptr;
      record["speedup_vs_baseline"] = nullptr;
      json error = result.value("error", json::object());
      record["error"] = {{"kind", error.value("kind", "stage_error")}, {"message", error.value("message", "")}};
    }
    records.push_back(record);
  }
  for (const auto& failure : failures) records.push_back(failure);
  for (const auto& record : records) {
    if (record.value("status", "") == "ok") {
      ++ok;
      double s = record.value("speedup", json(0.0)).is_number() ? record["speedup"].get<double>() : 0.0;
      if (s > best) {
        best = s;
        best_id = record.value("id", "");
      }
    } else {
      std::string kind = record.value("error", json::object()).value("kind", "error");
      kinds[kind] = kinds.value(kind, 0) + 1;
    }
  }
  const fs::path run_log = fs::path(ctx.RunDir()) / "optimize" / "records.jsonl";
  for (const auto& record : records) {
    json line = record;
    line.erase("metrics");
    RecordLog::Instance().Append(run_log, line);
  }
  WriteJson(fs::path(ctx.StageDir()) / "executor_results.json", records);
  json summary = {{"total", records.size()}, {"ok", ok}, {"failed", static_cast<int>(records.size()) - ok},
                  {"failed_by_kind", kinds}, {"best_speedup", best > 0 ? json(best) : json(nullptr)}, {"best_id", best_id}};
  ctx.Info(std::to_string(ok) + "/" + std::to_string(records.size()) + " candidates correct" +
           (best > 0 ? "; best speedup vs parent " + Fixed(best) + "x (" + best_id + ")" : ""));
  return {{"records", records}, {"summary", summary}};
}

json RunFixer(StageContext& ctx) {
  const json& with = ctx.With();
  json records = ListParam(with.value("records", json()), "records");
  const int rounds = with.value("rounds", 0);
  const std::string endpoint = with.value("llm", "default");
  if (rounds <= 0 || records.empty()) return {{"records", records}, {"fixed", 0}, {"attempted", 0}};
  if (!UseLlm(ctx, with.value("mode", "auto"), endpoint)) {
    ctx.Info("fixer: no LLM, records passed through");
    return {{"records", records}, {"fixed", 0}, {"attempted", 0}};
  }
  Prompts prompts(with.value("prompts", ""), with.value("target", ""));
  const std::string system = prompts.Render("fixer_system", json::object());
  LlmCaller caller(ctx, endpoint, with);
  const fs::path dir = ctx.StageDir();
  std::vector<size_t> todo;
  for (size_t i = 0; i < records.size(); ++i) {
    if (Fixable(records[i])) todo.push_back(i);
  }
  std::atomic<int> fixed{0};
  const int64_t seed = with.value("seed", int64_t{0});
  ParallelFor(todo.size(), with.value("max_concurrency", 4), [&](size_t t) {
    json& record = records[todo[t]];
    const std::string id = record.value("id", "x");
    json attempts = json::array();
    std::string code;
    try {
      code = ReadText(record.value("kernel", ""));
    } catch (const std::exception&) {
      return;
    }
    for (int round = 1; round <= rounds && !ctx.Cancelled(); ++round) {
      json error = record.value("error", json::object());
      json attempt = {{"round", round}, {"error_before", error}};
      try {
        json response = caller.Chat(record.value("case_name", ""), system, prompts.Render("fixer_user", FixerData(record, code)),
                                    seed * 7919 + round);
        const std::string reply = response.value("content", "");
        WriteText(dir / "replies" / (SafeName(id) + "-fix" + std::to_string(round) + ".md"), reply);
        auto fixed_code = ExtractKernelCode(reply);
        if (!fixed_code) {
          attempt["result"] = {{"kind", "no_code_block"}, {"message", "the fixer reply has no fenced code block"}};
          attempts.push_back(attempt);
          continue;  // the same broken code gets another round
        }
        code = WithImportHeader(*fixed_code) + "\n";
        const fs::path file = dir / "kernels" / (SafeName(id) + "-fix" + std::to_string(round) + ".py");
        WriteText(file, code);
        json request = {{"kernel", file.string()},        {"reference", record.value("task", "")},
                        {"backend", with.value("backend", "auto")}, {"target", with.value("target", "trn1")},
                        {"rel_tol", record.value("rel_tol", 2e-5)}, {"problem", record.value("problem", "")},
                        {"values", record.value("values", json::object())}};
        json result = ctx.IsolatedCall(accelopt::api::kNkiProfile, request,
                                       {{"timeout_s", with.value("timeout_s", 180.0)}});
        record["kernel"] = file.string();
        record["source_hash"] = HashHex(NormalizeSource(code));
        ApplyProfile(record, result);
        attempt["result"] = record["status"] == "ok" ? json({{"kind", "ok"}, {"latency_ms", record["latency_ms"]}}) : record["error"];
        attempts.push_back(attempt);
        if (record["status"] == "ok") {
          record["origin"] = record.value("origin", "llm") + "+fixer";
          ++fixed;
          break;
        }
      } catch (const std::exception& failure) {
        attempt["result"] = ErrorJson(failure);
        attempts.push_back(attempt);
        if (failure.what() && std::string(failure.what()).find("llm_") != std::string::npos) break;
      }
    }
    record["fix_attempts"] = attempts;
  });
  caller.Save(ctx, "fixer");
  for (const auto& index : todo) AppendJsonLine(fs::path(ctx.RunDir()) / "optimize" / "fixer.jsonl", records[index]);
  ctx.Info("fixer: " + std::to_string(fixed.load()) + "/" + std::to_string(todo.size()) + " failed candidates repaired");
  return {{"records", records}, {"fixed", fixed.load()}, {"attempted", todo.size()}, {"usage", caller.UsageJson()}};
}

}  // namespace accelopt_optimize
