// flashinfer_cli.cc - `accelopt-host flashinfer validate DIR` (docs/flashinfer.md).
#include "cli/flashinfer_cli.h"

#include <iostream>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "cli/commands.h"
#include "flashinfer/trace_set.h"
#include "python/interpreter.h"

namespace accelopt::cli {

struct FlashinferCommands::State {
  CLI::App* flashinfer = nullptr;
  CLI::App* validate = nullptr;
  std::string dir;
  bool json = false;
  bool errors_only = false;
};

FlashinferCommands::FlashinferCommands(CLI::App& app) : state_(std::make_unique<State>()) {
  State& s = *state_;
  s.flashinfer = app.add_subcommand("flashinfer", "FlashInfer-Bench trace sets (docs/flashinfer.md)");
  s.flashinfer->require_subcommand(1);
  s.validate = s.flashinfer->add_subcommand(
      "validate", "Check a FIB trace set as `flashinfer-bench validate` does (no GPU run): every problem with its file and field");
  s.validate->add_option("dir", s.dir, "Trace-set root (definitions/, workloads/, solutions/, traces/, blob/)")
      ->required()
      ->check(CLI::ExistingDirectory);
  s.validate->add_flag("--json", s.json, "Print one JSON object {counts, problems: [{level, file, field, message}]}");
  s.validate->add_flag("--errors-only", s.errors_only, "Leave warnings out of the listing");
}

FlashinferCommands::~FlashinferCommands() = default;

bool FlashinferCommands::Dispatch(int* exit_code) const {
  if (!*state_->validate) return false;
  *exit_code = FlashinferValidateCommand(state_->dir, state_->json, state_->errors_only);
  return true;
}

namespace {

// FIB's validators parse Python with `ast`: the host's interpreter does it
// (accelopt.fib.syntax); without Python, the heuristic of flashinfer/model.h.
fib::PythonSyntax EmbeddedPython(bool* available) {
  try {
    python::Initialize();
    *available = true;
  } catch (const std::exception& error) {
    spdlog::warn("flashinfer validate: no embedded Python ({}); reference and constraint syntax is checked "
                 "heuristically",
                 error.what());
    *available = false;
    return fib::HeuristicPython();
  }
  fib::PythonSyntax syntax;
  auto call = [](const accelopt::api::Entry& entry, const std::string& source) -> std::optional<std::string> {
    nlohmann::json result = python::CallJson(entry, source);
    if (result.is_string()) return result.get<std::string>();
    return std::nullopt;
  };
  syntax.module = [call](const std::string& source) { return call(accelopt::api::kFibCheckModule, source); };
  syntax.expression = [call](const std::string& source) { return call(accelopt::api::kFibCheckExpression, source); };
  return syntax;
}

}  // namespace

int FlashinferValidateCommand(const std::string& dir, bool as_json, bool errors_only) {
  bool python = false;
  fib::LoadOptions options;
  options.python = EmbeddedPython(&python);
  fib::TraceSet set;
  try {
    set = fib::LoadTraceSet(dir, options);
  } catch (const std::exception& error) {
    std::cerr << "flashinfer validate: " << error.what() << "\n";
    return kExitUsage;
  }
  fib::Problems problems = fib::Validate(set);
  size_t errors = fib::ErrorCount(problems);
  size_t warnings = problems.size() - errors;
  nlohmann::json counts = {{"definitions", set.definitions.size()}, {"workloads", set.workloads.size()},
                           {"solutions", set.solutions.size()},     {"traces", set.traces.size()},
                           {"errors", errors},                      {"warnings", warnings}};
  if (as_json) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& p : problems) {
      if (errors_only && p.level != fib::Problem::kError) continue;
      list.push_back({{"level", p.level == fib::Problem::kError ? "error" : "warning"},
                      {"file", p.file},
                      {"field", p.field},
                      {"message", p.message}});
    }
    nlohmann::json out = {{"root", set.root}, {"layout", set.layout}, {"python_syntax", python},
                          {"counts", counts}, {"problems", list}};
    std::cout << out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  } else {
    for (const auto& p : problems) {
      if (errors_only && p.level != fib::Problem::kError) continue;
      std::cout << (p.file.empty() ? set.root : p.file) << ": " << (p.field.empty() ? "" : p.field + ": ")
                << (p.level == fib::Problem::kError ? "error: " : "warning: ") << p.message << "\n";
    }
    std::cout << "flashinfer validate: " << set.root << " (layout " << set.layout << "): " << set.definitions.size()
              << " definitions, " << set.workloads.size() << " workloads, " << set.solutions.size()
              << " solutions, " << set.traces.size() << " traces; " << errors << " error" << (errors == 1 ? "" : "s")
              << ", " << warnings << " warning" << (warnings == 1 ? "" : "s") << "\n";
  }
  return errors > 0 ? kExitUsage : kExitOk;
}

}  // namespace accelopt::cli
