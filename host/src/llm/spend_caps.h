// llm/spend_caps.h - the account that enforces an LLM endpoint's spend caps
// (SpendCaps, endpoint_config.h) on the trusted host side (docs/llm.md, "Spend caps").
//
//   llm:
//     default:
//       caps:
//         problem: {requests: 500, tokens: 10000000, usd: 10}     # per problem (a request's "problem")
//         run:     {requests: 5000, tokens: 100000000, usd: 100}  # the whole run
//
// 0 or null = no cap. Every request of every stage goes through the
// endpoint's SpendCapChatClient: a request whose problem (or the run) has
// reached a cap is refused before it is sent, with LlmError{llm_spend_cap}
// naming the cap, its value and what was spent.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "llm/chat_client.h"
#include "llm/endpoint_config.h"

namespace accelopt::llm {

/// What was spent in one scope.
struct Spend {
  int64_t requests = 0;           ///< Requests sent (admitted), failed ones included.
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  double usd = 0.0;               ///< Estimated cost, USD.
  int64_t refused = 0;            ///< Requests refused by a cap (not sent).

  int64_t tokens() const { return prompt_tokens + completion_tokens; }
  /// {"requests", "prompt_tokens", "completion_tokens", "tokens", "usd", "refused"}.
  nlohmann::json ToJson() const;
};

/// The thread-safe spend account of one endpoint: per run and per problem, checked
/// against the endpoint's caps before each request.
///
/// The request cap is exact under concurrency (a request is counted when it is admitted);
/// the token and USD caps are checked against what finished requests used, so requests
/// already in flight when one of them is reached may pass it by their own usage.
class SpendAccount {
 public:
  /// @param endpoint the endpoint's name (for messages: "llm.<endpoint>.caps...").
  SpendAccount(std::string endpoint, SpendCaps caps);

  /// Admits one request of `problem` ("" = none: only the run's caps apply) and counts it,
  /// or throws LlmError{llm_spend_cap} when the run or the problem has reached a cap:
  /// "spend cap: 500 requests per problem reached (500 spent) for problem 'silu'; ...".
  void Admit(const std::string& problem);
  /// Takes back an admitted request that was not sent after all (a configuration error, a replay miss).
  void Release(const std::string& problem);
  /// Adds what an admitted request used once it finished.
  void Settle(const std::string& problem, int64_t prompt_tokens, int64_t completion_tokens, double usd);
  /// Counts a request made earlier (a resumed run's transcript): Admit without the check, then Settle.
  void Seed(const std::string& problem, int64_t prompt_tokens, int64_t completion_tokens, double usd);

  /// Why the next request of `problem` would be refused ("spend cap: 500 requests per problem
  /// reached (500 spent)"), or nullopt. The run's caps first.
  std::optional<std::string> Stopped(const std::string& problem) const;

  Spend RunSpend() const;
  Spend ProblemSpend(const std::string& problem) const;
  const SpendCaps& caps() const { return caps_; }
  const std::string& endpoint() const { return endpoint_; }

  /// {"endpoint", "caps": SpendCaps::ToJson(), "run": Spend + {"stopped": reason | null},
  ///  "problems": {name: Spend + {"stopped"}}} for `problems` (every problem seen when empty).
  nlohmann::json Status(const std::vector<std::string>& problems = {}) const;

  /// "12/2000 req · 14.4k/40M tok · $0.0123/$50" (no "/cap" for a scope without a cap),
  /// plus " · 1 problem at a cap" when some problem's cap is reached.
  std::string ProgressText() const;

 private:
  std::optional<std::string> RunReasonLocked() const;
  std::optional<std::string> ProblemReasonLocked(const std::string& problem) const;

  std::string endpoint_;
  SpendCaps caps_;
  mutable std::mutex mutex_;
  Spend run_;
  std::map<std::string, Spend> problems_;
};

/// Decorator enforcing a SpendAccount around an inner client: Admit before the request
/// (ChatRequest::problem), Settle with its tokens and cost (at the endpoint's prices) after.
/// A refused request throws LlmError{llm_spend_cap} and never reaches the inner client.
class SpendCapChatClient : public ChatClient {
 public:
  SpendCapChatClient(std::shared_ptr<SpendAccount> account, EndpointConfig endpoint, std::unique_ptr<ChatClient> inner);

  ChatResponse Complete(const ChatRequest& request) override;
  int MaxConcurrency() const override { return inner_->MaxConcurrency(); }
  const EndpointConfig* Endpoint() const override { return &endpoint_; }

 private:
  std::shared_ptr<SpendAccount> account_;
  EndpointConfig endpoint_;
  std::unique_ptr<ChatClient> inner_;
};

/// A count for the progress line: 950, 14.4k, 40M.
std::string CompactCount(double value);

}  // namespace accelopt::llm
