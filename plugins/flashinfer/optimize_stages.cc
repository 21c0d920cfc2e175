// AccelOpt's FlashInfer-Bench loop (flashinfer-facts §3.4-3.5; docs/flashinfer.md):
// native:fib_optimize_init (needs an LLM: without one it is a usage error),
// fib_plan, fib_execute, fib_summarize and fib_optimize_results. The records are
// fib_score's (score_stage.cc); the beam is native:select's, as in the NKI loop.
// Candidates are FIB Solutions (author AccelOpt, entry main.py::run,
// value-returning as AccelOpt forces), profiled by native:fib_evaluate; the
// memory is native:memory's.
#include <algorithm>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <regex>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "common.h"
#include "flashinfer/cuda_build.h"
#include "stages.h"

#include "accelopt/sdk/code_blocks.hpp"
#include "accelopt/sdk/llm.hpp"
#include "accelopt/sdk/numbers.hpp"
#include "accelopt/sdk/prompts.hpp"

namespace accelopt_fib_plugin {
namespace fs = std::filesystem;
using accelopt::sdk::StageFailure;
namespace {

// --- Prompts: prompts/fib/*.mustache through the SDK's renderer (docs/prompts.md) ------

std::string ReadPrompt(const std::string& dir, const std::string& name) {
  fs::path path = fs::path(dir) / name;
  std::ifstream in(path);
  if (!in) throw StageFailure("config_error", "prompt file " + path.string() + " is missing");
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// The target language's facts: <prompts>/facts_<language>.txt.
std::string Facts(const std::string& dir, const std::string& language) { return ReadPrompt(dir, "facts_" + language + ".txt"); }

// AccelOpt's format_definition (flashinfer-facts §3.3).
std::string FormatDefinition(const fib::Definition& d) {
  std::ostringstream out;
  out << "Name: " << d.name << "\nType: " << d.op_type << "\nAxes:\n";
  for (const auto& [name, axis] : d.axes) {
    out << "  " << name << ": " << (axis.is_const ? "constant = " + std::to_string(axis.value) : std::string("variable"));
    if (axis.description) out << " (" << *axis.description << ")";
    out << "\n";
  }
  auto specs = [&out](const char* title, const fib::Named<fib::TensorSpec>& items) {
    out << title << ":\n";
    for (const auto& [name, spec] : items) {
      out << "  " << name << ": ";
      if (spec.shape) {
        out << "[";
        for (size_t i = 0; i < spec.shape->size(); ++i) out << (i ? ", " : "") << (*spec.shape)[i];
        out << "]";
      } else {
        out << "scalar";
      }
      out << " (" << spec.dtype << ")";
      if (spec.description) out << " - " << *spec.description;
      out << "\n";
    }
  };
  specs("Inputs", d.inputs);
  specs("Outputs", d.outputs);
  if (!d.Constraints().empty()) {
    out << "Constraints:\n";
    for (const auto& c : d.Constraints()) out << "  " << c << "\n";
  }
  out << "Reference Implementation:\n" << d.reference << "\n";
  return out.str();
}


// The first fenced code block of a reply, or "" (the SDK's reader, as the NKI loop's executor),
// ending with a newline as a source file does.
std::string FirstCodeBlock(const std::string& text) {
  const std::string code = accelopt::sdk::ExtractFirstCodeBlock(text).value_or("");
  return code.empty() ? code : code + "\n";
}

std::string Hex6(const std::string& text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(h));
  return std::string(buf).substr(0, 6);
}

// The model's name as the start of a solution name (a path component, fib::NameProblem):
// other characters become '-', ".." collapses, at most 64 characters, never empty.
std::string Sanitize(std::string text) {
  for (auto& c : text) {
    unsigned char u = static_cast<unsigned char>(c);
    if (!((u < 0x80 && std::isalnum(u)) || c == '-' || c == '.')) c = '-';
  }
  for (size_t at = text.find(".."); at != std::string::npos; at = text.find("..")) text.erase(at, 1);
  if (text.size() > 64) text.resize(64);
  if (text.empty() || !std::isalnum(static_cast<unsigned char>(text[0]))) text = "m" + text;
  return text;
}

// The definition a candidate belongs to: `case` (this loop's records) or `case_name` (the
// search stages' members, plugins/search/search_common.h).
std::string CaseOf(const json& candidate) { return candidate.value("case", candidate.value("case_name", std::string())); }

// A plan's title: its first non-empty line, at most 80 characters.
std::string TitleOf(const std::string& text) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    const size_t start = line.find_first_not_of(" \t#*-");
    if (start == std::string::npos) continue;
    line = line.substr(start);
    return line.size() > 80 ? line.substr(0, 77) + "..." : line;
  }
  return "plan";
}

