#include "cli/prompts_command.h"

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <iostream>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "cli/commands.h"
#include "core/errors.h"
#include "pipeline/expressions.h"
#include "pipeline/loader.h"
#include "plugin/registry.h"
#include "python/interpreter.h"

namespace accelopt::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Runs native:<name> once in `dir`/<name> (the way the executor would, without a run).
// `quiet`: its warnings are logged at debug level (optimize_init's "no LLM endpoint").
json RunNative(const StageRegistry& registry, const std::string& name, const json& with, const json& vars, const fs::path& dir,
               bool quiet = false) {
  auto stage = registry.FindNative(name);
  if (!stage) throw StageError("config_error", "native:" + name + " is not registered (is the plugin built?)");
  StageInvocation invocation;
  invocation.stage_id = name;
  invocation.with = with;
  invocation.vars = vars;
  invocation.stage_dir = dir / name;
  invocation.run_dir = dir;
  fs::create_directories(invocation.stage_dir);
  invocation.log = [name, quiet](int level, const std::string& message) {
    if (level >= 3 && !quiet) spdlog::log(static_cast<spdlog::level::level_enum>(level), "{}: {}", name, message);
    else spdlog::debug("{}: {}", name, message);
  };
  invocation.progress = [](int64_t, int64_t, const std::string&) {};
  return stage->Run(invocation);
}

