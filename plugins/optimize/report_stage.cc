// native:optimize_results - the results of an optimization run, one row per
// problem: original and best latency, speedup, % of peak before/after
// (accelopt.peak), the winning kernel (copied to <out>/best/) and its lineage,
// candidate counts and LLM tokens/cost. Writes optimize_results.json and
// optimize_results.md.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "stages.h"

namespace fs = std::filesystem;

namespace accelopt_optimize {
namespace {

// Per-case LLM usage from <run>/optimize/llm_usage.jsonl (the last line per stage dir wins).
std::map<std::string, Usage> UsageByCase(const fs::path& run_dir, Usage* total) {
  std::map<std::string, json> latest;
  std::ifstream in(run_dir / "optimize" / "llm_usage.jsonl");
  for (std::string line; std::getline(in, line);) {
    json entry = json::parse(line, nullptr, false);
    if (entry.is_object()) latest[entry.value("key", "")] = entry;
  }
  std::map<std::string, Usage> out;
  for (const auto& [key, entry] : latest) {
    const json by_case = entry["usage"].value("by_case", json::object());
    for (const auto& [case_name, u] : by_case.items()) {
      Usage usage;
      usage.requests = u.value("requests", int64_t{0});
      usage.failed = u.value("failed", int64_t{0});
      usage.not_sent = u.value("not_sent", int64_t{0});
      usage.prompt_tokens = u.value("prompt_tokens", int64_t{0});
      usage.completion_tokens = u.value("completion_tokens", int64_t{0});
      usage.cost_usd = u.value("cost_usd", 0.0);
      out[case_name].Add(usage);
      total->Add(usage);
    }
  }
  return out;
}

// Candidate counts per case from <run>/optimize/records.jsonl.
std::map<std::string, json> CountsByCase(const fs::path& run_dir) {
  std::map<std::string, json> out;
  std::ifstream in(run_dir / "optimize" / "records.jsonl");
  for (std::string line; std::getline(in, line);) {
    json record = json::parse(line, nullptr, false);
    if (!record.is_object()) continue;
    json& counts = out[record.value("case_name", "")];
    if (counts.is_null()) counts = {{"candidates", 0}, {"correct", 0}, {"failed_by_kind", json::object()}};
    counts["candidates"] = counts["candidates"].get<int>() + 1;
    if (record.value("status", "") == "ok") {
      counts["correct"] = counts["correct"].get<int>() + 1;
    } else {
      std::string kind = record.value("error", json::object()).value("kind", "error");
      counts["failed_by_kind"][kind] = counts["failed_by_kind"].value(kind, 0) + 1;
    }
  }
  return out;
}

// accelopt.peak for one latency of a case; on failure, null and *why (once per call site).
json Peak(StageContext& ctx, const json& baseline, double latency, const std::string& target, std::string* why) {
  try {
    json request = {{"problem", baseline.value("problem", "")}, {"values", baseline.value("values", json::object())},
                    {"latency_ms", latency}, {"target", target}};
    if (baseline.contains("task") && baseline["task"].is_string()) request["reference"] = baseline["task"];
    return ctx.PythonCall(accelopt::api::kPeakDescribe, request);
  } catch (const std::exception& error) {
    if (why) *why = error.what();
    return nullptr;
  }
}

// Text for one cell of the markdown table. LLM plan titles, ids and error
// kinds are untrusted: HTML is escaped (the .md is rendered by viewers that
// pass raw HTML through, as report.html escapes it), and `|` and line breaks,
// which would add cells or rows, are escaped or joined.
std::string Cell(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '|': out += "\\|"; break;
      case '\n': case '\r': out += ' '; break;
      default: out += c;
    }
  }
  return out;
}

std::string Pct(const json& peak) {
  return peak.is_object() && peak.contains("percent_of_peak") ? Fixed(peak["percent_of_peak"].get<double>(), 1) + "%" : "n/a";
}

}  // namespace