// The candidate a plan improves: `parent` (fib_plan's plans) or `candidate` (the search
// stages' selections, native:mcgs_select).
const json& PlanParent(const json& plan) { return plan.contains("parent") && plan["parent"].is_object() ? plan["parent"] : plan["candidate"]; }

// A plan's text for the executor: `text` (with native:agent_pick's reflexion context) or `plan`.
std::string PlanText(const json& plan) {
  if (plan.contains("text") && plan["text"].is_string() && !plan["text"].get<std::string>().empty()) return plan["text"];
  return plan.contains("plan") && plan["plan"].is_string() ? plan["plan"].get<std::string>() : std::string();
}


template <class T>
std::vector<T> Parallel(size_t n, int limit, const std::function<T(size_t)>& fn) {
  std::vector<T> out(n);
  accelopt::sdk::ParallelFor(n, limit, [&](size_t i) { out[i] = fn(i); });
  return out;
}

std::string SystemWithMemory(const std::string& system, const json& memory, const std::string& case_name, int limit) {
  std::vector<std::string> lines;
  for (const auto& item : memory.is_object() ? memory.value("items", json::array()) : json::array())
    if (item.value("case_name", case_name) == case_name && !item.value("summary", "").empty())
      lines.push_back(item.value("summary", ""));
  if (lines.empty()) return system;
  if (static_cast<int>(lines.size()) > limit) lines.erase(lines.begin(), lines.end() - limit);
  std::string out = system + "\n#Experiences\n";
  for (const auto& l : lines) out += l + "\n\n";
  return out;
}

using accelopt::sdk::ListParam;

// "500 requests / 10000000 tokens / 10 USD" from a caps scope of the spend status (null = no cap).
std::string CapsText(const json& caps) {
  std::string out;
  for (const char* key : {"requests", "tokens", "usd"}) {
    const json value = caps.value(key, json());
    out += (out.empty() ? "" : " / ") + (value.is_null() ? std::string("no cap on ") + key
                                                          : value.dump() + " " + (std::string(key) == "usd" ? "USD" : key));
  }
  return out;
}

// The definitions among `items` (their case_name, or their candidate's) whose LLM spend cap
// is reached: definition -> reason (docs/llm.md, "Spend caps"); their search is over.
std::map<std::string, std::string> Stopped(const accelopt::sdk::StageContext& ctx, const json& items) {
  return accelopt::sdk::SpendStopped(ctx, ctx.Param<std::string>("llm"), items, "case_name");
}

using accelopt::sdk::StoppedJson;

}  // namespace

// Why `language` cannot run on this machine ("" when it can): triton needs a GPU python
// (accelopt.fib.gpu.gpu_python), cuda a device the CUDA runner finds (`--probe`).
static std::string MissingDevice(const accelopt::sdk::StageContext& ctx, const std::string& language) {
  if (language == "triton") {
    json probe = ctx.PythonCall(accelopt::api::kFibGpuPython, json::object());
    return probe.contains("reason") ? probe.value("reason", std::string("no GPU python")) : "";
  }
  if (language == "cuda") {
    std::string out;
    const int rc = fib::RunProcess({ACCELOPT_FIB_CUDA_RUNNER, "--probe"}, 60, &out);
    json parsed = json::parse(out, nullptr, false);
    if (rc == 0 && parsed.is_object() && parsed.value("device", false)) return "";
    return parsed.is_object() ? parsed.value("message", std::string("no CUDA device")) : "accelopt-fib-cuda-run --probe: " + out;
  }
  return "";
}

