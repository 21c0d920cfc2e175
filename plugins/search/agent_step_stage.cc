// native:agent_step - one round's verdict per problem (verify -> keep or
// revert -> reflect): the candidate is judged against the best *before* this
// round (so the speedup a summary or lesson reports is never the 1.00x of a
// best already replaced), the divergence guard reverts to the best when a
// correct candidate is more than divergence_threshold percent slower, the
// attempt goes to experiments.jsonl and its lesson (the model's from
// native:reflect when there is one, else the template's) to lessons.json, and a
// problem stops after no_improve_limit rounds without improvement or at its
// budget of evaluations.
#include <algorithm>
#include <map>

#include "accelopt/sdk/noise.hpp"
#include "agent_stages.h"

namespace accelopt_search {
namespace {

json AsMember(json record) {
  for (const char* key : {"status", "error", "compiled", "correct", "fix_attempts", "diff", "parent_kernel"}) record.erase(key);
  return record;
}

json Snapshot(const json& metrics) {
  json out = json::object();
  if (!metrics.is_object()) return out;
  for (const char* key : {"latency_ms", "bottleneck", "engine_busy_ms", "dma_count", "instruction_count", "hbm_read_bytes",
                          "hbm_write_bytes", "tensor_engine_active_time_percent", "vector_engine_active_time_percent",
                          "scalar_engine_active_time_percent", "dma_active_time_percent"}) {
    if (metrics.contains(key)) out[key] = metrics[key];
  }
  return out;
}

}  // namespace

void WriteAgentFiles(const std::filesystem::path& dir, const json& state) {
  std::vector<json> all;
  json lessons = json::object();
  for (const auto& [case_name, c] : state["cases"].items()) {
    for (const auto& e : c.value("experiments", json::array())) all.push_back(e);
    lessons[case_name] = c.value("lessons", json::array());
  }
  std::stable_sort(all.begin(), all.end(), [](const json& a, const json& b) { return a.value("round", 0) < b.value("round", 0); });
  std::string lines;
  for (const auto& e : all) lines += e.dump() + "\n";
  WriteText(dir / "experiments.jsonl", lines);
  WriteJson(dir / "lessons.json", {{"version", 1}, {"cases", lessons}});
}

json RunAgentStep(StageContext& ctx) {
  const json& with = ctx.With();
  json state = with.value("state", json());
  if (!state.is_object() || !state.contains("cases")) throw StageFailure("config_error", "`state` must come from native:agent_pick");
  const json records = ListParam(with.value("records", json()), "records");
  const json failures = ListParam(with.value("failures", json()), "failures");
  const double threshold = ctx.Param<double>("divergence_threshold");
  const int limit = ctx.Param<int>("no_improve_limit");
  const int budget = ctx.Param<int>("budget");
  const double confidence = ctx.Param<double>("confidence");
  if (!(confidence > 0 && confidence < 1)) throw StageFailure("config_error", "confidence must be in (0, 1)");
  const int64_t round = with.value("iteration", int64_t{0});
  const json reflections_in = with.value("reflections", json::object());
  const json reflections = reflections_in.is_object() ? reflections_in : json::object();  // null: native:reflect did not run
  std::map<std::string, json> by_case;
  for (const auto& f : failures) by_case[f.value("case_name", "")] = f;
  for (const auto& r : records) by_case[r.value("case_name", "")] = r;  // a profiled record wins
  json summaries = json::array();
  bool all_done = true;
  for (auto& [case_name, c] : state["cases"].items()) {
    if (c["picked"].is_object() && by_case.count(case_name)) {
      const json& record = by_case[case_name];
      const bool profiled = record.contains("compiled") || record.value("status", "") == "ok";
      const bool ok = record.value("status", "") == "ok" && Number(record, "latency_ms").value_or(0) > 0;
      const double latency = ok ? record["latency_ms"].get<double>() : 0.0;
      const double best_before = c["best_latency_ms"].get<double>();
      const json error = record.value("error", json::object());
      const std::string kind = error.is_object() ? error.value("kind", "") : "";
      Outcome outcome = Judge(ok, latency, best_before, threshold, kind);
      std::string noise;
      if (outcome.new_best && !accelopt::sdk::BeyondNoise(c["best"], record, confidence, &noise)) {
        // Faster by its mean, but within the measured noise of a timed record (FlashInfer-Bench):
        // the next starting point, never the best (docs/optimize.md, "Noise-aware speedups").
        outcome.new_best = false;
        outcome.status = "no_improvement";
        outcome.category = "no_improvement";
        outcome.lesson = "faster by its mean (" + Fixed(best_before / latency) + "x) but within the measured noise (" + noise +
                         "); not taken as the best";
        ctx.Info(case_name + ": " + record.value("id", "") + " is not beyond the measured noise (" + noise + "): not taken as the best");
      } else if (outcome.new_best && !ValidatedForResult(record)) {
        // Checked on the screen's seeds only: it may be the next starting point, never the best
        // (native:profile's confirm_below_ms is the best's latency, so this does not happen there).
        outcome.new_best = false;
        outcome.status = "no_improvement";
        outcome.category = "no_improvement";
        outcome.lesson = "faster but not confirmed on every seed; not taken as the best";
        ctx.Warn(case_name + ": " + record.value("id", "") + " was only screened (not confirmed): not taken as the best");
      }
      const std::string plan = c["picked"].value("summary", "");
      json experiment = {{"round", round},
                         {"case_name", case_name},
                         {"status", outcome.status},
                         {"candidate", record.value("id", "")},
                         {"latency_ms", ok ? json(latency) : json()},
                         {"validation", record.value("validation", "full")},
                         {"best_latency_ms_before", best_before},
                         {"speedup_vs_best", ok ? json(best_before / latency) : json()},
                         {"score", ok ? json(c["best"].value("baseline_latency_ms", best_before) / latency) : json()},
                         {"plan_summary", plan},
                         {"error", ok ? json() : json((kind + ": " + (error.is_object() ? error.value("message", "") : "")).substr(0, 500))},
                         {"profile", Snapshot(record.value("metrics", json::object()))}};
      c["experiments"].push_back(experiment);
      c["tried"].push_back(c["picked"]["key"]);
      if (profiled) c["evaluations"] = c.value("evaluations", 0) + 1;
      c["rounds"] = c.value("rounds", 0) + 1;
      if (!outcome.category.empty()) {
        // The model's lesson (native:reflect) replaces the template for a failed or slower
        // attempt; `source` says which one wrote it.
        const json reflection = reflections.value(case_name, json());
        const bool by_model = outcome.category != "improved" && reflection.is_object() && reflection.contains("lesson") &&
                              reflection["lesson"].is_string() && !reflection["lesson"].get<std::string>().empty();
        if (by_model) outcome.lesson = reflection["lesson"].get<std::string>();
        json lesson = Lesson(round, outcome.lesson, outcome.category, plan);
        lesson["source"] = by_model ? "model" : "template";
        lesson["node"] = c["picked"].value("node", "");
        lesson["move"] = c["picked"].value("move", "");
        c["lessons"].push_back(lesson);
      }
      if (outcome.keep) {
        json member = AsMember(record);
        member["speedup_vs_best"] = best_before / latency;  // computed before the best moves
        c["current"] = member;
        if (outcome.new_best) {
          c["best"] = member;
          c["best_latency_ms"] = latency;
        }
      }
      if (outcome.status == "divergence_revert") c["current"] = c["best"];
      if (outcome.status == "improved") c["no_improve"] = 0;
      if (outcome.status == "no_improvement") c["no_improve"] = c.value("no_improve", 0) + 1;
      ctx.Info(case_name + " round " + std::to_string(round) + ": " + outcome.status + (outcome.lesson.empty() ? "" : " - " + outcome.lesson));
      summaries.push_back({{"case_name", case_name}, {"status", outcome.status}, {"lesson", outcome.lesson}});
      // A converged model (docs/llm.md, "Re-asks"): the reply repeated the current kernel
      // and so did the answer to the re-ask naming the repeat. Asking again would repeat it
      // again, so the problem is finished instead of spending requests for nothing.
      const bool converged = !ok && (kind == "unchanged" || kind == "repeat") && record.value("reasks", 0) > 0;
      if (converged) {
        c["done"] = true;
        c["done_reason"] = "the model converged: it repeated " + record.value("repeat_of", std::string("an evaluated kernel")) +
                           " after a re-ask naming the repeat";
      } else if (c["no_improve"].get<int>() >= limit) {
        c["done"] = true;
        c["done_reason"] = std::to_string(limit) + " rounds without improvement";
      } else if (c["evaluations"].get<int>() >= budget) {
        c["done"] = true;
        c["done_reason"] = "budget of " + std::to_string(budget) + " evaluations used";
      }
    }
    c["picked"] = nullptr;
    if (!c.value("done", false)) all_done = false;
  }
  state["done"] = all_done;
  WriteAgentFiles(ctx.RunDir(), state);
  int64_t budget_left = 0;  // the progress line's budget: what the problems still running may evaluate
  for (const auto& [case_name, c] : state["cases"].items())
    if (!c.value("done", false)) budget_left += std::max(0, budget - c.value("evaluations", 0));
  return {{"state", state}, {"beam", AgentBeam(state)}, {"best", AgentBest(state)}, {"rounds", summaries},
          {"done", all_done}, {"budget_left", budget_left}};
}

}  // namespace accelopt_search
