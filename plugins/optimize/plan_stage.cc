// native:optimize_init and native:plan.
#include <atomic>
#include <cctype>
#include <filesystem>
#include <map>
#include <set>

#include "prompt_data.h"
#include "stages.h"

namespace fs = std::filesystem;

namespace accelopt_optimize {
namespace {

// The kernel-version fields a beam member carries (docs/optimize.md, "Candidates").
json BaselineCandidate(const json& result) {
  const json item = result.value("case", json::object());
  const double latency = result.value("latency_ms", 0.0);
  json candidate = {{"id", item.value("service_name", item.value("case_name", "kernel") + "_ID0")},
                    {"problem", item.value("problem", "")},
                    {"case_name", item.value("case_name", "")},
                    {"case_id", item.value("case_id", json())},
                    {"values", item.value("values", json::object())},
                    {"task", item.value("task", "")},
                    {"rel_tol", item.value("rel_tol", 2e-5)},
                    {"kernel", item.value("kernel", "")},
                    {"parent", nullptr},
                    {"lineage", json::array()},
                    {"history", json::array()},
                    {"plan", nullptr},
                    {"iteration", -1},
                    {"origin", "baseline"},
                    {"latency_ms", latency},
                    {"baseline_latency_ms", latency},
                    {"speedup_vs_baseline", 1.0},
                    {"metrics", result.value("metrics", json::object())}};
  if (result.contains("peak")) candidate["peak"] = result["peak"];
  if (result.contains("input_shapes")) candidate["input_shapes"] = result["input_shapes"];
  candidate["estimated"] = result.value("estimated", false);
  return candidate;
}

// accelopt.rules.propose's history: the rule plan ids ("rule:site") applied on the way to this kernel.
json RuleHistory(const json& member) {
  json out = json::array();
  for (const auto& step : member.value("history", json::array())) {
    if (step.contains("rule_plan_id") && step["rule_plan_id"].is_string()) out.push_back(step["rule_plan_id"]);
  }
  return out;
}

// The move fields of an LLM planner reply in vocabulary mode: "kind" (a vocabulary name), "params",
// "effect", "relieves", and from the applicable move it matched "matched" (its id) and
// "predicted_gain"; or "move_error" {kind: unknown_move | no_move, message} with the kind as written.
json LlmMove(StageContext& ctx, const std::string& reply, const json& vocab) {
  const MoveChoice choice = ParseMoveChoice(reply);
  json applicable = vocab.value("applicable", json::array());
  json resolved = ctx.PythonCall(accelopt::api::kVocabularyResolveMove,
                                 {{"kind", choice.kind}, {"site", choice.site}, {"applicable", applicable}});
  if (resolved.contains("error") && resolved["error"].is_object()) {
    return {{"kind", choice.kind}, {"params", choice.params}, {"move_error", resolved["error"]}};
  }
  const std::string kind = resolved.value("kind", "");
  json move = {{"kind", kind}, {"params", choice.params}};
  for (const auto& k : vocab.value("kinds", json::array())) {
    if (k.value("name", "") != kind) continue;
    move["effect"] = k.value("effect", "");
    move["relieves"] = k.value("relieves", json::object());
  }
  const json matched = resolved.value("matched", json());
  if (matched.is_object()) {
    json params = matched.value("params", json::object());
    params.update(choice.params);  // the planner's refinement wins
    move["params"] = params;
    move["matched"] = matched.value("id", "");
    if (matched.contains("relieves")) move["relieves"] = matched["relieves"];
    if (matched.contains("predicted_gain") && !matched["predicted_gain"].is_null()) move["predicted_gain"] = matched["predicted_gain"];
  }
  return move;
}

// The identity of an LLM plan, for the planner's convergence check and duplicate plans of one
// kernel: a move of the vocabulary is its kind, matched applicable move and parameters, plus the
// title for the open move; a free-text plan is its title. Titles compare without whitespace and
// case. "" (never a duplicate) for a refused move or an untitled plan.
std::string MoveKey(const json& plan) {
  if (plan.contains("move_error")) return "";
  std::string title;
  for (char ch : plan.value("title", "")) {
    if (!std::isspace(static_cast<unsigned char>(ch))) title += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  }
  const std::string kind = plan.contains("kind") && plan["kind"].is_string() ? plan["kind"].get<std::string>() : "";
  if (kind.empty()) return title.empty() ? "" : "plan|" + title;
  std::string key = kind + "|" + plan.value("matched", "") + "|" + plan.value("params", json::object()).dump();
  if (kind == "open") key += "|" + title;
  return key;
}

}  // namespace

json VisibleExperiences(const json& memory, const std::string& case_name, int limit) {
  json items = ListParam(memory, "items");
  const std::string scope = memory.is_object() ? memory.value("scope", "problem") : "problem";
  json visible = json::array();
  for (const auto& item : items) {
    if (scope == "shared" || item.value("case_name", "") == case_name) visible.push_back(item);
  }
  if (limit >= 0 && static_cast<int>(visible.size()) > limit) {
    json newest = json::array();
    for (size_t i = visible.size() - limit; i < visible.size(); ++i) newest.push_back(visible[i]);
    visible = newest;
  }
  return visible;
}

json RunInit(StageContext& ctx) {
  const json& with = ctx.With();
  const json results = ListParam(with.value("results", json()), "results");
  json beam = json::array();
  json best = json::object();
  json baselines = json::object();
  for (const auto& result : results) {
    json item = result.contains("case") ? result["case"] : result.value("item", json::object());
    const std::string case_name = item.value("case_name", "");
    if (case_name.empty()) continue;
    json baseline = {{"problem", item.value("problem", "")}, {"values", item.value("values", json::object())},
                     {"kernel", item.value("kernel", "")}, {"task", item.value("task", "")},
                     {"ok", false}, {"latency_ms", nullptr}};
    if (result.value("correct", false) && Number(result, "latency_ms").value_or(0) > 0) {
      json candidate = BaselineCandidate(result);
      beam.push_back(candidate);
      best[case_name] = candidate;
      baseline["ok"] = true;
      baseline["latency_ms"] = result["latency_ms"];
      baseline["id"] = candidate["id"];
      if (result.contains("peak")) baseline["peak"] = result["peak"];
    } else {
      baseline["error"] = result.value("error", json({{"kind", "baseline_failed"}, {"message", "baseline did not profile"}}));
      ctx.Warn(case_name + ": the baseline kernel failed; the problem is not optimized");
    }
    baselines[case_name] = baseline;
    // A copy inside the run: the report reads no file outside the run directory
    // (accelopt/report/run_files.py), and the baseline (NKIBench's file) is outside it.
    if (const std::string kernel = item.value("kernel", ""); !kernel.empty()) {
      try {
        WriteText(fs::path(ctx.StageDir()) / "baselines" / (SafeName(case_name) + ".py"), ReadText(kernel));
      } catch (const std::exception& error) {
        ctx.Warn(case_name + ": cannot keep a copy of the baseline for the report: " + error.what());
      }
    }
  }
  std::string why;
  const std::string endpoint = with.value("llm", "default");
  const bool llm = UseLlm(ctx, with.value("mode", "auto"), endpoint, &why);
  if (llm) ctx.Info("optimizing " + std::to_string(beam.size()) + " problem(s) with " + why);
  else ctx.Log(ACCEL_LOG_WARN, "no LLM endpoint (" + why + "): optimizing " + std::to_string(beam.size()) +
                                   " problem(s) with the rule-based proposer (accelopt.rules)");
  WriteJson(fs::path(ctx.StageDir()) / "beam.json", beam);
  return {{"beam", beam}, {"best", best}, {"baselines", baselines}, {"mode", llm ? "llm" : "rules"}, {"mode_reason", why}};
}

json RunPlan(StageContext& ctx) {
  const json& with = ctx.With();
  const json beam = ListParam(with.value("beam", json()), "beam");
  const json memory = with.value("memory", json());
  const int n = std::max<int>(1, with.value("plans_per_candidate", 12));
  const int64_t iteration = with.value("iteration", int64_t{0});
  const int64_t seed = with.value("seed", int64_t{0});
  const std::string endpoint = with.value("llm", "default");
  const bool llm = UseLlm(ctx, with.value("mode", "auto"), endpoint);
  // LLM moves constrained to the rule vocabulary (docs/search.md, "LLM moves").
  const bool vocabulary = llm && with.value("vocabulary", false);
  const fs::path dir = ctx.StageDir();
  // Problems whose LLM spend cap (or the run's) is reached get no plans: their search is
  // over (docs/llm.md, "Spend caps"); output `stopped` says why.
  const std::map<std::string, std::string> capped =
      llm ? SpendStopped(ctx, endpoint, beam) : std::map<std::string, std::string>{};
  auto is_capped = [&](const json& member) { return capped.count(member.value("case_name", "")) > 0; };
  std::atomic<int> not_sent{0};  // planner calls refused by a spend cap mid-stage

  // One job per (beam member, plan index); results land at their index.
  struct Job {
    size_t member;
    int index;
  };
  std::vector<Job> jobs;
  for (size_t m = 0; m < beam.size(); ++m) {
    if (is_capped(beam[m])) continue;
    for (int i = 0; i < (llm ? n : 1); ++i) jobs.push_back({m, i});
  }
  std::vector<json> plans(jobs.size(), json::array());
  std::vector<json> errors(jobs.size(), json());
  LlmCaller caller(ctx, endpoint, with);
  std::optional<Prompts> prompts;
  json glossary;
  std::vector<std::string> systems(beam.size()), users(beam.size());
  std::vector<json> vocab(beam.size());  // accelopt.search.vocabulary.describe per member (vocabulary mode)
  if (llm) {
    prompts.emplace(with.value("prompts", ""), with.value("target", ""));
    glossary = prompts->Data("metrics.json");
  }
  // Prompt parts per beam member (identical across its N calls but for the plan index).
  std::vector<json> data(beam.size());
  for (size_t m = 0; m < beam.size(); ++m) {
    const json& member = beam[m];
    if (is_capped(member)) continue;  // no job
    if (llm) {
      data[m] = PlannerData(WithLaunchCost(ctx, member), memory, glossary, with.value("max_experiences", 16), n);
      if (vocabulary) {
        json request = {{"source", data[m]["kernel_code"]},
                        {"metrics", member.value("metrics", json::object())},
                        {"input_shapes", member.value("input_shapes", json::array())},
                        {"peak", member.value("peak", json())},
                        {"max_plans", with.value("vocabulary_moves", 12)},
                        {"seed", seed * 1000003 + iteration * 10007 + static_cast<int64_t>(m)},
                        {"history", RuleHistory(member)}};
        vocab[m] = ctx.PythonCall(accelopt::api::kVocabularyDescribe, request);
        if (vocab[m].contains("error") && vocab[m]["error"].is_object()) {
          ctx.Warn(member.value("id", "") + ": accelopt.rules.propose: " + vocab[m]["error"].value("message", "") +
                   " (the planner sees the vocabulary without applicable moves)");
        }
        data[m] = MovePlannerData(data[m], vocab[m]);
      }
      systems[m] = prompts->Render(vocabulary ? "move_planner_system" : "planner_system", data[m]);
    } else {
      data[m] = {{"kernel_code", ReadText(member.value("kernel", ""))}};
    }
  }

  auto run_job = [&](size_t j) {
    const Job job = jobs[j];
    const json& member = beam[job.member];
    const std::string case_name = member.value("case_name", "");
    const std::string plan_id = "b" + std::to_string(job.member) + "p" + std::to_string(job.index);
    try {
      if (llm) {
        json item = data[job.member];
        item["plan_number"] = job.index + 1;
        const std::string user = prompts->Render(vocabulary ? "move_planner_user" : "planner_user", item);
        if (job.index == 0) {
          WriteText(dir / "prompts" / (SafeName(member.value("id", "c")) + ".md"),
                    "# system\n\n" + systems[job.member] + "\n\n# user\n\n" + user);
        }
        const int64_t call_seed = seed * 1000003 + iteration * 10007 + static_cast<int64_t>(job.member) * 101 + job.index;
        json response = caller.Chat(case_name, systems[job.member], user, call_seed);
        std::string text = response.value("content", "");
        WriteText(dir / "replies" / (SafeName(member.value("id", "c")) + "-" + plan_id + ".md"), text);
        json move = vocabulary ? LlmMove(ctx, text, vocab[job.member]) : json::object();
        int reasks = 0;
        if (vocabulary && move.contains("move_error")) {
          // One re-ask quoting what was wrong (docs/llm.md, "Re-asks"); a second miss is refused.
          const std::string note = "Your previous reply could not be used: " + move["move_error"].value("message", std::string()) +
                                   ". Answer again in the answer format of the system prompt, starting with a `MOVE:` line "
                                   "that names one kind of the vocabulary exactly as written there (or open).";
          response = caller.Chat(case_name, systems[job.member], user + "\n\n" + note, call_seed + 1);
          text = response.value("content", "");
          WriteText(dir / "replies" / (SafeName(member.value("id", "c")) + "-" + plan_id + ".reask.md"), text);
          move = LlmMove(ctx, text, vocab[job.member]);
          reasks = 1;
        }
        if (text.find_first_not_of(" \t\r\n") == std::string::npos) {
          throw StageFailure("empty_reply", "the planner returned an empty reply (finish_reason " +
                                                response.value("finish_reason", "?") + ")");
        }
        json plan = {{"plan_id", plan_id}, {"index", job.index}, {"title", PlanTitle(text)}, {"text", text},
                     {"origin", "llm"}, {"seed", call_seed}, {"candidate", member}};
        if (vocabulary) plan.update(move);
        if (reasks) plan["reasks"] = reasks;
        plans[j].push_back(std::move(plan));
      } else {
        json request = {{"source", data[job.member]["kernel_code"]},
                        {"metrics", member.value("metrics", json::object())},
                        {"input_shapes", member.value("input_shapes", json::array())},
                        {"max_plans", n},
                        {"seed", seed * 1000003 + iteration * 10007 + static_cast<int64_t>(job.member)},
                        {"history", RuleHistory(member)}};
        json reply = ctx.PythonCall(accelopt::api::kRulesPropose, request);
        if (reply.contains("error") && reply["error"].is_object()) {
          throw StageFailure("rule_error", "accelopt.rules.propose: " + reply["error"].value("kind", "") + ": " +
                                               reply["error"].value("message", ""));
        }
        json proposed = reply.value("plans", json::array());
        int index = 0;
        for (const auto& plan : proposed) {
          if (index >= n) break;
          std::string description = plan.value("description", plan.value("rule", "rule"));
          json out = {{"plan_id", "b" + std::to_string(job.member) + "p" + std::to_string(index)},
                      {"index", index},
                      {"title", description},
                      {"text", description},
                      {"rule", plan.value("rule", "")},
                      {"rule_plan_id", plan.value("id", "")},
                      {"params", plan.value("params", json::object())},
                      {"origin", "rules"},
                      {"candidate", member}};
          // The proposer's optional estimates travel with the plan (native:mcgs_priors reads them).
          out["kind"] = out["rule"];
          for (const char* key : {"predicted_gain", "prior", "effect", "relieves"}) {
            if (plan.contains(key) && !plan[key].is_null()) out[key] = plan[key];
          }
          plans[j].push_back(std::move(out));
          ++index;
        }
      }
    } catch (const std::exception& error) {
      if (IsSpendCap(error)) {  // not sent, not a planner failure: the problem's search is over
        ++not_sent;
        return;
      }
      json err = ErrorJson(error);
      errors[j] = {{"candidate", member.value("id", "")}, {"case_name", case_name}, {"plan_id", plan_id}, {"error", err}};
      ctx.Warn(member.value("id", "") + " " + plan_id + ": " + err["kind"].get<std::string>() + ": " + err["message"].get<std::string>());
    }
  };

  const int concurrency = with.value("max_concurrency", 8);
  std::set<size_t> converged;  // members whose planner gave the same plan twice
  if (llm && n > 2) {
    // Two waves (docs/llm.md, "Re-asks"): the first two planner calls of each kernel, then
    // the others only for a kernel whose two first replies differ. A planner that gives the
    // same plan (or move) twice has converged; asking it N-2 more times would repeat it.
    std::vector<size_t> first, rest;
    for (size_t j = 0; j < jobs.size(); ++j) (jobs[j].index < 2 ? first : rest).push_back(j);
    ParallelFor(first.size(), concurrency, [&](size_t i) { run_job(first[i]); });
    std::map<size_t, std::vector<std::string>> keys;  // member -> keys of its first replies
    for (size_t j : first) {
      keys[jobs[j].member].push_back(plans[j].empty() ? std::string() : MoveKey(plans[j][0]));
    }
    for (const auto& [m, k] : keys) {
      if (k.size() == 2 && !k[0].empty() && k[0] == k[1]) converged.insert(m);
    }
    std::vector<size_t> asked;
    for (size_t j : rest) {
      if (!converged.count(jobs[j].member)) asked.push_back(j);
    }
    for (size_t m : converged) {
      ctx.Info(beam[m].value("id", "") + ": the planner gave the same plan twice (converged); " + std::to_string(n - 2) +
               " further planner call(s) not made");
    }
    ParallelFor(asked.size(), concurrency, [&](size_t i) { run_job(asked[i]); });
  } else {
    ParallelFor(jobs.size(), concurrency, run_job);
  }

  json out_plans = json::array();
  json out_errors = json::array();
  // One plan per distinct move (vocabulary mode: a node's edges), and one plan for a converged planner.
  std::set<std::pair<size_t, std::string>> seen;  // (member, MoveKey)
  int duplicates = 0;
  for (size_t j = 0; j < jobs.size(); ++j) {
    for (auto& plan : plans[j]) {
      if (vocabulary || converged.count(jobs[j].member)) {
        const std::string key = MoveKey(plan);
        if (!key.empty() && !seen.insert({jobs[j].member, key}).second) {
          ++duplicates;
          continue;
        }
      }
      out_plans.push_back(std::move(plan));
    }
    if (!errors[j].is_null()) out_errors.push_back(errors[j]);
  }
  if (duplicates) ctx.Info(std::to_string(duplicates) + " duplicate plan(s) dropped (the same plan proposed again for the same kernel)");
  caller.Save(ctx, "plan");
  json summary = json::array();
  for (const auto& plan : out_plans) {
    summary.push_back({{"candidate", plan["candidate"]["id"]}, {"plan_id", plan["plan_id"]}, {"title", plan["title"]},
                       {"origin", plan["origin"]}});
  }
  WriteJson(dir / "planner_results.json", summary);
  const std::map<std::string, std::string> stopped =
      llm ? SpendStopped(ctx, endpoint, beam) : std::map<std::string, std::string>{};
  for (const auto& [case_name, reason] : stopped) ctx.Info(case_name + ": no more plans: " + reason);
  ctx.Info(std::to_string(out_plans.size()) + " plans for " + std::to_string(beam.size()) + " candidate(s)" +
           (out_errors.empty() ? "" : ", " + std::to_string(out_errors.size()) + " failed") +
           (not_sent ? ", " + std::to_string(not_sent.load()) + " not sent (spend cap)" : ""));
  return {{"plans", out_plans}, {"errors", out_errors}, {"mode", llm ? "llm" : "rules"}, {"usage", caller.UsageJson()},
          {"stopped", StoppedJson(stopped)}, {"not_sent", not_sent.load()}};
}

}  // namespace accelopt_optimize