json RunFibOptimizeInit(accelopt::sdk::StageContext& ctx) {
  const std::string endpoint = ctx.Param<std::string>("llm");
  const std::string pipeline = ctx.Param<std::string>("pipeline");
  json described;
  try {
    described = ctx.LlmChat({{"describe", true}, {"endpoint", endpoint}});
  } catch (const StageFailure& failure) {
    described = {{"available", false}, {"reason", failure.what()}};
  }
  if (!described.value("available", false))
    throw StageFailure("usage_error",
                       pipeline + " needs an LLM and there is none (" + described.value("reason", std::string("no endpoint")) +
                           "): configure an OpenAI-compatible endpoint with --set llm.default.base_url=URL --set "
                           "llm.default.model=NAME, or ACCELOPT_LLM_BASE_URL and ACCELOPT_LLM_MODEL (docs/llm.md). "
                           "FIB has no rule-based mode.");
  const std::string language = ctx.Param<std::string>("language");
  // Triton and CUDA solutions run only on a GPU (docs/flashinfer.md, "What runs where"): without
  // one nothing the model writes could be evaluated, so stop before asking it anything.
  if (const std::string missing = MissingDevice(ctx, language); !missing.empty())
    throw StageFailure("usage_error", pipeline + " cannot evaluate any " + language + " solution here: no device (" +
                                          missing + "); run it on a GPU machine (docs/flashinfer.md) or use vars.language=python");
  json cases = json::array(), skipped = json::array();
  for (const auto& item : ListParam(ctx.Param<json>("items"), "items")) {
    fib::Definition d = ItemDefinition(item);
    json start;
    const json best = item.value("best_trace", json());
    for (const auto& s : item.value("solutions", json::array())) {
      if (s["spec"].value("language", "") != language) continue;
      if (start.is_null() || (best.is_object() && best.value("solution", "") == s.value("name", ""))) start = s;
    }
    if (start.is_null() && language == "python") {
      // No python solution: start from the definition's reference, as a solution.
      start = {{"name", d.name + "_reference"},
               {"definition", d.name},
               {"author", "reference"},
               {"description", "the definition's reference"},
               {"spec", {{"language", "python"}, {"target_hardware", {"cpu"}}, {"entry_point", "main.py::run"},
                         {"destination_passing_style", false}}},
               {"sources", {{{"path", "main.py"}, {"content", d.reference}}}}};
    }
    if (start.is_null()) {
      skipped.push_back({{"definition", d.name}, {"reason", "no " + language + " solution to start from"}});
      continue;
    }
    json one = item;
    one["solutions"] = json::array({start});
    cases.push_back({{"id", "c0_" + d.name}, {"case", d.name}, {"case_name", d.name}, {"item", one}, {"solution", start}, {"parent", nullptr}});
  }
  ctx.Info(pipeline + ": " + std::to_string(cases.size()) + " case(s), language " + language + ", LLM endpoint '" +
           endpoint + "' (model " + described.value("model", std::string("?")) + ")");
  return {{"cases", cases}, {"skipped", skipped}, {"model", described.value("model", "model")}, {"language", language}};
}

