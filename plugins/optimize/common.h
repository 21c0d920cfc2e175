// plugins/optimize/common.h - what every optimization-loop stage (plan,
// execute, score, fixer, select, summarize, memory, optimize_init,
// optimize_report) includes: the helpers' headers (files, source text, reply
// parsing, prompt templates, LLM calls) and the small shared utilities below.
// docs/optimize.md describes the data the stages exchange.
#pragma once

#include <atomic>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "accelopt/plugin_sdk.hpp"
#include "llm_caller.h"
#include "prompt_templates.h"
#include "reply_parse.h"
#include "source_text.h"
#include "stage_files.h"

namespace accelopt_optimize {

using nlohmann::json;
using accelopt::sdk::StageContext;
using accelopt::sdk::StageFailure;

// ---- parameter shapes ---------------------------------------------------------

/// A list parameter that may also be given as null (empty) or as the producing
/// stage's outputs object holding the list under `key`. Anything else: empty.
json ListParam(const json& value, const std::string& key);

// ---- misc -------------------------------------------------------------------

/// Runs fn(0..n-1) on up to `threads` threads; exceptions inside fn are the caller's job.
void ParallelFor(size_t n, int threads, const std::function<void(size_t)>& fn);

/// {"kind", "message"} of an exception (StageFailure keeps its kind).
json ErrorJson(const std::exception& error, const std::string& default_kind = "stage_error");

/// True when a scored record (or beam member) may stand as a result - a beam
/// member, the best kernel, the report's winner: its `validation` is "full" or
/// "confirmed", or absent (baselines, fixer re-profiles). A "screened" record
/// (native:profile's screen_seeds, not confirmed) may not.
bool ValidatedForResult(const json& record);

/// A number, or nullopt for null/absent/non-numbers.
std::optional<double> Number(const json& object, const std::string& key);

/// `value` with `digits` significant figures, trailing zeros dropped, no exponent
/// between 1e-4 and 1e9 ("0.04692", "223.8", "1.5", "0"); exponent form outside.
std::string Significant(double value, int digits = 4);

/// "1.234" (fixed, `digits` decimals).
std::string Fixed(double value, int digits = 3);

}  // namespace accelopt_optimize