json RunOptimizeResults(StageContext& ctx) {
  const json& with = ctx.With();
  json baselines = with.value("baselines", json::object());
  json best = with.value("best", json::object());
  if (!baselines.is_object()) baselines = json::object();
  if (!best.is_object()) best = json::object();
  const std::string target = with.value("target", "trn1");
  const fs::path out_dir = with.value("out_dir", std::string()).empty() ? fs::path(ctx.RunDir()) : fs::path(with.value("out_dir", ""));
  Usage total_usage;
  auto usage = UsageByCase(ctx.RunDir(), &total_usage);
  auto counts = CountsByCase(ctx.RunDir());
  // The LLM spend against its caps, from the host (docs/llm.md, "Spend caps"): per problem,
  // and the reason a cap ended a problem's search. Null without an LLM endpoint.
  std::vector<std::string> case_names;
  for (const auto& [case_name, baseline] : baselines.items()) case_names.push_back(case_name);
  const json spend = ctx.LlmSpend(with.value("llm", std::string("default")), case_names);
  const json spend_problems = spend.is_object() ? spend.value("problems", json::object()) : json::object();
  std::map<std::string, std::string> stopped;  // case -> why a spend cap ended its search
  for (const auto& [case_name, p] : spend_problems.items()) {
    if (p.is_object() && p.contains("stopped") && p["stopped"].is_string()) stopped[case_name] = p["stopped"];
  }

  json rows = json::array();
  std::ostringstream md;
  md << "# Optimization report\n\n"
     << "| problem | case | original ms | best ms | speedup | % peak before | % peak after | candidates (correct) | LLM tokens | LLM cost USD | winner |\n"
     << "|---|---|---|---|---|---|---|---|---|---|---|\n";
  double log_sum = 0;
  int n_ok = 0, improved = 0;
  for (const auto& [case_name, baseline] : baselines.items()) {
    json row = {{"case_name", case_name}, {"problem", baseline.value("problem", "")}};
    json c = counts.count(case_name) ? counts[case_name] : json({{"candidates", 0}, {"correct", 0}, {"failed_by_kind", json::object()}});
    Usage u = usage.count(case_name) ? usage[case_name] : Usage{};
    row["candidates"] = c;
    row["llm"] = u.ToJson();
    if (spend_problems.contains(case_name)) row["llm_spend"] = spend_problems[case_name];
    if (stopped.count(case_name)) row["stopped"] = stopped[case_name];
    const std::string stop_note = stopped.count(case_name) ? "; search stopped: " + Cell(stopped[case_name]) : "";
    if (!baseline.value("ok", false)) {
      row["status"] = "baseline_failed";
      row["error"] = baseline.value("error", json());
      rows.push_back(row);
      md << "| " << Cell(row["problem"].get<std::string>()) << " | " << Cell(case_name)
         << " | failed | - | - | - | - | - | - | - | baseline failed: "
         << Cell(baseline.value("error", json::object()).value("kind", "?")) << " |\n";
      continue;
    }
    const double original = baseline["latency_ms"].get<double>();
    json winner = best.contains(case_name) ? best[case_name] : json::object();
    const double latency = Number(winner, "latency_ms").value_or(original);
    const double speedup = original / latency;
    std::string no_peak;
    json peak_before = Peak(ctx, baseline, original, target, &no_peak);
    json peak_after = Peak(ctx, baseline, latency, target, nullptr);
    if (!peak_before.is_object()) {  // said, and kept in the row (the report shows why, not a bare "-")
      row["peak_error"] = no_peak;
      ctx.Warn(case_name + ": no % of peak: " + no_peak);
    }
    row["original_latency_ms"] = original;
    row["best_latency_ms"] = latency;
    row["speedup"] = speedup;
    row["percent_of_peak_before"] = peak_before.is_object() ? peak_before.value("percent_of_peak", json()) : json();
    row["percent_of_peak_after"] = peak_after.is_object() ? peak_after.value("percent_of_peak", json()) : json();
    row["peak_bound"] = peak_before.is_object() ? peak_before.value("bound", json()) : json();
    const bool better = winner.value("origin", "baseline") != "baseline" && latency < original;
    row["status"] = better ? "improved" : "no_improvement";
    if (better) ++improved;
    row["winner"] = {{"id", winner.value("id", "")}, {"origin", winner.value("origin", "")},
                     {"lineage", winner.value("lineage", json::array())}, {"history", winner.value("history", json::array())},
                     {"validation", winner.value("validation", "full")},
                     {"validated_seeds", winner.value("validated_seeds", json())}};
    std::string kernel = winner.value("kernel", baseline.value("kernel", ""));
    if (better && !kernel.empty()) {
      fs::path copy = out_dir / "best" / (SafeName(case_name) + ".py");
      try {
        WriteText(copy, ReadText(kernel));
        kernel = copy.string();
      } catch (const std::exception& error) {
        ctx.Warn("cannot copy the winning kernel: " + std::string(error.what()));
      }
    }
    row["kernel"] = kernel;
    log_sum += std::log(speedup);
    ++n_ok;
    std::string lineage;
    for (const auto& step : winner.value("history", json::array())) {
      lineage += (lineage.empty() ? "" : " -> ") + Cell(step.value("title", step.value("plan_id", "?")));
    }
    if (!better) {
      std::string why = std::to_string(c["candidates"].get<int>()) + " candidates, " + std::to_string(c["correct"].get<int>()) +
                        " correct, none faster";
      if (c["correct"].get<int>() == 0 && c["candidates"].get<int>() > 0) why = "no correct candidate (" + c["failed_by_kind"].dump() + ")";
      if (c["candidates"].get<int>() == 0) why = "no candidate was produced";
      row["reason"] = why;
      lineage = "baseline kept: " + Cell(why);
    }
    rows.push_back(row);
    md << "| " << Cell(row["problem"].get<std::string>()) << " | " << Cell(case_name) << " | " << Fixed(original, 5) << " | " << Fixed(latency, 5)
       << " | " << Fixed(speedup) << "x | " << Pct(peak_before) << " | " << Pct(peak_after) << " | " << c["candidates"].get<int>()
       << " (" << c["correct"].get<int>() << ") | " << (u.prompt_tokens + u.completion_tokens) << " | " << Fixed(u.cost_usd, 4)
       << " | " << (better ? Cell(winner.value("id", "")) + ": " + lineage : lineage) << stop_note << " |\n";
  }
  const double geomean = n_ok > 0 ? std::exp(log_sum / n_ok) : 1.0;
  md << "\nGeomean speedup " << Fixed(geomean) << "x over " << n_ok << " problem(s); " << improved << " improved. LLM: "
     << total_usage.requests << " requests (" << total_usage.failed << " failed), "
     << (total_usage.prompt_tokens + total_usage.completion_tokens) << " tokens, " << Fixed(total_usage.cost_usd, 4) << " USD.\n";
  json report = {{"rows", rows}, {"geomean_speedup", geomean}, {"improved", improved}, {"problems", rows.size()},
                 {"llm", total_usage.ToJson()}, {"target", target}, {"mode", with.value("mode", "")}};
  report["spend"] = spend;
  if (spend.is_object()) {
    const json run = spend.value("run", json::object());
    const json caps = spend.value("caps", json::object());
    auto caps_text = [](const json& scope) {
      std::string out;
      for (const char* key : {"requests", "tokens", "usd"}) {
        const json value = scope.is_object() ? scope.value(key, json()) : json();
        out += (out.empty() ? "" : " / ") +
               (value.is_null() ? std::string("no ") + key + " cap"
                                : (value.is_number_float() ? Significant(value.get<double>(), 6) : value.dump()) + " " +
                                      (std::string(key) == "usd" ? "USD" : key));
      }
      return out;
    };
    md << "\nLLM spend caps (endpoint " << Cell(spend.value("endpoint", "")) << "): per problem "
       << caps_text(caps.value("problem", json())) << "; per run " << caps_text(caps.value("run", json())) << ". Spent: "
       << run.value("requests", int64_t{0}) << " requests, " << run.value("tokens", int64_t{0}) << " tokens, "
       << Fixed(run.value("usd", 0.0), 4) << " USD"
       << (run.value("refused", int64_t{0}) > 0 ? ", " + std::to_string(run.value("refused", int64_t{0})) + " refused (not sent)" : "")
       << ".\n";
    if (run.contains("stopped") && run["stopped"].is_string()) {
      md << "\n**The run's LLM spend cap ended the search:** " << Cell(run["stopped"].get<std::string>()) << ".\n";
    } else {
      for (const auto& [case_name, reason] : stopped) {
        md << "\n**" << Cell(case_name) << ": search stopped:** " << Cell(reason) << ".\n";
      }
    }
  }
  // A run in LLM mode that asked the model and got no candidate at all did not optimize
  // anything: the report says why and the stage fails, so the run exits 1 (docs/llm.md, "Re-asks").
  int produced = 0;
  for (const auto& [case_name, c] : counts) produced += c.value("candidates", 0);
  std::string nothing;
  if (with.value("mode", "") == "llm" && n_ok > 0 && produced == 0 && total_usage.requests + total_usage.failed > 0) {
    nothing = "no candidate was produced: the run made " + std::to_string(total_usage.requests + total_usage.failed) +
              " LLM request(s) (" + std::to_string(total_usage.failed) +
              " failed) and none of them gave a kernel to evaluate (replies refused, failed or cut off by a stage timeout: see the "
              "stages' warnings and errors and llm/transcript.jsonl)";
    if (!stopped.empty()) nothing += "; then an LLM spend cap ended the search: " + stopped.begin()->second;
    md << "\n**The run failed:** " << nothing << ".\n";
    report["failure"] = {{"kind", "no_candidates"}, {"message", nothing}};
  }
  WriteJson(out_dir / "optimize_results.json", report);
  WriteText(out_dir / "optimize_results.md", md.str());
  ctx.Info("\n" + md.str());
  if (!nothing.empty()) throw StageFailure("no_candidates", nothing);
  report["markdown"] = (out_dir / "optimize_results.md").string();
  report["json"] = (out_dir / "optimize_results.json").string();
  return report;
}

json RunOptimizeReportDeprecated(StageContext& ctx) {
  ctx.Warn("native:optimize_report is the former name of native:optimize_results; use the new name");
  return RunOptimizeResults(ctx);
}

}  // namespace accelopt_optimize