json RunFibPlan(accelopt::sdk::StageContext& ctx) {
  const json beam = ListParam(ctx.Param<json>("beam"), "beam");
  const std::string prompts = ctx.Param<std::string>("prompts");
  const std::string language = ctx.Param<std::string>("language");
  const int plans = static_cast<int>(ctx.Param<int64_t>("plans_per_candidate"));
  const int64_t seed = ctx.Param<int64_t>("seed") + 1000 * ctx.Param<int64_t>("iteration");
  const std::string facts = Facts(prompts, language);
  const accelopt::sdk::Prompts templates(prompts);
  const std::string system = templates.Render("planner_system", {{"language_facts", facts}, {"language", language}});
  const accelopt::sdk::LlmCaller llm(ctx, ctx.Param<std::string>("llm"), ctx.With());
  struct Job {
    json candidate;
    int index;
  };
  // A definition whose spend cap is reached gets no more plans (its search is over).
  const auto capped = Stopped(ctx, beam);
  std::vector<Job> jobs;
  for (const auto& c : beam) {
    if (capped.count(CaseOf(c))) continue;
    for (int i = 0; i < plans; ++i) jobs.push_back({c, i});
  }
  auto replies = Parallel<json>(jobs.size(), static_cast<int>(ctx.Param<int64_t>("max_concurrency")), [&](size_t k) -> json {
    const auto& job = jobs[k];
    fib::Definition d = ItemDefinition(job.candidate["item"]);
    std::string user = templates.Render("planner_user", {{"definition_str", FormatDefinition(d)},
                                                         {"kernel_code", EntrySource(job.candidate["solution"])},
                                                         {"profile", "latency: " + std::to_string(job.candidate.value("latency_ms", 0.0)) + "\n"},
                                                         {"language", language}});
    std::string sys = SystemWithMemory(system, ctx.Param<json>("memory"), CaseOf(job.candidate),
                                       static_cast<int>(ctx.Param<int64_t>("max_experiences")));
    try {
      return {{"plan", llm.Chat(CaseOf(job.candidate), sys, user, seed + static_cast<int64_t>(k)).value("content", "")}};
    } catch (const StageFailure& failure) {
      if (failure.kind == accelopt::sdk::kSpendCapKind) return {{"not_sent", true}};
      return {{"error", failure.kind + ": " + failure.what()}};
    }
  });
  json out = json::array(), failures = json::array();
  int not_sent = 0;
  for (size_t k = 0; k < jobs.size(); ++k) {
    // The plan in both shapes: this loop's (case, parent, index, plan) and the search stages'
    // (candidate, plan_id, title, text, origin), so native:mcgs_priors and native:agent_pick take it.
    const json& parent = jobs[k].candidate;
    json entry = {{"case", CaseOf(parent)}, {"case_name", CaseOf(parent)}, {"parent", parent}, {"index", jobs[k].index}};
    if (replies[k].contains("not_sent")) {
      ++not_sent;
      continue;
    }
    if (replies[k].contains("error") || replies[k].value("plan", "").empty()) {
      entry["error"] = replies[k].value("error", std::string("empty plan"));
      failures.push_back(entry);
    } else {
      const std::string text = replies[k]["plan"];
      entry["plan"] = text;
      entry["candidate"] = parent;
      entry["plan_id"] = parent.value("search_node", parent.value("id", std::string("c"))) + "p" + std::to_string(jobs[k].index);
      entry["title"] = TitleOf(text);
      entry["text"] = text;
      entry["origin"] = "llm";
      out.push_back(entry);
    }
  }
  const auto stopped = Stopped(ctx, beam);
  for (const auto& [name, reason] : stopped) ctx.Info(name + ": no more plans: " + reason);
  accelopt::sdk::WriteJsonFile(fs::path(ctx.StageDir()) / "planner_results.json", {{"plans", out}, {"failures", failures}});
  ctx.Info("planned " + std::to_string(out.size()) + " of " + std::to_string(jobs.size()) +
           (not_sent ? ", " + std::to_string(not_sent) + " not sent (spend cap)" : ""));
  llm.Save(ctx, "fib_plan");  // <run>/optimize/llm_usage.jsonl, as the NKI loop's stages
  return {{"plans", out}, {"failures", failures}, {"stopped", StoppedJson(stopped)}, {"not_sent", not_sent}};
}