// A scratch directory removed when the scope ends.
class ScratchDir {
 public:
  ScratchDir() {
    std::string pattern = (fs::temp_directory_path() / "accelopt-prompts-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("cannot create a scratch directory");
    path_ = pattern;
  }
  ~ScratchDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

std::string ReadWhole(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::invalid_argument("cannot read " + path.string());
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// The pipeline's vars with their expressions resolved (as the executor resolves them).
json ResolvedVars(const Pipeline& pipeline, const fs::path& scratch) {
  json context = {{"vars", pipeline.vars},
                  {"backend", pipeline.backend},
                  {"pipeline", {{"name", pipeline.name}, {"file", pipeline.file.string()}, {"dir", pipeline.file.parent_path().string()}}},
                  {"run", {{"dir", scratch.string()}}},
                  {"stages", json::object()}};
  return ResolveValue(pipeline.vars, context, {pipeline.file.string()});
}

std::string StringVar(const json& vars, const std::string& name) {
  if (!vars.contains(name) || !vars[name].is_string() || vars[name].get<std::string>().empty()) {
    throw std::invalid_argument("the pipeline has no vars." + name + " (give one with --set vars." + name + "=...)");
  }
  return vars[name].get<std::string>();
}

// A profile result as render_prompts' `other`.
json OtherKernel(const json& result, const std::string& kernel) {
  return {{"kernel", kernel}, {"correct", result.value("correct", false)}, {"latency_ms", result.value("latency_ms", json())},
          {"error", result.value("error", json())}};
}

}  // namespace

int PromptsRenderCommand(const PromptsRenderOptions& options) {
  Pipeline pipeline;
  try {
    pipeline = LoadPipeline(options.pipeline, options.sets);
  } catch (const ConfigError& error) {
    for (const auto& d : error.diagnostics()) std::cerr << d.ToString() << "\n";
    return kExitUsage;
  }
  StageRegistry registry;
  std::vector<std::string> warnings;
  registry.LoadPlugins(&warnings);
  for (const auto& warning : warnings) spdlog::warn("plugin skipped: {}", warning);
  try {
    python::Initialize(pipeline.python_path);
  } catch (const python::PythonError& error) {
    std::cerr << "error: cannot start the embedded Python: " << error.what() << "\n";
    return kExitUsage;
  }
  ScratchDir scratch;
  json rendered;
  try {
    const json vars = ResolvedVars(pipeline, scratch.path());
    const std::string prompts = fs::absolute(StringVar(vars, "prompts")).string();
    json load_with = {{"dir", fs::absolute(StringVar(vars, "nkibench")).string()}, {"cases", "all"}};
    if (vars.contains("rel_tol") && vars["rel_tol"].is_number()) load_with["rel_tol"] = vars["rel_tol"];
    if (vars.contains("rel_tol_overrides") && vars["rel_tol_overrides"].is_object()) load_with["rel_tol_overrides"] = vars["rel_tol_overrides"];
    json cases = RunNative(registry, "nkibench_load", load_with, vars, scratch.path()).value("cases", json::array());
    json kcase;
    std::string names;
    for (const auto& item : cases) {
      if (item.value("case_name", "") == options.case_name) kcase = item;
      names += (names.empty() ? "" : ", ") + item.value("case_name", "");
    }
    if (kcase.is_null()) throw std::invalid_argument("no case '" + options.case_name + "' in the benchmark; cases: " + names);

    auto profile = [&](const std::string& kernel) {
      json with = {{"kernel", kernel},
                   {"reference", kcase.value("task", "")},
                   {"rel_tol", kcase.value("rel_tol", 2e-5)},
                   {"backend", pipeline.backend.value("nki", "auto")},
                   {"target", pipeline.backend.value("target", "trn1")},
                   {"isolation", "inprocess"},
                   {"case", kcase}};
      return RunNative(registry, "profile", with, vars, scratch.path());
    };
    json baseline = profile(kcase.value("kernel", ""));
    if (!baseline.value("correct", false)) {
      const json error = baseline.value("error", json::object());
      std::cerr << "error: the baseline kernel of " << options.case_name << " failed: "
                << (error.is_object() ? error.value("kind", "?") + ": " + error.value("message", "") : std::string("not correct")) << "\n";
      return kExitFailed;
    }
    json init = RunNative(registry, "optimize_init", {{"results", json::array({baseline})}, {"mode", "rules"}}, vars, scratch.path(),
                          /*quiet=*/true);
    json render_with = {{"candidate", init.at("beam").at(0)}, {"prompts", prompts},
                        {"target", pipeline.backend.value("target", "trn1")}};  // prompts/targets/<target>/
    if (vars.contains("plans") && vars["plans"].is_number_integer()) render_with["plans_per_candidate"] = vars["plans"];
    if (vars.contains("memory_capacity") && vars["memory_capacity"].is_number_integer()) render_with["max_experiences"] = vars["memory_capacity"];
    if (!options.memory.empty()) {
      json memory_with = {{"load", fs::absolute(options.memory).string()}, {"scope", vars.value("memory_scope", "problem")}};
      if (render_with.contains("max_experiences")) memory_with["capacity"] = render_with["max_experiences"];
      render_with["memory"] = RunNative(registry, "memory", memory_with, vars, scratch.path()).at("memory");
    }
    if (!options.plan.empty()) render_with["plan"] = ReadWhole(options.plan);
    if (!options.kernel.empty()) {
      const std::string kernel = fs::absolute(options.kernel).string();
      render_with["other"] = OtherKernel(profile(kernel), kernel);
    }
    rendered = RunNative(registry, "render_prompts", render_with, vars, scratch.path()).at("prompts");
  } catch (const std::invalid_argument& error) {
    std::cerr << "error: " << error.what() << "\n";
    return kExitUsage;
  } catch (const std::exception& error) {
    std::cerr << "error: " << error.what() << "\n";
    return kExitUsage;
  }

  json chosen = json::array();
  for (const auto& item : rendered) {
    if (options.stage == "all" || item.value("stage", "") == options.stage) chosen.push_back(item);
  }
  if (!options.out_dir.empty()) {
    std::error_code ec;
    fs::create_directories(options.out_dir, ec);
    for (const auto& item : chosen) {
      for (const char* part : {"system", "user"}) {
        const fs::path file = fs::path(options.out_dir) / (item["stage"].get<std::string>() + "_" + part + ".md");
        std::ofstream out(file, std::ios::binary | std::ios::trunc);
        out << item[part].get<std::string>();
        if (!out) {
          std::cerr << "error: cannot write " << file.string() << "\n";
          return kExitUsage;
        }
        std::cout << file.string() << "\n";
      }
    }
    return kExitOk;
  }
  if (options.json) {
    std::cout << chosen.dump(2) << "\n";
    return kExitOk;
  }
  for (const auto& item : chosen) {
    for (const char* part : {"system", "user"}) {
      std::cout << "===== " << item["stage"].get<std::string>() << " / " << part << " =====\n"
                << item[part].get<std::string>() << "\n";
    }
  }
  return kExitOk;
}

}  // namespace accelopt::cli
