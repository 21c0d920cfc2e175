// accelopt/sdk/llm.hpp - LLM calls of a stage (docs/llm.md): one chat request
// through the host (ctx.LlmChat) with the stage's sampling settings, the
// problem it is for (per-problem spend caps), per-problem usage accounting,
// and which problems a spend cap has stopped. Every plugin that asks a model
// (the NKI loop's planner, executor, fixer, reflector, summarizer and the
// FlashInfer-Bench loop's) goes through this one caller.
#pragma once

#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "accelopt/plugin_sdk.hpp"

namespace accelopt::sdk {

/// The stage error kind of a request refused by an LLM spend cap (docs/llm.md, "Spend caps").
inline constexpr const char* kSpendCapKind = "llm_spend_cap";

/// True when `error` is a StageFailure of kind llm_spend_cap.
inline bool IsSpendCap(const std::exception& error) {
  const auto* failure = dynamic_cast<const StageFailure*>(&error);
  return failure != nullptr && failure->kind == kSpendCapKind;
}

/// Token usage of a group of LLM calls. Tokens are counts, cost in USD.
struct Usage {
  int64_t requests = 0;
  int64_t failed = 0;
  int64_t not_sent = 0;  ///< refused by a spend cap (llm_spend_cap): never sent, not a failure
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  double cost_usd = 0.0;
  nlohmann::json ToJson() const {
    return {{"requests", requests}, {"failed", failed}, {"not_sent", not_sent}, {"prompt_tokens", prompt_tokens},
            {"completion_tokens", completion_tokens}, {"total_tokens", prompt_tokens + completion_tokens}, {"cost_usd", cost_usd}};
  }
  void Add(const Usage& other) {
    requests += other.requests;
    failed += other.failed;
    not_sent += other.not_sent;
    prompt_tokens += other.prompt_tokens;
    completion_tokens += other.completion_tokens;
    cost_usd += other.cost_usd;
  }
};

/// Thread-safe per-problem usage accounting around ctx.LlmChat. `with` is the stage's
/// parameters: `temperature` and `max_tokens` (> 0) are sent when present.
class LlmCaller {
 public:
  LlmCaller(const StageContext& ctx, std::string endpoint, const nlohmann::json& with) : ctx_(ctx), endpoint_(std::move(endpoint)) {
    if (with.contains("temperature") && with["temperature"].is_number()) temperature_ = with["temperature"].get<double>();
    if (with.contains("max_tokens") && with["max_tokens"].is_number_integer() && with["max_tokens"].get<int64_t>() > 0)
      max_tokens_ = with["max_tokens"].get<int64_t>();
  }

  /// One chat call: system + user messages, optional per-call seed. Returns the host's
  /// response object (content, finish_reason, prompt_tokens, completion_tokens, cost_usd, ...).
  /// Throws StageFailure with the llm_* kind; either way usage is recorded under `problem`,
  /// which is also the request's `problem` for the per-problem spend caps (a request over a
  /// cap throws kind llm_spend_cap, unsent; docs/llm.md "Spend caps"). Once the stage is
  /// cancelled (its timeout, Ctrl-C) no request is sent: StageFailure "cancelled".
  nlohmann::json Chat(const std::string& problem, const std::string& system, const std::string& user,
                      std::optional<int64_t> seed) const {
    nlohmann::json request = {
        {"endpoint", endpoint_},
        {"messages", nlohmann::json::array({{{"role", "system"}, {"content", system}}, {{"role", "user"}, {"content", user}}})}};
    if (temperature_) request["temperature"] = *temperature_;
    if (max_tokens_) request["max_tokens"] = *max_tokens_;
    if (seed) request["seed"] = *seed;
    if (!problem.empty()) request["problem"] = problem;
    // A stage past its timeout (or a Ctrl-C'd run) may still have queued calls: they are
    // not sent, so an abandoned stage spends no more tokens.
    if (ctx_.Cancelled()) throw StageFailure("cancelled", "the stage was cancelled (timeout or interrupt); request not sent");
    Usage usage;
    try {
      nlohmann::json response = ctx_.LlmChat(request);
      usage.requests = 1;
      usage.prompt_tokens = response.value("prompt_tokens", int64_t{0});
      usage.completion_tokens = response.value("completion_tokens", int64_t{0});
      usage.cost_usd = response.value("cost_usd", 0.0);
      std::lock_guard<std::mutex> lock(mutex_);
      by_problem_[problem].Add(usage);
      return response;
    } catch (const std::exception& error) {
      (IsSpendCap(error) ? usage.not_sent : usage.failed) = 1;
      std::lock_guard<std::mutex> lock(mutex_);
      by_problem_[problem].Add(usage);
      throw;
    }
  }

  /// {"total": Usage, "by_case": {problem: Usage}}.
  nlohmann::json UsageJson() const {
    std::lock_guard<std::mutex> lock(mutex_);
    Usage total;
    nlohmann::json by_case = nlohmann::json::object();
    for (const auto& [name, usage] : by_problem_) {
      total.Add(usage);
      by_case[name] = usage.ToJson();
    }
    return {{"total", total.ToJson()}, {"by_case", by_case}};
  }

  /// Appends this stage's usage to <run>/optimize/llm_usage.jsonl (keyed by the stage dir);
  /// nothing when no request was made.
  void Save(const StageContext& ctx, const std::string& stage) const {
    nlohmann::json usage = UsageJson();
    const nlohmann::json& total = usage["total"];
    if (total["requests"] == 0 && total["failed"] == 0 && total["not_sent"] == 0) return;
    static std::mutex append_mutex;
    std::lock_guard<std::mutex> lock(append_mutex);
    AppendFile(std::filesystem::path(ctx.RunDir()) / "optimize" / "llm_usage.jsonl",
               nlohmann::json({{"key", ctx.StageDir()}, {"stage", stage}, {"usage", usage}})
                       .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) +
                   "\n");
  }

 private:
  const StageContext& ctx_;
  std::string endpoint_;
  std::optional<double> temperature_;
  std::optional<int64_t> max_tokens_;
  mutable std::mutex mutex_;
  mutable std::map<std::string, Usage> by_problem_;
};

/// problem -> the reason its LLM spend cap (or the run's) stops it, for the distinct non-empty
/// `key` fields of `items` (or of their `candidate` object: plans carry it there).
inline std::map<std::string, std::string> SpendStopped(const StageContext& ctx, const std::string& endpoint, const nlohmann::json& items,
                                                const std::string& key = "case_name") {
  std::set<std::string> cases;
  for (const auto& item : items) {
    if (!item.is_object()) continue;
    const nlohmann::json& holder = item.contains(key) ? item : item.value("candidate", nlohmann::json::object());
    const nlohmann::json name = holder.value(key, nlohmann::json());
    if (name.is_string() && !name.get<std::string>().empty()) cases.insert(name.get<std::string>());
  }
  return ctx.LlmStopped(endpoint, std::vector<std::string>(cases.begin(), cases.end()));
}

/// {problem: reason} of SpendStopped as JSON.
inline nlohmann::json StoppedJson(const std::map<std::string, std::string>& stopped) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [name, reason] : stopped) out[name] = reason;
  return out;
}

}  // namespace accelopt::sdk