json RunFibExecute(accelopt::sdk::StageContext& ctx) {
  const json plans = ListParam(ctx.Param<json>("plans"), "plans");
  const std::string prompts = ctx.Param<std::string>("prompts");
  const std::string language = ctx.Param<std::string>("language");
  const int samples = static_cast<int>(ctx.Param<int64_t>("samples_per_plan"));
  const int64_t iteration = ctx.Param<int64_t>("iteration");
  const int64_t seed = ctx.Param<int64_t>("seed") + 1000 * iteration + 500;
  const std::string model = Sanitize(ctx.Param<std::string>("model"));
  const accelopt::sdk::Prompts templates(prompts);
  const std::string system = templates.Render("executor_system", {{"language_facts", Facts(prompts, language)}, {"language", language}});
  const accelopt::sdk::LlmCaller llm(ctx, ctx.Param<std::string>("llm"), ctx.With());
  struct Job {
    json plan;
    int sample;
  };
  const auto capped = Stopped(ctx, plans);
  std::vector<Job> jobs;
  for (const auto& p : plans) {
    if (capped.count(CaseOf(p))) continue;  // spend cap reached: no request for it
    for (int j = 0; j < samples; ++j) jobs.push_back({p, j});
  }
  auto replies = Parallel<json>(jobs.size(), static_cast<int>(ctx.Param<int64_t>("max_concurrency")), [&](size_t k) -> json {
    const json& parent = PlanParent(jobs[k].plan);
    fib::Definition d = ItemDefinition(parent["item"]);
    std::string user = templates.Render("executor_user", {{"problem_code", FormatDefinition(d)},
                                                          {"kernel_code", EntrySource(parent["solution"])},
                                                          {"optimization_plan", PlanText(jobs[k].plan)},
                                                          {"language", language}});
    try {
      return {{"reply", llm.Chat(CaseOf(jobs[k].plan), system, user, seed + static_cast<int64_t>(k)).value("content", "")}};
    } catch (const StageFailure& failure) {
      if (failure.kind == accelopt::sdk::kSpendCapKind) return {{"not_sent", true}};
      return {{"error", failure.kind + ": " + failure.what()}};
    }
  });
  // Canonical state hashes (accelopt.search.canon) of every reply's code and its parent's: a
  // reply that only renames or re-comments the parent is the parent, not a candidate.
  std::vector<std::string> codes(jobs.size());
  json sources = json::array();
  for (size_t k = 0; k < jobs.size(); ++k) {
    if (replies[k].contains("reply")) codes[k] = FirstCodeBlock(replies[k]["reply"].get<std::string>());
    sources.push_back(codes[k]);
    sources.push_back(EntrySource(PlanParent(jobs[k].plan)["solution"]));
  }
  const json hashes = jobs.empty() ? json::array()
                                   : ctx.PythonCall(accelopt::api::kCanonStateHashes, {{"sources", sources}}).value("hashes", json::array());
  auto hash_at = [&](size_t i) { return i < hashes.size() && hashes[i].is_string() ? hashes[i].get<std::string>() : std::string(); };
  json candidates = json::array(), failures = json::array();
  int not_sent = 0, unchanged = 0;
  for (size_t k = 0; k < jobs.size(); ++k) {
    const json& plan = jobs[k].plan;
    if (replies[k].contains("not_sent")) {
      ++not_sent;
      continue;
    }
    const json& parent = PlanParent(plan);
    const std::string case_name = CaseOf(plan).empty() ? CaseOf(parent) : CaseOf(plan);
    std::string id = "i" + std::to_string(iteration) + "_" + parent.value("id", "") + "_p" +
                     std::to_string(plan.value("index", 0)) + "_s" + std::to_string(jobs[k].sample);
    // What the search stages match the result by (native:mcgs_merge_states: the plan's id).
    const json plan_ref = {{"plan_id", plan.value("plan_id", std::string())}, {"title", plan.value("title", TitleOf(PlanText(plan)))},
                           {"index", plan.value("index", 0)}};
    const std::string& code = codes[k];
    const std::string state_hash = hash_at(2 * k);
    if (!code.empty() && !state_hash.empty() && state_hash == hash_at(2 * k + 1)) {
      ++unchanged;
      failures.push_back({{"id", id}, {"case", case_name}, {"case_name", case_name}, {"parent", parent.value("id", "")},
                          {"plan", plan_ref},
                          {"error", {{"kind", "unchanged"}, {"message", "the reply's code is the kernel it was asked to improve (same canonical form)"}}}});
      continue;
    }
    if (code.find_first_not_of(" \n\t") == std::string::npos) {
      const bool no_reply = replies[k].contains("error");
      failures.push_back({{"id", id}, {"case", case_name}, {"case_name", case_name}, {"parent", parent.value("id", "")},
                          {"plan", plan_ref},
                          {"error", {{"kind", no_reply ? "llm_error" : "no_code_block"},
                                     {"message", replies[k].value("error", std::string("No implementation found"))}}}});
      continue;
    }
    fib::Definition d = ItemDefinition(parent["item"]);
    std::string name = model + "_" + language + "_" + Hex6(id + code);
    json solution = {{"name", name},
                     {"definition", d.name},
                     {"author", "AccelOpt"},
                     {"description", parent["solution"].value("name", "") + "_plan_" + std::to_string(plan.value("index", 0)) +
                                         "_" + std::to_string(jobs[k].sample)},
                     {"spec", {{"language", language}, {"target_hardware", {language == "python" ? "cpu" : "NVIDIA_H100"}},
                               {"entry_point", language == "cuda" ? "kernel.cu::run" : "main.py::run"},
                               {"destination_passing_style", language == "cuda"}}},  // AccelOpt: value-returning; the shim: DPS
                     {"sources", {{{"path", language == "cuda" ? "kernel.cu" : "main.py"}, {"content", code}}}}};
    fs::path file;
    try {
      file = fs::path(ctx.RunDir()) / "solutions" / "AccelOpt" / fib::PathComponent(d.op_type, "definition.op_type") /
             fib::PathComponent(d.name, "definition.name") / (fib::PathComponent(name, "solution.name") + ".json");
    } catch (const std::invalid_argument& error) {
      throw StageFailure("config_error", error.what());
    }
    accelopt::sdk::WriteFile(file, fib::DumpIndented(ToOrdered(solution)));
    json item = parent["item"];
    item["solutions"] = json::array({solution});
    json candidate = {{"id", id}, {"case", case_name}, {"case_name", case_name}, {"item", item}, {"solution", solution},
                      {"solution_path", file.string()}, {"kernel", WriteKernelSource(ctx, solution)},
                      {"parent", parent.value("id", "")},
                      {"parent_solution", parent["solution"]}, {"parent_latency_ms", parent.value("latency_ms", 0.0)},
                      {"parent_trials_ms", parent.value("trials_ms", json::array())},
                      {"parent_samples_ms", parent.value("samples_ms", json::array())},
                      {"plan_index", plan.value("index", 0)}, {"sample", jobs[k].sample}, {"plan", plan_ref},
                      {"plan_text", PlanText(plan)}};
    if (!state_hash.empty()) candidate["state_hash"] = state_hash;  // native:mcgs_merge_states' state key
    // The problem's constant fields travel on (the search's and the report's baseline).
    for (const char* key : {"problem", "baseline_latency_ms", "baseline_trials_ms", "baseline_samples_ms"})
      if (parent.contains(key)) candidate[key] = parent[key];
    candidates.push_back(candidate);
  }
  accelopt::sdk::WriteJsonFile(fs::path(ctx.StageDir()) / "executor_results.json", {{"candidates", candidates}, {"failures", failures}});
  ctx.Info("executed " + std::to_string(candidates.size()) + " candidate(s), " + std::to_string(failures.size() - unchanged) +
           " without code" + (unchanged ? ", " + std::to_string(unchanged) + " unchanged (the parent's code)" : "") +
           (not_sent ? ", " + std::to_string(not_sent) + " not sent (spend cap)" : ""));
  llm.Save(ctx, "fib_execute");
  return {{"candidates", candidates}, {"failures", failures}, {"not_sent", not_sent}};
}


