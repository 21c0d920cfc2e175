// model.h - a parsed pipeline (docs/pipelines.md is the user reference).
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/errors.h"

namespace accelopt {

/// `retry:` of a stage: attempts in total (1 = no retry), delay between them,
/// and the error kinds worth retrying (empty = any kind but config errors).
struct RetrySpec {
  int max_attempts = 1;
  int64_t backoff_ms = 0;
  std::vector<std::string> on;
};

/// `loop:` of a stage group: at most `max_iterations` rounds of `stages`,
/// stopping early once `until` is true. `carry` seeds loop state.
struct LoopSpec {
  nlohmann::json max_iterations;  // integer or "${{ expr }}"
  std::string until;               // expression text (may be empty)
  nlohmann::json budget;           // optional integer or "${{ expr }}": candidates the loop evaluates at most
  nlohmann::json carry = nlohmann::json::object();
  SourceLocation where;
};

/// One entry of `stages:`. Either a runnable stage (`uses`) or a loop group
/// (`loop` + nested `stages`).
struct StageSpec {
  std::string id;
  SourceLocation where;
  std::string uses;  // "native:x" or "lua:path"; empty for loop groups
  SourceLocation uses_where;
  nlohmann::json with = nlohmann::json::object();
  std::map<std::string, SourceLocation> with_where;  // per parameter
  std::string if_expr;
  SourceLocation if_where;
  int64_t timeout_ms = 0;  // 0 = no timeout
  nlohmann::json timeout_expr;  // "${{ expr }}" resolved when the stage starts (null: timeout_ms)
  RetrySpec retry;
  std::string on_failure = "fail";  // "fail" | "continue"
  nlohmann::json for_each;          // null when not a fan-out
  SourceLocation for_each_where;
  std::string as = "item";
  bool count_failed_items = true;  // `failed_items: count|ignore` (ignore: expected failures, e.g. candidates)
  nlohmann::json max_parallel = 1;  // integer or "${{ expr }}"
  nlohmann::json carry = nlohmann::json::object();  // loop state updates after this stage
  std::optional<LoopSpec> loop;
  std::vector<StageSpec> body;
};

/// A whole pipeline file after `--set` overrides.
struct Pipeline {
  std::filesystem::path file;  // absolute
  int version = 1;
  std::string name;
  std::string description;
  nlohmann::json vars = nlohmann::json::object();
  nlohmann::json backend = nlohmann::json::object();
  nlohmann::json llm = nlohmann::json::object();
  /// `python_path:` folders (absolute; relative entries are resolved against
  /// the pipeline's folder) added to the embedded Python's sys.path.
  std::vector<std::string> python_path;
  std::map<std::string, SourceLocation> vars_where;  // per variable (its value)
  /// Locations in the `llm:` block: "<endpoint>" (its value) and "<endpoint>.<field>".
  std::map<std::string, SourceLocation> llm_where;
  SourceLocation llm_block_where;
  std::vector<StageSpec> stages;
  std::string resolved_yaml;  // the YAML text after overrides, for the run directory
};

}  // namespace accelopt
