// plugins/flashinfer/common.cc - helpers of the FlashInfer-Bench stages (common.h).
#include "common.h"

#include <sys/time.h>

#include <cstdio>
#include <ctime>
#include <filesystem>
#include <stdexcept>

namespace accelopt_fib_plugin {
namespace fs = std::filesystem;
using accelopt::sdk::StageFailure;

json ToJson(const fib::ojson& value) { return json::parse(value.dump(-1, ' ', false, fib::ojson::error_handler_t::replace)); }

fib::ojson ToOrdered(const json& value) { return fib::ojson::parse(value.dump(-1, ' ', false, json::error_handler_t::replace)); }

fib::PythonSyntax HostPython(const accelopt::sdk::StageContext& ctx) {
  fib::PythonSyntax syntax;
  auto heuristic = fib::HeuristicPython();
  auto call = [&ctx](const accelopt::api::Entry& entry, const std::string& source,
                     const std::function<std::optional<std::string>(const std::string&)>& fallback)
      -> std::optional<std::string> {
    try {
      json result = ctx.PythonCall(entry, source);
      if (result.is_string()) return result.get<std::string>();
      return std::nullopt;
    } catch (const accelopt::sdk::StageFailure&) {
      return fallback(source);
    }
  };
  syntax.module = [call, heuristic](const std::string& source) { return call(accelopt::api::kFibCheckModule,
                                                                             source, heuristic.module); };
  syntax.expression = [call, heuristic](const std::string& source) {
    return call(accelopt::api::kFibCheckExpression, source, heuristic.expression);
  };
  return syntax;
}

namespace {

[[noreturn]] void Fail(const std::string& what, const fib::Problems& problems) {
  std::string text = what;
  for (const auto& line : ProblemLines(problems, true)) text += "; " + line;
  throw accelopt::sdk::StageFailure("config_error", text);
}

}  // namespace

fib::Definition ItemDefinition(const json& item) {
  if (!item.is_object() || !item.contains("definition_text") || !item["definition_text"].is_string())
    throw accelopt::sdk::StageFailure("config_error", "the item has no definition_text (give an item of native:select_traces)");
  fib::ojson parsed = fib::ojson::parse(item["definition_text"].get<std::string>(), nullptr, false);
  fib::Problems problems;
  auto d = fib::ParseDefinition(parsed, "item", &problems);
  if (!d) Fail("the item's definition does not parse", problems);
  return *d;
}

fib::Solution ParseSolutionJson(const json& value) {
  fib::Problems problems;
  auto s = fib::ParseSolution(ToOrdered(value), "solution", &problems);
  if (s) fib::CheckSolution(*s, "solution", &problems);
  if (!s || fib::ErrorCount(problems)) Fail("invalid solution", problems);
  return *s;
}

fib::Workload ParseWorkloadJson(const json& value) {
  fib::Problems problems;
  auto w = fib::ParseWorkload(ToOrdered(value), "workload", &problems);
  if (!w) Fail("invalid workload", problems);
  return *w;
}

std::string IsoNow() {
  timeval tv{};
  gettimeofday(&tv, nullptr);
  std::tm local{};
  localtime_r(&tv.tv_sec, &local);
  char buf[64];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &local);
  char out[80];
  std::snprintf(out, sizeof(out), "%s.%06ld", buf, static_cast<long>(tv.tv_usec));
  return out;
}

std::vector<std::string> StringList(const json& value) {
  std::vector<std::string> out;
  if (value.is_string()) out.push_back(value.get<std::string>());
  if (value.is_array())
    for (const auto& v : value)
      if (v.is_string()) out.push_back(v.get<std::string>());
  return out;
}

std::vector<std::string> ProblemLines(const fib::Problems& problems, bool errors_only) {
  std::vector<std::string> out;
  for (const auto& p : problems) {
    if (errors_only && p.level != fib::Problem::kError) continue;
    out.push_back((p.file.empty() ? "" : p.file + ": ") + (p.field.empty() ? "" : p.field + ": ") +
                  (p.level == fib::Problem::kError ? "" : "warning: ") + p.message);
  }
  return out;
}

std::string EntrySource(const json& solution) {
  std::string entry = solution["spec"].value("entry_point", "main.py::run");
  std::string file = entry.substr(0, entry.find("::"));
  for (const auto& s : solution.value("sources", json::array()))
    if (s.value("path", "") == file) return s.value("content", "");
  return solution["sources"].empty() ? "" : solution["sources"][0].value("content", "");
}

// See common.h. The solution's entry source as a file of its own, <stage dir>/kernels/<name>.py (.cu): what
// the search stages hash into a state (accelopt.search.canon: two replies that differ only in
// comments or names are one state). Returns its path.
std::string WriteKernelSource(const accelopt::sdk::StageContext& ctx, const json& solution) {
  const bool cuda = solution.value("spec", json::object()).value("language", "") == "cuda";
  fs::path file;
  try {
    file = fs::path(ctx.StageDir()) / "kernels" / (fib::PathComponent(solution.value("name", std::string()), "solution.name") + (cuda ? ".cu" : ".py"));
  } catch (const std::invalid_argument& error) {
    throw StageFailure("config_error", error.what());
  }
  accelopt::sdk::WriteFile(file, EntrySource(solution));
  return file.string();
}

}  // namespace accelopt_fib_plugin
