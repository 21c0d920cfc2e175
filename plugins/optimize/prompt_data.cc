#include "prompt_data.h"

#include <cmath>
#include <cstdio>
#include <set>

#include "stages.h"

namespace accelopt_optimize {

namespace {

std::string PercentText(double fraction) {
  if (fraction == 0.0) return "0 %";
  return Significant(100.0 * fraction, 3) + " %";
}

std::string CountText(const json& value) {
  if (value.is_number_integer() || value.is_number_unsigned()) return value.dump();
  const double v = value.get<double>();
  if (std::fabs(v) < 1e15 && v == std::floor(v)) return std::to_string(static_cast<long long>(v));
  return Significant(v);
}

bool Estimated(const json& member) {
  if (member.value("estimated", false)) return true;
  const json metrics = member.value("metrics", json::object());
  return metrics.is_object() && metrics.value("estimated", false);
}

const char* BoundText(const std::string& bound) {
  if (bound == "memory") return "set by HBM traffic: the problem is memory-bound";
  if (bound == "mm") return "set by matmul FLOPs: the problem is compute-bound";
  if (bound == "vec") return "set by Vector/Scalar Engine work";
  return "";
}

// One metric's value text, or "" when the member lacks it.
std::string MetricText(const json& entry, const json& member) {
  const std::string name = entry.value("name", "");
  const std::string format = entry.value("format", "count");
  const std::string unit = entry.value("unit", "");
  const json metrics = member.value("metrics", json::object());
  const auto latency = Number(member, "latency_ms");
  if (format == "peak") {
    const json peak = member.value("peak", json::object());
    auto percent = Number(peak, "percent_of_peak");
    if (!percent) return "";
    std::string text = Significant(*percent, 3) + " %";
    if (auto peak_ms = Number(peak, "peak_ms")) {
      text += " (lower bound " + Significant(*peak_ms) + " ms, " + BoundText(peak.value("bound", "")) + ")";
    }
    return text;
  }
  json value;
  if (name == "latency") value = latency ? json(*latency) : json();
  else if (metrics.is_object() && metrics.contains(name)) value = metrics[name];
  if (format == "text") return value.is_string() ? value.get<std::string>() : "";
  if (!value.is_number()) return "";
  const double v = value.get<double>();
  if (format == "fraction") return PercentText(v);
  if (format == "share") {
    // Busy share of the whole latency, and of the kernel's own time when a launch cost is known.
    std::string text = PercentText(v);
    const auto launch = Number(metrics, "launch_ms");
    if (latency && launch && *launch > 0 && *latency > *launch) {
      text += " (" + PercentText(v * *latency / (*latency - *launch)) + " of the time after the launch cost)";
    }
    return text;
  }
  if (format == "launch") {
    std::string text = Significant(v) + " ms";
    if (latency && *latency > 0) text += " (" + Significant(100.0 * v / *latency, 3) + " % of the latency)";
    return text;
  }
  if (format == "ms") {
    std::string text = Significant(v) + " ms";
    if (name == "latency") {
      text += Estimated(member) ? " (an estimate of the emulator's cost model, not a measurement on Trainium)"
                                : " (measured on Trainium)";
    }
    return text;
  }
  if (format == "ratio") return Significant(v) + (unit.empty() ? "" : " " + unit);
  return CountText(value) + (unit.empty() ? "" : " " + unit);
}

// Mustache renders a section for an empty string: absent text is `false` instead.
json TextOrFalse(const std::string& text) { return text.empty() ? json(false) : json(text); }

std::string ApiList(const std::string& source) {
  std::string apis;
  for (const auto& api : KernelApis(source)) apis += (apis.empty() ? "`" : ", `") + api + "`";
  return apis;
}

bool IdentStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool IdentChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// `source` with comments and string literals blanked (same length).
std::string CodeOnly(const std::string& source) {
  std::string out = source;
  size_t i = 0;
  const size_t n = source.size();
  while (i < n) {
    const char c = source[i];
    if (c == '#') {
      while (i < n && source[i] != '\n') out[i++] = ' ';
      continue;
    }
    if (c == '"' || c == '\'') {
      const bool triple = i + 2 < n && source[i + 1] == c && source[i + 2] == c;
      size_t j = i + (triple ? 3 : 1);
      while (j < n) {
        if (source[j] == '\\') {
          j += 2;
          continue;
        }
        if (triple ? (j + 2 < n && source[j] == c && source[j + 1] == c && source[j + 2] == c) : (source[j] == c || source[j] == '\n')) {
          j += triple ? 3 : 1;
          break;
        }
        ++j;
      }
      j = std::min(j, n);
      for (size_t k = i; k < j; ++k) {
        if (out[k] != '\n') out[k] = ' ';
      }
      i = j;
      continue;
    }
    ++i;
  }
  return out;
}

}  // namespace

json WithLaunchCost(const StageContext& ctx, json member) {
  if (!Estimated(member)) return member;
  if (!member.contains("metrics") || !member["metrics"].is_object()) member["metrics"] = json::object();
  json& metrics = member["metrics"];
  if (metrics.contains("launch_ms")) return member;
  try {
    json cost = ctx.PythonCall(accelopt::api::kLaunchCostDescribe,
                               {{"estimated", true}, {"target", metrics.value("target", "trn1")}});
    if (cost.is_object() && cost.contains("launch_ms") && cost["launch_ms"].is_number()) metrics["launch_ms"] = cost["launch_ms"];
  } catch (const std::exception& error) {
    ctx.Log(ACCEL_LOG_DEBUG, std::string("no launch cost: ") + error.what());
  }
  return member;
}

json DisplayedMetrics(const json& glossary, const json& member) {
  json out = json::array();
  if (!glossary.is_array()) return out;
  for (const auto& entry : glossary) {
    std::string text = MetricText(entry, member);
    if (text.empty()) continue;
    out.push_back({{"name", entry.value("name", "")}, {"text", text}, {"unit", entry.value("unit", "")},
                   {"meaning", entry.value("meaning", "")}});
  }
  return out;
}

std::vector<std::string> KernelApis(const std::string& source) {
  static const std::vector<std::pair<std::string, std::string>> kModules = {
      {"nki.language.", "nl."}, {"nki.isa.", "nisa."}, {"nl.", "nl."}, {"nisa.", "nisa."}, {"nki.", "nki."}};
  const std::string code = CodeOnly(source);
  std::vector<std::string> apis;
  std::set<std::string> seen;
  for (size_t i = 0; i < code.size(); ++i) {
    if (i > 0 && (IdentChar(code[i - 1]) || code[i - 1] == '.')) continue;
    for (const auto& [prefix, shown] : kModules) {
      if (code.compare(i, prefix.size(), prefix) != 0) continue;
      size_t j = i + prefix.size();
      if (j >= code.size() || !IdentStart(code[j])) break;
      size_t end = j;
      while (end < code.size() && IdentChar(code[end])) ++end;
      if (end < code.size() && code[end] == '.' && shown == "nki.") break;  // nki.<sub>.x handled by longer prefixes
      std::string name = shown + code.substr(j, end - j);
      if (seen.insert(name).second) apis.push_back(name);
      i = end - 1;
      break;
    }
  }
  return apis;
}

json ExperienceView(const json& item) {
  const bool regression = item.value("direction", "improvement") == "regression";
  const double speedup = item.contains("speedup") && item["speedup"].is_number() ? item["speedup"].get<double>() : 1.0;
  return {{"title", item.value("title", "")},
          {"description", item.value("description", "")},
          {"slower", TextOrFalse(item.value("before", ""))},
          {"faster", TextOrFalse(item.value("after", ""))},
          {"speedup", Fixed(speedup, 3)},
          {"case_name", item.value("case_name", "")},
          {"regression", regression},
          {"improvement", !regression}};
}

json PlannerData(const json& member, const json& memory, const json& glossary, int max_experiences, int plans_total) {
  const std::string case_name = member.value("case_name", "");
  json experiences = json::array();
  for (const auto& item : VisibleExperiences(memory, case_name, max_experiences)) experiences.push_back(ExperienceView(item));
  const json history = member.value("history", json::array());
  json metrics = DisplayedMetrics(glossary, member);
  json terms = json::array();  // the glossary as the system prompt lists it
  for (const auto& entry : glossary.is_array() ? glossary : json::array()) {
    terms.push_back({{"name", entry.value("name", "")}, {"unit", TextOrFalse(entry.value("unit", ""))},
                     {"meaning", entry.value("meaning", "")}});
  }
  return {{"problem", member.value("problem", "")},
          {"case_name", case_name},
          {"values", member.value("values", json::object()).dump()},
          {"reference_code", ReadText(member.value("task", ""))},
          {"kernel_code", ReadText(member.value("kernel", ""))},
          {"experiences", experiences},
          {"has_experiences", !experiences.empty()},
          {"plans_total", plans_total},
          {"history", history},
          {"has_history", !history.empty()},
          {"glossary", terms},
          {"metrics", metrics},
          {"estimated", Estimated(member)}};
}

json MovePlannerData(json data, const json& vocab) {
  json kinds = json::array();
  for (const auto& k : vocab.value("kinds", json::array())) {
    kinds.push_back({{"name", k.value("name", "")}, {"effect", k.value("effect", "")}});
  }
  json applicable = json::array();
  for (const auto& p : vocab.value("applicable", json::array())) {
    json params = p.value("params", json::object());
    const std::string site = params.is_object() ? params.value("site", "") : "";
    std::string gain;
    if (p.contains("predicted_gain") && p["predicted_gain"].is_number()) gain = PercentText(p["predicted_gain"].get<double>());
    applicable.push_back({{"id", p.value("id", "")}, {"rule", p.value("rule", "")}, {"site", site},
                          {"description", p.value("description", "")}, {"params", params.dump()}, {"gain", TextOrFalse(gain)}});
  }
  const json model = vocab.value("bottleneck", json());
  data["kinds"] = kinds;
  data["applicable"] = applicable;
  data["has_applicable"] = !applicable.empty();
  data["bottleneck"] = model.is_object() ? json({{"label", model.value("bottleneck", "")}, {"why", model.value("why", "")}})
                                         : json(false);
  return data;
}

json ExecutorData(const json& plan, const std::string& parent_source) {
  const json& parent = plan.at("candidate");
  const std::string kind = plan.contains("kind") && plan["kind"].is_string() ? plan["kind"].get<std::string>() : "";
  const json params = plan.value("params", json::object());
  return {{"problem", parent.value("problem", "")},
          {"move_kind", TextOrFalse(kind)},
          {"move_effect", TextOrFalse(plan.value("effect", ""))},
          {"move_params", TextOrFalse(params.is_object() && !params.empty() ? params.dump() : "")},
          {"case_name", parent.value("case_name", "")},
          {"reference_code", ReadText(parent.value("task", ""))},
          {"kernel_code", parent_source},
          {"kernel_apis", TextOrFalse(ApiList(parent_source))},
          {"plan_title", plan.value("title", "")},
          {"plan_text", plan.value("text", "")}};
}

json FixerData(const json& record, const std::string& code) {
  const json error = record.value("error", json::object());
  return {{"problem", record.value("problem", "")},
          {"reference_code", ReadText(record.value("task", ""))},
          {"kernel_code", code},
          {"kernel_apis", TextOrFalse(ApiList(code))},
          {"error_kind", error.value("kind", "")},
          {"error_message", error.value("message", "")},
          {"traceback", error.value("traceback", "")}};
}

json SummarizerData(const json& record, const std::string& slow, const std::string& fast, double speedup, bool regression) {
  const json plan = record.value("plan", json::object());
  return {{"slow_kernel", slow},
          {"fast_kernel", fast},
          {"speedup", Fixed(speedup, 3)},
          {"regression", regression},
          {"problem", record.value("problem", "")},
          {"plan_title", TextOrFalse(plan.is_object() ? plan.value("title", "") : "")}};
}

}  // namespace accelopt_optimize
