// native:summarize - AccelOpt's rewrite selection (accelopt-facts §3.4) and
// one summary per selected slow->fast pair (accelopt-facts §3.4 step 5), with the measured speedup
// filled in. Without an LLM the summary is built from the plan/rule and the
// measured latencies.
#include <filesystem>

#include "prompt_data.h"
#include "stages.h"

namespace fs = std::filesystem;

namespace accelopt_optimize {
namespace {

struct Pick {
  json record;
  double speedup;
};

// Rewrite selection. Per (parent, plan) group of successful samples: the best if
// its speedup > 1, the worst if the best is < 1, nothing at exactly 1. Then per
// case: positives > max_threshold (fastest first) up to top_k/2, negatives <
// 1/min_threshold (slowest first) for the rest of top_k.
std::vector<Pick> SelectRewrites(const json& records, double max_threshold, double min_threshold, int top_k, json* log) {
  std::map<std::string, std::map<std::string, std::vector<Pick>>> groups;  // case -> group -> samples
  std::vector<std::string> case_order;
  for (const auto& record : records) {
    if (record.value("status", "") != "ok" || !record.contains("speedup") || !record["speedup"].is_number()) continue;
    const std::string case_name = record.value("case_name", "");
    const std::string group = record.value("parent", "") + "|" + record.value("plan", json::object()).value("plan_id", "");
    if (!groups.count(case_name)) case_order.push_back(case_name);
    groups[case_name][group].push_back({record, record["speedup"].get<double>()});
  }
  std::vector<Pick> picked;
  for (const auto& case_name : case_order) {
    std::vector<Pick> positives, negatives;
    for (auto& [group, samples] : groups[case_name]) {
      auto best = std::max_element(samples.begin(), samples.end(), [](const Pick& a, const Pick& b) { return a.speedup < b.speedup; });
      auto worst = std::min_element(samples.begin(), samples.end(), [](const Pick& a, const Pick& b) { return a.speedup < b.speedup; });
      if (best->speedup > 1.0) positives.push_back(*best);
      else if (best->speedup < 1.0) negatives.push_back(*worst);
    }
    std::stable_sort(positives.begin(), positives.end(), [](const Pick& a, const Pick& b) { return a.speedup > b.speedup; });
    std::stable_sort(negatives.begin(), negatives.end(), [](const Pick& a, const Pick& b) { return a.speedup < b.speedup; });
    int n_pos = 0;
    for (const auto& pick : positives) {
      if (n_pos >= top_k / 2) break;
      if (pick.speedup > max_threshold) {
        picked.push_back(pick);
        ++n_pos;
      }
    }
    int n_neg = 0;
    for (const auto& pick : negatives) {
      if (n_neg >= top_k - n_pos) break;
      if (pick.speedup < 1.0 / min_threshold) {
        picked.push_back(pick);
        ++n_neg;
      }
    }
    (*log)[case_name] = {{"positive_candidates", positives.size()}, {"negative_candidates", negatives.size()},
                         {"positives", n_pos}, {"negatives", n_neg}};
  }
  return picked;
}

}  // namespace

json RunSummarize(StageContext& ctx) {
  const json& with = ctx.With();
  const json records = ListParam(with.value("records", json()), "records");
  const double max_threshold = with.value("max_threshold", 1.04);
  const double min_threshold = with.value("min_threshold", 1.15);
  const int top_k = with.value("top_k", 8);
  const int64_t iteration = with.value("iteration", int64_t{0});
  const std::string endpoint = with.value("llm", "default");
  json selection_log = json::object();
  std::vector<Pick> picks = SelectRewrites(records, max_threshold, min_threshold, top_k, &selection_log);
  const bool llm = !picks.empty() && UseLlm(ctx, with.value("mode", "auto"), endpoint);
  if (llm) {
    // A problem whose LLM spend cap is reached gets no summary: no request for it (docs/llm.md, "Spend caps").
    const auto capped = SpendStopped(ctx, endpoint, records);
    if (!capped.empty()) {
      std::vector<Pick> open;
      for (auto& pick : picks) {
        if (!capped.count(pick.record.value("case_name", ""))) open.push_back(std::move(pick));
      }
      picks = std::move(open);
    }
  }
  std::optional<Prompts> prompts;
  std::string system;
  if (llm) {
    prompts.emplace(with.value("prompts", ""), with.value("target", ""));
    system = prompts->Render("summarizer_system", json::object());
  }
  LlmCaller caller(ctx, endpoint, with);
  std::vector<json> items(picks.size());
  std::vector<json> errors(picks.size());
  const fs::path dir = ctx.StageDir();

  ParallelFor(picks.size(), with.value("max_concurrency", 8), [&](size_t i) {
    const json& record = picks[i].record;
    const double s = picks[i].speedup;
    const bool regression = s < 1.0;
    const std::string id = record.value("id", "");
    json lineage = {{"candidate", id}, {"parent", record.value("parent", "")}, {"plan_id", record.value("plan", json::object()).value("plan_id", "")},
                    {"plan_title", record.value("plan", json::object()).value("title", "")}, {"iteration", record.value("iteration", iteration)}};
    json item = {{"id", id},
                 {"problem", record.value("problem", "")},
                 {"case_name", record.value("case_name", "")},
                 {"speedup_original", s},
                 {"speedup", regression ? 1.0 / s : s},
                 {"direction", regression ? "regression" : "improvement"},
                 {"lineage", lineage},
                 {"iteration", iteration}};
    try {
      const std::string parent_source = ReadText(record.value("parent_kernel", ""));
      const std::string candidate_source = ReadText(record.value("kernel", ""));
      const std::string& slow = regression ? candidate_source : parent_source;
      const std::string& fast = regression ? parent_source : candidate_source;
      if (llm) {
        json data = SummarizerData(record, slow, fast, regression ? 1.0 / s : s, regression);
        json response = caller.Chat(record.value("case_name", ""), system, prompts->Render("summarizer_user", data), std::nullopt);
        const std::string reply = response.value("content", "");
        WriteText(dir / "replies" / (SafeName(id) + ".md"), reply);
        json parsed = ParseSummary(reply);
        if (parsed.is_null()) {
          errors[i] = {{"id", id}, {"error", {{"kind", "no_optimization_found"}, {"message", "the summarizer saw no generalizable change"}}}};
          return;
        }
        item.update(parsed);
        item["source"] = "llm";
      } else {
        json region = ChangedRegion(slow, fast);
        const json plan = record.value("plan", json::object());
        const double parent_ms = record.value("parent_latency_ms", 0.0);
        const double ms = record.value("latency_ms", 0.0);
        std::string rule = plan.value("rule", "");
        std::string params = plan.value("params", json::object()).dump();
        item["title"] = regression ? "Avoid: " + plan.value("title", rule) : plan.value("title", rule);
        item["description"] =
            regression ? "Applying rule `" + rule + "` with " + params + " to the " + record.value("problem", "") +
                             " kernel made it slower: " + Significant(parent_ms, 5) + " ms -> " + Significant(ms, 5) +
                             " ms; the kernel without the rule is " + Fixed(1.0 / s) +
                             "x faster. The slower form is the code with the rule, the faster form the code without it."
                       : "Applying rule `" + rule + "` with " + params + " to the " + record.value("problem", "") +
                             " kernel cut the latency from " + Significant(parent_ms, 5) + " ms to " + Significant(ms, 5) +
                             " ms (" + Fixed(s) + "x).";
        item["before"] = region["before"];
        item["after"] = region["after"];
        item["rule"] = rule;
        item["params"] = plan.value("params", json::object());
        item["source"] = "rules";
      }
      items[i] = item;
    } catch (const std::exception& error) {
      errors[i] = {{"id", id}, {"error", ErrorJson(error)}};
      if (!IsSpendCap(error)) ctx.Warn(id + ": summary failed: " + error.what());
    }
  });

  json out_items = json::array();
  json out_errors = json::array();
  json selected = json::array();
  for (size_t i = 0; i < picks.size(); ++i) {
    selected.push_back({{"id", picks[i].record.value("id", "")}, {"case_name", picks[i].record.value("case_name", "")},
                        {"speedup", picks[i].speedup}});
    if (!items[i].is_null()) out_items.push_back(items[i]);
    if (!errors[i].is_null()) out_errors.push_back(errors[i]);
  }
  caller.Save(ctx, "summarize");
  WriteJson(dir / "rewrites_selection.json", {{"selected", selected}, {"per_case", selection_log}});
  WriteJson(dir / "experiences.json", out_items);
  ctx.Info(std::to_string(selected.size()) + " rewrites selected, " + std::to_string(out_items.size()) + " experiences" +
           (out_errors.empty() ? "" : ", " + std::to_string(out_errors.size()) + " without summary"));
  return {{"items", out_items}, {"selected", selected}, {"errors", out_errors}, {"per_case", selection_log},
          {"usage", caller.UsageJson()}};
}

}  // namespace accelopt_optimize
