// plugins/optimize/common.h - what every optimization-loop stage (plan,
// execute, score, fixer, select, summarize, memory, optimize_init,
// optimize_results) includes: the helpers' headers (files, source text, reply
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
#include "accelopt/sdk/llm.hpp"
#include "llm_mode.h"
#include "accelopt/sdk/prompts.hpp"
#include "reply_parse.h"
#include "source_text.h"
#include "stage_files.h"

namespace accelopt_optimize {

using nlohmann::json;
using accelopt::sdk::StageContext;
using accelopt::sdk::StageFailure;
// The LLM caller, its usage and the spend caps' stop list (accelopt/sdk/llm.hpp).
using accelopt::sdk::IsSpendCap;
using accelopt::sdk::kSpendCapKind;
using accelopt::sdk::LlmCaller;
using accelopt::sdk::SpendStopped;
using accelopt::sdk::StoppedJson;
using accelopt::sdk::Usage;
/// accelopt/sdk/prompts.hpp: the mustache templates of a prompts folder.
using accelopt::sdk::Prompts;

// ---- parameter shapes ---------------------------------------------------------

/// accelopt/sdk/params.hpp: a list, null, or the producing stage's outputs holding it under `key`.
using accelopt::sdk::ListParam;

// ---- misc -------------------------------------------------------------------

// From the plugin SDK (accelopt/sdk/parallel.hpp, numbers.hpp): fn(0..n-1) on up to
// `threads` threads; a number field or nullopt; "1.234".
using accelopt::sdk::Fixed;
using accelopt::sdk::Number;
using accelopt::sdk::ParallelFor;

/// {"kind", "message"} of an exception (StageFailure keeps its kind).
json ErrorJson(const std::exception& error, const std::string& default_kind = "stage_error");

/// accelopt/sdk/records.hpp: false for a "screened" record (not confirmed on every seed).
using accelopt::sdk::ValidatedForResult;

/// accelopt/sdk/numbers.hpp: significant figures for prompts and reports.
using accelopt::sdk::Significant;

}  // namespace accelopt_optimize
