// native:profile_results - writes profile results the way AccelOpt does
// (profile_results.csv with its columns) plus a JSON file and a summary
// text, at the top of the run directory. `profile_report` is the stage's former
// name, kept so that older pipelines run (with a warning): "report" is the
// run's HTML report (docs/architecture.md, "Words").
#include <filesystem>
#include <sstream>

#include "accelopt/plugin_sdk.hpp"
#include "profile_stages.h"

namespace fs = std::filesystem;
using nlohmann::json;
using accelopt::sdk::StageContext;
using accelopt::sdk::StageFailure;

namespace accelopt_profile {
namespace {

// RFC 4180 field quoting.
std::string CsvField(const std::string& text) {
  if (text.find_first_of(",\"\n\r") == std::string::npos) return text;
  std::string out = "\"";
  for (char c : text) out += (c == '"') ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string Str(const json& value) { return value.is_string() ? value.get<std::string>() : (value.is_null() ? "" : value.dump()); }

// AccelOpt's `profile` column: latency plus the profiler's fields, or the error.
json ProfileColumn(const json& result) {
  json profile = result.value("metrics", json::object());
  if (!profile.is_object()) profile = json::object();
  if (result.contains("latency_ms") && result["latency_ms"].is_number()) profile["latency"] = result["latency_ms"];
  profile["compiled"] = result.value("compiled", false);
  profile["correct"] = result.value("correct", false);
  profile["estimated"] = result.value("estimated", false);
  if (result.contains("error") && result["error"].is_object()) profile["error"] = result["error"];
  if (result.contains("peak")) profile["peak"] = result["peak"];
  if (result.contains("peak_error")) profile["peak_error"] = result["peak_error"];  // why no % of peak
  return profile;
}

}  // namespace

json RunProfileResults(StageContext& ctx) {
  const json given = ctx.OptionalParam<json>("results").value_or(json::array());
  const json results = given.is_array() ? given : json::array();
  const fs::path out_dir = ctx.OptionalParam<std::string>("out_dir").value_or(ctx.RunDir());
  std::ostringstream csv;
  csv << "problem,values,case_id,task,kernel,case_name,service_name,profile\n";
  json rows = json::array();
  int correct = 0;
  for (const auto& result : results) {
    // A for_each item that failed as a stage holds {"ok": false, "error", "item"}.
    json item = result.contains("case") ? result["case"] : (result.contains("item") ? result["item"] : json::object());
    json profile = ProfileColumn(result);
    if (!result.contains("case") && result.contains("error")) profile["error"] = result["error"];
    csv << CsvField(Str(item.value("problem", json()))) << "," << CsvField(item.value("values", json::object()).dump()) << ","
        << CsvField(Str(item.value("case_id", json()))) << "," << CsvField(Str(item.value("task", json()))) << ","
        << CsvField(Str(item.value("kernel", json()))) << "," << CsvField(Str(item.value("case_name", json()))) << ","
        << CsvField(Str(item.value("service_name", json()))) << "," << CsvField(profile.dump()) << "\n";
    if (profile.value("correct", false)) ++correct;
    rows.push_back({{"case", item}, {"profile", profile}});
  }
  accelopt::sdk::WriteFile(out_dir / "profile_results.csv", csv.str());
  accelopt::sdk::WriteJsonFile(out_dir / "profile_results.json", rows);
  json outputs = {{"csv", (out_dir / "profile_results.csv").string()},
                  {"json", (out_dir / "profile_results.json").string()},
                  {"total", results.size()},
                  {"correct", correct},
                  {"failed", static_cast<int>(results.size()) - correct}};
  if (const auto summary = ctx.OptionalParam<std::string>("summary")) {
    accelopt::sdk::WriteFile(out_dir / "summary.txt", *summary);
    outputs["summary"] = (out_dir / "summary.txt").string();
    ctx.Info("summary:\n" + *summary);
  }
  ctx.Info(std::to_string(correct) + "/" + std::to_string(results.size()) + " kernels correct; results in " +
           (out_dir / "profile_results.csv").string());
  return outputs;
}

json RunProfileReportDeprecated(StageContext& ctx) {
  ctx.Warn("native:profile_report is the former name of native:profile_results; use the new name");
  return RunProfileResults(ctx);
}

}  // namespace accelopt_profile