json RunFibSummarize(accelopt::sdk::StageContext& ctx) {
  const json records = ListParam(ctx.Param<json>("records"), "records");
  const double max_t = ctx.Param<double>("max_threshold"), min_t = ctx.Param<double>("min_threshold");
  const size_t top_k = static_cast<size_t>(ctx.Param<int64_t>("top_k"));
  const std::string prompts = ctx.Param<std::string>("prompts");
  const std::string language = ctx.Param<std::string>("language");
  // Per (parent, plan): the sample with the largest speedup if one is > 1, else the smallest; exactly 1 dropped.
  std::map<std::pair<std::string, int>, json> picked;
  for (const auto& r : records) {
    if (!r.contains("speedup") || !r["speedup"].is_number()) continue;
    double s = r["speedup"];
    if (s == 1.0) continue;
    auto key = std::make_pair(r.value("parent", ""), r.value("plan_index", 0));
    auto it = picked.find(key);
    if (it == picked.end()) {
      picked[key] = r;
      continue;
    }
    double old = it->second["speedup"];
    bool better = (s > 1 || old > 1) ? s > old : s < old;
    if (better) it->second = r;
  }
  // A rewrite is a lesson only when its speedup is beyond the measured noise too (fib_score's
  // `noise`): a CPU timing's jitter teaches nothing (docs/optimize.md, "Noise-aware speedups").
  std::vector<json> positive, negative;
  size_t within_noise = 0;
  for (const auto& [key, r] : picked) {
    double s = r["speedup"];
    const std::string noise = r.value("noise", "unmeasured");
    if (s > max_t && noise == "faster") positive.push_back(r);
    else if (s < 1.0 / min_t && noise == "slower") negative.push_back(r);
    else if (s > max_t || s < 1.0 / min_t) ++within_noise;
  }
  if (within_noise)
    ctx.Info(std::to_string(within_noise) + " rewrite(s) past the thresholds left out of the memory: the speedup is within the measured noise");
  std::sort(positive.begin(), positive.end(), [](const json& a, const json& b) { return a["speedup"] > b["speedup"]; });
  std::sort(negative.begin(), negative.end(), [](const json& a, const json& b) { return a["speedup"] < b["speedup"]; });
  // Definitions whose spend cap is reached get no summary (no request).
  const auto capped = Stopped(ctx, records);
  auto open = [&](const std::vector<json>& list) {
    std::vector<json> out;
    for (const auto& r : list)
      if (!capped.count(r.value("case", ""))) out.push_back(r);
    return out;
  };
  positive = open(positive);
  negative = open(negative);
  std::vector<json> chosen;
  for (size_t i = 0; i < positive.size() && chosen.size() < top_k / 2; ++i) chosen.push_back(positive[i]);
  for (size_t i = 0; i < negative.size() && chosen.size() < top_k; ++i) chosen.push_back(negative[i]);
  const accelopt::sdk::Prompts templates(prompts);
  const std::string system = templates.Render("summarizer_system", {{"language", language}});
  const accelopt::sdk::LlmCaller llm(ctx, ctx.Param<std::string>("llm"), ctx.With());
  auto replies = Parallel<json>(chosen.size(), static_cast<int>(ctx.Param<int64_t>("max_concurrency")), [&](size_t k) -> json {
    const json& r = chosen[k];
    double s = r["speedup"];
    std::string candidate = EntrySource(r["solution"]), parent = EntrySource(r.value("parent_solution", r["solution"]));
    std::string slow = s >= 1 ? parent : candidate, fast = s >= 1 ? candidate : parent;
    // AccelOpt never fills {speedup}; here it is filled (flashinfer-facts §3.5 quirk, fixed).
    std::string user = templates.Render("summarizer_user", {{"slow_kernel", slow}, {"fast_kernel", fast}, {"speedup", std::to_string(std::max(s, 1 / s))}});
    try {
      return {{"reply", llm.Chat(CaseOf(r), system, user, 7000 + static_cast<int64_t>(k)).value("content", "")}};
    } catch (const StageFailure& failure) {
      return {{"error", failure.what()}};
    }
  });
  json items = json::array();
  for (size_t k = 0; k < chosen.size(); ++k) {
    if (!replies[k].contains("reply")) continue;
    std::string text = replies[k]["reply"];
    if (text.find("No optimization found") != std::string::npos) continue;
    std::smatch m;
    std::string title = std::regex_search(text, m, std::regex("\\*\\*([^*]+)\\*\\*")) ? std::string(m[1]) : text.substr(0, text.find('\n'));
    double s = chosen[k]["speedup"];
    items.push_back({{"id", chosen[k].value("id", "")}, {"case_name", chosen[k].value("case", "")}, {"title", title},
                     {"summary", text}, {"speedup_original", s}, {"speedup", std::max(s, 1 / s)},
                     {"after", EntrySource(chosen[k]["solution"])}});
  }
  accelopt::sdk::WriteJsonFile(fs::path(ctx.StageDir()) / "rewrites.json", {{"items", items}});
  llm.Save(ctx, "fib_summarize");
  return {{"items", items}};
}

