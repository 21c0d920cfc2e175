// plugins/optimize/llm_caller.h - LLM calls of the optimization stages with
// per-case usage accounting (docs/llm.md), and the llm/rules mode choice.
#pragma once

#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "accelopt/plugin_sdk.hpp"

namespace accelopt_optimize {

using nlohmann::json;
using accelopt::sdk::StageContext;

/// Token usage of a group of LLM calls. Tokens are counts, cost in USD.
struct Usage {
  int64_t requests = 0;
  int64_t failed = 0;
  int64_t not_sent = 0;  ///< refused by a spend cap (llm_spend_cap): never sent, not a failure
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
  /// `case_name`, which is also the request's `problem` for the per-problem spend caps
  /// (a request over a cap throws kind llm_spend_cap, unsent; docs/llm.md "Spend caps").
  /// Once the stage is cancelled (its timeout, Ctrl-C) no request is sent:
  /// StageFailure "cancelled".
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

/// The stage error kind of a request refused by an LLM spend cap (docs/llm.md, "Spend caps").
inline constexpr const char* kSpendCapKind = "llm_spend_cap";

/// True when `error` is a StageFailure of kind llm_spend_cap.
bool IsSpendCap(const std::exception& error);

/// case name -> the reason its LLM spend cap (or the run's) stops it, for the distinct
/// non-empty `key` fields of `items` (or of their `candidate` object: plans carry it there).
std::map<std::string, std::string> SpendStopped(const StageContext& ctx, const std::string& endpoint, const json& items,
                                                const std::string& key = "case_name");

/// {case: reason} of SpendStopped as JSON.
json StoppedJson(const std::map<std::string, std::string>& stopped);

/// Whether the `mode` parameter asks for the LLM ("llm") or the rules ("rules").
/// "auto" probes the endpoint. Returns true for LLM. Throws config_error otherwise.
bool UseLlm(const StageContext& ctx, const std::string& mode, const std::string& endpoint, std::string* why = nullptr);

}  // namespace accelopt_optimize
