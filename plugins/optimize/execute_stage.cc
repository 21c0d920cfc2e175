// native:execute - turns plans into kernel files: K samples per plan from the
// LLM, or one accelopt.rules.apply result per plan. An LLM reply may hold a
// unified diff of the parent kernel (applied by accelopt.edits, strictly) and/or
// the full kernel module in a fenced block (reply_parse.h); the diff wins, the
// full source is the fallback when there is no diff or it does not apply
// (docs/search.md, "LLM moves"). Every candidate records its unified diff
// against the parent. Each file gets a JSON sidecar with its lineage.
#include <filesystem>
#include <fstream>
#include <map>

#include "prompt_data.h"
#include "stages.h"

namespace fs = std::filesystem;

namespace accelopt_optimize {
namespace {

// The new candidate's fields, inherited from its parent (the plan's candidate).
json ChildCandidate(const json& plan, int sample, int64_t iteration, const std::string& origin) {
  const json& parent = plan.at("candidate");
  const std::string case_name = parent.value("case_name", "");
  const std::string id = case_name + "-i" + std::to_string(iteration) + "-" + plan.value("plan_id", "p") + "-s" + std::to_string(sample);
  json lineage = parent.value("lineage", json::array());
  lineage.push_back(parent.value("id", ""));
  json history = parent.value("history", json::array());
  json step = {{"candidate", id}, {"plan_id", plan.value("plan_id", "")}, {"title", plan.value("title", "")}, {"origin", origin}};
  if (plan.contains("rule")) {
    step["rule"] = plan["rule"];
    step["params"] = plan.value("params", json::object());
    step["rule_plan_id"] = plan.value("rule_plan_id", "");
  }
  history.push_back(step);
  json plan_info = {{"plan_id", plan.value("plan_id", "")}, {"title", plan.value("title", "")}, {"text", plan.value("text", "")}};
  if (plan.contains("rule")) {
    plan_info["rule"] = plan["rule"];
    plan_info["params"] = plan.value("params", json::object());
  }
  if (plan.contains("kind") && plan["kind"].is_string()) {
    plan_info["kind"] = plan["kind"];
    plan_info["params"] = plan.value("params", json::object());
  }
  return {{"id", id},
          {"problem", parent.value("problem", "")},
          {"case_name", case_name},
          {"case_id", parent.value("case_id", json())},
          {"values", parent.value("values", json::object())},
          {"task", parent.value("task", "")},
          {"rel_tol", parent.value("rel_tol", 2e-5)},
          {"parent", parent.value("id", "")},
          {"parent_kernel", parent.value("kernel", "")},
          {"parent_latency_ms", parent.value("latency_ms", json())},
          {"baseline_latency_ms", parent.value("baseline_latency_ms", json())},
          {"lineage", lineage},
          {"history", history},
          {"plan", plan_info},
          {"sample", sample},
          {"iteration", iteration},
          {"origin", origin}};
}

json Failed(json candidate, const std::string& kind, const std::string& message) {
  candidate["status"] = "failed";
  candidate["error"] = {{"kind", kind}, {"message", message}};
  candidate["latency_ms"] = nullptr;
  candidate["speedup"] = nullptr;
  candidate["speedup_vs_baseline"] = nullptr;
  return candidate;
}

// The kernels already evaluated in this run, per case: NormalizeSource hash -> "candidate ID
// (round N, status)", from <run>/optimize/records.jsonl (every scored candidate of the three
// pipelines). A reply that repeats one of them gets a re-ask naming it (docs/llm.md, "Re-asks").
std::map<std::string, std::map<std::string, std::string>> EvaluatedKernels(const fs::path& run_dir) {
  std::map<std::string, std::map<std::string, std::string>> out;
  std::ifstream in(run_dir / "optimize" / "records.jsonl");
  for (std::string line; std::getline(in, line);) {
    const json record = json::parse(line, nullptr, false);
    if (!record.is_object() || !record.contains("source_hash") || !record["source_hash"].is_string()) continue;
    std::string label = "candidate " + record.value("id", std::string("?"));
    if (record.contains("iteration") && record["iteration"].is_number_integer())
      label += " (round " + std::to_string(record["iteration"].get<int64_t>()) + ", " + record.value("status", std::string("?")) + ")";
    out[record.value("case_name", std::string())].emplace(record["source_hash"].get<std::string>(), label);
  }
  return out;
}

}  // namespace

json RunExecute(StageContext& ctx) {
  const json& with = ctx.With();
  const json plans = ListParam(with.value("plans", json()), "plans");
  const int k = std::max<int>(1, with.value("samples_per_plan", 2));
  const int64_t iteration = with.value("iteration", int64_t{0});
  const int64_t seed = with.value("seed", int64_t{0});
  const std::string endpoint = with.value("llm", "default");
  const fs::path dir = ctx.StageDir();
  const fs::path kernels = dir / "kernels";
  fs::create_directories(kernels);

  struct Job {
    size_t plan;
    int sample;
    bool llm;
  };
  std::vector<Job> jobs;
  bool any_llm = false;
  for (size_t p = 0; p < plans.size(); ++p) {
    const bool llm = plans[p].value("origin", "llm") != "rules";
    any_llm = any_llm || llm;
    for (int s = 0; s < (llm ? k : 1); ++s) jobs.push_back({p, s, llm});
  }
  // LLM plans of a problem whose spend cap (or the run's) is reached are not executed: no
  // request is sent for them (docs/llm.md, "Spend caps"). They count as not_sent.
  int not_sent = 0;
  if (any_llm) {
    const auto capped = SpendStopped(ctx, endpoint, plans);
    if (!capped.empty()) {
      std::vector<Job> open;
      for (const Job& job : jobs) {
        if (job.llm && capped.count(plans[job.plan].value("candidate", json::object()).value("case_name", ""))) ++not_sent;
        else open.push_back(job);
      }
      jobs = open;
    }
  }
  const bool diff_format = with.value("edit_format", std::string("source")) == "diff";
  std::optional<Prompts> prompts;
  std::string system;
  if (any_llm) {
    prompts.emplace(with.value("prompts", ""), with.value("target", ""));
    system = prompts->Render(diff_format ? "executor_diff_system" : "executor_system", json::object());
  }
  LlmCaller caller(ctx, endpoint, with);
  std::vector<json> results(jobs.size());
  const auto evaluated = any_llm ? EvaluatedKernels(ctx.RunDir()) : std::map<std::string, std::map<std::string, std::string>>();

  ParallelFor(jobs.size(), with.value("max_concurrency", 8), [&](size_t j) {
    const Job job = jobs[j];
    const json& plan = plans[job.plan];
    json candidate = ChildCandidate(plan, job.sample, iteration, job.llm ? "llm" : "rules");
    const std::string id = candidate["id"];
    const std::string case_name = candidate["case_name"];
    try {
      const std::string parent_source = ReadText(plan["candidate"].value("kernel", ""));
      std::string source;
      if (job.llm) {
        // One re-ask at most (docs/llm.md, "Re-asks"): a reply without code quotes the
        // parse error back, a reply that gives back the parent kernel names the repeat and
        // asks for a different idea; a second miss fails the candidate.
        const std::string user = prompts->Render(diff_format ? "executor_diff_user" : "executor_user", ExecutorData(plan, parent_source));
        const int64_t call_seed = seed * 1000003 + iteration * 10007 + static_cast<int64_t>(job.plan) * 31 + job.sample + 7;
        std::string note;
        for (int attempt = 0;; ++attempt) {
          json response = caller.Chat(case_name, system, note.empty() ? user : user + "\n\n" + note,
                                      attempt == 0 ? std::optional<int64_t>(call_seed) : std::optional<int64_t>(call_seed + 1));
          const std::string reply = response.value("content", "");
          WriteText(dir / "replies" / (SafeName(id) + (attempt == 0 ? "" : ".reask") + ".md"), reply);
          const auto diff = ExtractDiff(reply);
          const auto code = ExtractKernelCode(reply);
          if (!code && !diff) {
            const std::string why = "the reply has no fenced code block and no diff (finish_reason " +
                                    response.value("finish_reason", "?") + ", " + std::to_string(reply.size()) + " characters)";
            if (attempt == 0) {
              note = "Your previous reply could not be used: " + why +
                     ". Answer again with the whole kernel in one ```python fenced block (or a unified diff in a ```diff block).";
              candidate["reasks"] = candidate.value("reasks", 0) + 1;
              continue;
            }
            results[j] = Failed(candidate, "no_code_block", why + (attempt ? " (after a re-ask)" : ""));
            return;
          }
          json request = {{"parent", parent_source}, {"diff", diff ? json(*diff) : json()},
                          {"source", code ? json(WithImportHeader(*code) + "\n") : json()}};
          json edit = ctx.PythonCall(accelopt::api::kEditsResolve, request);
          if (edit.contains("error") && edit["error"].is_object()) {
            results[j] = Failed(candidate, edit["error"].value("kind", "patch_failed"), edit["error"].value("message", ""));
            if (diff) results[j]["reply_diff"] = *diff;
            return;
          }
          source = edit.value("source", "");
          // The state key of the graph search, computed where the text already is (native:mcgs_merge_states
          // then need not read the file back through Python).
          if (edit.contains("state_hash") && edit["state_hash"].is_string()) candidate["state_hash"] = edit["state_hash"];
          // A repeat: the parent itself, or any kernel of this case already evaluated in the run.
          const std::string normalized = NormalizeSource(source);
          std::string repeat_of;
          const bool is_parent = normalized == NormalizeSource(parent_source);
          if (is_parent) {
            repeat_of = "the current kernel unchanged";
          } else if (auto in_case = evaluated.find(case_name); in_case != evaluated.end()) {
            if (auto hit = in_case->second.find(HashHex(normalized)); hit != in_case->second.end()) repeat_of = hit->second;
          }
          if (!repeat_of.empty() && attempt == 0) {
            note = "Your previous reply is a repeat: it gives back " + repeat_of +
                   " (comments and whitespace aside), which has already been evaluated. Propose a different idea and write that kernel.";
            candidate["reasks"] = candidate.value("reasks", 0) + 1;
            continue;
          }
          if (!repeat_of.empty()) {
            // Converged: the answer to the re-ask repeats an evaluated kernel again. The parent
            // case fails as "unchanged" below; any other evaluated kernel fails as "repeat".
            candidate["converged"] = true;
            candidate["repeat_of"] = repeat_of;
            if (!is_parent) {
              // The kernel is kept (native:mcgs_merge_states makes the move an edge to the known state).
              const fs::path file = kernels / (SafeName(id) + ".py");
              WriteText(file, source);
              candidate["kernel"] = file.string();
              candidate["source_hash"] = HashHex(normalized);
              results[j] = Failed(candidate, "repeat", "the reply repeats " + repeat_of + ", after a re-ask naming the repeat");
              return;
            }
          }
          candidate["edit"] = edit.value("edit", "source");
          candidate["diff"] = edit.value("diff", "");
          if (edit.contains("patch_error")) {
            candidate["patch_error"] = edit["patch_error"];
            ctx.Info(id + ": the reply's diff did not apply (" + edit["patch_error"].value("message", "") +
                     "); using its full kernel instead");
          }
          break;
        }
      } else {
        json plan_arg = {{"id", plan.value("rule_plan_id", "")}, {"rule", plan.value("rule", "")},
                         {"description", plan.value("text", "")}, {"params", plan.value("params", json::object())}};
        json reply = ctx.PythonCall(accelopt::api::kRulesApply, {{"source", parent_source}, {"plan", plan_arg}});
        if (reply.contains("error") && !reply["error"].is_null()) {
          const json& e = reply["error"];
          std::string message = e.is_object() ? e.value("kind", "") + ": " + e.value("message", "") : e.dump();
          results[j] = Failed(candidate, "rule_error", message);
          return;
        }
        source = reply.value("source", "");
        if (reply.contains("diff")) candidate["diff"] = reply["diff"];
        if (reply.contains("state_hash") && reply["state_hash"].is_string()) candidate["state_hash"] = reply["state_hash"];
        candidate["edit"] = "rule";
      }
      if (NormalizeSource(source) == NormalizeSource(parent_source)) {
        results[j] = Failed(candidate, "unchanged", "the new kernel is the parent kernel (comments/whitespace aside)");
        return;
      }
      const fs::path file = kernels / (SafeName(id) + ".py");
      WriteText(file, source);
      candidate["kernel"] = file.string();
      candidate["source_hash"] = HashHex(NormalizeSource(source));
      WriteJson(kernels / (SafeName(id) + ".json"), candidate);
      results[j] = candidate;
    } catch (const std::exception& error) {
      json err = ErrorJson(error);
      results[j] = Failed(candidate, err["kind"], err["message"]);
    }
  });

  json candidates = json::array();
  json failures = json::array();
  for (auto& result : results) {
    if (result.value("status", "") == "failed" && result["error"].value("kind", "") == kSpendCapKind) {
      ++not_sent;  // refused by a spend cap: never sent, not a failed candidate
      continue;
    }
    if (result.value("status", "") == "failed") {
      ctx.Warn(result.value("id", "") + ": " + result["error"].value("kind", "") + ": " + result["error"].value("message", ""));
      WriteJson(kernels / (SafeName(result.value("id", "x")) + ".json"), result);
      failures.push_back(std::move(result));
    } else {
      candidates.push_back(std::move(result));
    }
  }
  caller.Save(ctx, "execute");
  const auto stopped = any_llm ? SpendStopped(ctx, endpoint, plans) : std::map<std::string, std::string>{};
  ctx.Info(std::to_string(candidates.size()) + " candidate kernels from " + std::to_string(plans.size()) + " plans" +
           (failures.empty() ? "" : ", " + std::to_string(failures.size()) + " failed") +
           (not_sent ? ", " + std::to_string(not_sent) + " not sent (spend cap)" : ""));
  return {{"candidates", candidates}, {"failures", failures}, {"usage", caller.UsageJson()},
          {"stopped", StoppedJson(stopped)}, {"not_sent", not_sent}};
}

}  // namespace accelopt_optimize