json RunFibOptimizeResults(accelopt::sdk::StageContext& ctx) {
  json best = ctx.Param<json>("best");
  if (!best.is_object()) best = json::object();
  fs::path run = ctx.RunDir();
  json cases = json::array();
  std::ostringstream md;
  md << "# " << ctx.Param<std::string>("pipeline") << "\n\n| definition | baseline ms | best ms | speedup | 95% interval | best solution |\n|---|---|---|---|---|---|\n";
  for (auto it = best.begin(); it != best.end(); ++it) {
    const json& b = it.value();
    double base = b.value("baseline_latency_ms", 0.0), lat = b.value("latency_ms", 0.0);
    double speedup = lat > 0 ? base / lat : 0;
    fs::path file;
    try {
      file = run / "best" / (fib::PathComponent(it.key(), "best: definition") + ".json");
    } catch (const std::invalid_argument& error) {
      throw StageFailure("config_error", error.what());
    }
    accelopt::sdk::WriteFile(file, fib::DumpIndented(ToOrdered(b["solution"])));
    const json ci = b.value("baseline_speedup_ci", json(nullptr));
    cases.push_back({{"definition", it.key()}, {"baseline_latency_ms", base}, {"best_latency_ms", lat}, {"speedup", speedup},
                     {"speedup_ci", ci}, {"noise", b.value("baseline_noise", "unmeasured")},
                     {"solution", b["solution"].value("name", "")}, {"file", file.string()}});
    const std::string interval = ci.is_array() ? accelopt::sdk::Fixed(ci[0].get<double>()) + "-" + accelopt::sdk::Fixed(ci[1].get<double>()) + "x"
                                               : std::string("unmeasured");
    char line[512];
    std::snprintf(line, sizeof(line), "| %s | %.4f | %.4f | %.3fx | %s | %s |\n", it.key().c_str(), base, lat, speedup,
                  interval.c_str(), b["solution"].value("name", "").c_str());
    md << line;
  }
  json report = {{"cases", cases}};
  // The LLM spend against its caps, and the definitions a cap stopped (docs/llm.md, "Spend caps").
  std::vector<std::string> names;
  for (auto it = best.begin(); it != best.end(); ++it) names.push_back(it.key());
  const json spend = ctx.LlmSpend(ctx.Param<std::string>("llm"), names);
  if (spend.is_object()) {
    report["spend"] = spend;
    const json problems = spend.value("problems", json::object());
    for (auto& c : report["cases"]) {
      const json p = problems.value(c.value("definition", ""), json::object());
      c["llm_spend"] = p;
      if (p.contains("stopped") && p["stopped"].is_string()) {
        c["stopped"] = p["stopped"];
        md << "\n" << c.value("definition", "") << ": search stopped: " << p["stopped"].get<std::string>() << "\n";
      }
    }
    const json run_spend = spend.value("run", json::object());
    md << "\nLLM (endpoint " << spend.value("endpoint", "") << "): " << run_spend.value("requests", 0) << " requests, "
       << run_spend.value("tokens", 0) << " tokens, " << run_spend.value("usd", 0.0) << " USD; caps per problem "
       << CapsText(spend["caps"].value("problem", json::object())) << ", per run " << CapsText(spend["caps"].value("run", json::object()))
       << ".\n";
  }
  accelopt::sdk::WriteJsonFile(run / "optimize_results.json", report);
  accelopt::sdk::WriteFile(run / "optimize_results.md", md.str());
  ctx.Info("\n" + md.str());
  return report;
}

json RunFibOptimizeReportDeprecated(accelopt::sdk::StageContext& ctx) {
  ctx.Warn("native:fib_optimize_report is the former name of native:fib_optimize_results; use the new name");
  return RunFibOptimizeResults(ctx);
}

}  // namespace accelopt_fib_plugin
