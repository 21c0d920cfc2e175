// plugins/optimize/common.h - helpers shared by the optimization-loop stages
// (plan, execute, score, fixer, select, summarize, memory, optimize_init,
// optimize_report). docs/optimize.md describes the data they exchange.
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
#include "reply_parse.h"

namespace accelopt_optimize {

using nlohmann::json;
using accelopt::sdk::StageContext;
using accelopt::sdk::StageFailure;

// ---- files ------------------------------------------------------------------

/// Whole file as text. Throws StageFailure{io_error} when unreadable.
std::string ReadText(const std::filesystem::path& path);
/// Writes `text` (creating parent folders). Throws StageFailure{io_error}.
void WriteText(const std::filesystem::path& path, const std::string& text);
/// Writes `value` as indented JSON (creating parent folders). Throws StageFailure{io_error}.
void WriteJson(const std::filesystem::path& path, const json& value);
/// Appends one JSON line to `path` (thread-safe within the process).
void AppendJsonLine(const std::filesystem::path& path, const json& value);
/// Characters that are not [A-Za-z0-9._-] become '_' (for file names).
std::string SafeName(const std::string& text);

// ---- parameter shapes ---------------------------------------------------------

/// A list parameter that may also be given as null (empty) or as the producing
/// stage's outputs object holding the list under `key`. Anything else: empty.
json ListParam(const json& value, const std::string& key);

// ---- code --------------------------------------------------------------------

// Fenced blocks and titles of LLM replies: reply_parse.h.

/// Source normalized for duplicate detection: '#' comments (outside string
/// literals), docstring-only statements and all whitespace removed.
std::string NormalizeSource(const std::string& source);
/// 16 hex digits of FNV-1a 64 over `text`.
std::string HashHex(const std::string& text);

/// Adds the legacy NKI import header when `source` imports neither neuronxcc nor nki.
std::string WithImportHeader(const std::string& source);

/// The changed region of old -> new: common leading/trailing lines are dropped and
/// each side is cut to `max_lines` lines. {"before": text, "after": text}.
json ChangedRegion(const std::string& before, const std::string& after, int max_lines = 14);

// ---- prompts ----------------------------------------------------------------

/// Mustache templates from a prompts directory. `{{x}}` is NOT HTML-escaped.
/// Partials `{{> name}}` load `<dir>/<name>.mustache`.
class Prompts {
 public:
  /// `dir` must hold the templates. Throws StageFailure{config_error} if missing.
  explicit Prompts(std::filesystem::path dir);
  /// Renders `<dir>/<name>.mustache` with `data` (a JSON object). Throws
  /// StageFailure{prompt_error} for an unreadable or invalid template.
  std::string Render(const std::string& name, const json& data) const;
  /// `<dir>/<name>` parsed as JSON. Throws StageFailure{prompt_error}.
  json Data(const std::string& name) const;
  const std::filesystem::path& dir() const { return dir_; }

 private:
  std::filesystem::path dir_;
};

// ---- LLM --------------------------------------------------------------------

/// Token usage of a group of LLM calls. Tokens are counts, cost in USD.
struct Usage {
  int64_t requests = 0;
  int64_t failed = 0;
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  double cost_usd = 0.0;
  json ToJson() const;
  void Add(const Usage& other);
};

/// Thread-safe per-case usage accounting around ctx.LlmChat.
class LlmCaller {
 public:
  LlmCaller(const StageContext& ctx, std::string endpoint, const json& with);
  /// One chat call: system + user messages, optional per-call seed. Returns the
  /// host's response object (content, finish_reason, tokens, cost_usd, ...).
  /// Throws StageFailure with the llm_* kind; either way usage is recorded under
  /// `case_name`. Once the stage is cancelled (its timeout, Ctrl-C) no request
  /// is sent: StageFailure "cancelled".
  json Chat(const std::string& case_name, const std::string& system, const std::string& user,
            std::optional<int64_t> seed) const;
  /// {"total": Usage, "by_case": {case: Usage}}.
  json UsageJson() const;
  /// Appends this stage's usage to <run>/optimize/llm_usage.jsonl (keyed by stage dir).
  void Save(const StageContext& ctx, const std::string& stage) const;

 private:
  const StageContext& ctx_;
  std::string endpoint_;
  std::optional<double> temperature_;
  std::optional<int64_t> max_tokens_;
  mutable std::mutex mutex_;
  mutable std::map<std::string, Usage> by_case_;
};

/// Whether the `mode` parameter asks for the LLM ("llm") or the rules ("rules").
/// "auto" probes the endpoint. Returns true for LLM. Throws config_error otherwise.
bool UseLlm(const StageContext& ctx, const std::string& mode, const std::string& endpoint, std::string* why = nullptr);

// ---- misc -------------------------------------------------------------------

/// Runs fn(0..n-1) on up to `threads` threads; exceptions inside fn are the caller's job.
void ParallelFor(size_t n, int threads, const std::function<void(size_t)>& fn);

/// {"kind", "message"} of an exception (StageFailure keeps its kind).
json ErrorJson(const std::exception& error, const std::string& default_kind = "stage_error");

/// A number, or nullopt for null/absent/non-numbers.
std::optional<double> Number(const json& object, const std::string& key);

/// `value` with `digits` significant figures, trailing zeros dropped, no exponent
/// between 1e-4 and 1e9 ("0.04692", "223.8", "1.5", "0"); exponent form outside.
std::string Significant(double value, int digits = 4);

/// "1.234" (fixed, `digits` decimals).
std::string Fixed(double value, int digits = 3);

}  // namespace accelopt_optimize
