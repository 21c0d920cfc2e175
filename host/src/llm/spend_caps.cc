#include "llm/spend_caps.h"

#include <cmath>
#include <cstdio>

#include "llm/llm_error.h"
#include "llm/usage_ledger.h"

namespace accelopt::llm {

using nlohmann::json;

namespace {

// "5", "0.5", "12.3457": at most 4 decimals, trailing zeros dropped.
std::string Usd(double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "%.4f", value);
  std::string text = buffer;
  while (!text.empty() && text.back() == '0') text.pop_back();
  if (!text.empty() && text.back() == '.') text.pop_back();
  return text;
}

// The reason a scope is stopped, or nullopt: "spend cap: 500 requests per problem reached (500 spent)".
std::optional<std::string> Reached(const CapLimits& caps, const Spend& spend, const char* scope) {
  const std::string per = std::string(" per ") + scope + " reached";
  if (caps.requests > 0 && spend.requests >= caps.requests) {
    return "spend cap: " + std::to_string(caps.requests) + " requests" + per + " (" + std::to_string(spend.requests) + " spent)";
  }
  if (caps.tokens > 0 && spend.tokens() >= caps.tokens) {
    return "spend cap: " + std::to_string(caps.tokens) + " tokens" + per + " (" + std::to_string(spend.tokens()) + " spent)";
  }
  if (caps.usd > 0 && spend.usd >= caps.usd) {
    return "spend cap: " + Usd(caps.usd) + " USD" + per + " (" + Usd(spend.usd) + " USD spent)";
  }
  return std::nullopt;
}

// The config key of the cap a reason names, for the "raise it with --set" hint.
std::string CapKey(const std::string& reason, const char* scope) {
  const char* what = reason.find(" requests per ") != std::string::npos ? "requests"
                     : reason.find(" tokens per ") != std::string::npos ? "tokens"
                                                                        : "usd";
  return std::string(scope) + "." + what;
}

json WithStopped(const Spend& spend, const std::optional<std::string>& reason) {
  json out = spend.ToJson();
  out["stopped"] = reason ? json(*reason) : json(nullptr);
  return out;
}

// "12/2000" with a cap, "12" without.
std::string Part(bool capped, const std::string& spent, const std::string& cap) { return capped ? spent + "/" + cap : spent; }

}  // namespace

std::string CompactCount(double value) {
  char buffer[32];
  const double magnitude = std::fabs(value);
  if (magnitude >= 1e9) std::snprintf(buffer, sizeof(buffer), "%.3gG", value / 1e9);
  else if (magnitude >= 1e6) std::snprintf(buffer, sizeof(buffer), "%.3gM", value / 1e6);
  else if (magnitude >= 1e4) std::snprintf(buffer, sizeof(buffer), "%.3gk", value / 1e3);
  else std::snprintf(buffer, sizeof(buffer), "%.0f", value);
  return buffer;
}

json Spend::ToJson() const {
  return {{"requests", requests},        {"prompt_tokens", prompt_tokens}, {"completion_tokens", completion_tokens},
          {"tokens", tokens()},          {"usd", usd},                     {"refused", refused}};
}

SpendAccount::SpendAccount(std::string endpoint, SpendCaps caps) : endpoint_(std::move(endpoint)), caps_(caps) {}

std::optional<std::string> SpendAccount::RunReasonLocked() const { return Reached(caps_.run, run_, "run"); }

std::optional<std::string> SpendAccount::ProblemReasonLocked(const std::string& problem) const {
  if (problem.empty()) return std::nullopt;
  auto it = problems_.find(problem);
  return Reached(caps_.problem, it == problems_.end() ? Spend{} : it->second, "problem");
}

void SpendAccount::Admit(const std::string& problem) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string message;
  if (auto reason = RunReasonLocked()) {
    message = *reason + (problem.empty() ? std::string() : " (request of problem '" + problem + "')") +
              "; the request was not sent. Raise it with --set llm." + endpoint_ + ".caps." + CapKey(*reason, "run") +
              "=N (0 = no cap; docs/llm.md, \"Spend caps\")";
  } else if (auto reason = ProblemReasonLocked(problem)) {
    message = *reason + " for problem '" + problem + "'; the request was not sent. Raise it with --set llm." + endpoint_ +
              ".caps." + CapKey(*reason, "problem") + "=N (0 = no cap; docs/llm.md, \"Spend caps\")";
  }
  if (!message.empty()) {
    run_.refused += 1;
    if (!problem.empty()) problems_[problem].refused += 1;
    throw LlmError(ErrorKind::kSpendCap, 0, message);
  }
  run_.requests += 1;
  if (!problem.empty()) problems_[problem].requests += 1;
}

void SpendAccount::Release(const std::string& problem) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (run_.requests > 0) run_.requests -= 1;
  if (!problem.empty() && problems_[problem].requests > 0) problems_[problem].requests -= 1;
}

void SpendAccount::Settle(const std::string& problem, int64_t prompt_tokens, int64_t completion_tokens, double usd) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (Spend* spend : {&run_, problem.empty() ? nullptr : &problems_[problem]}) {
    if (!spend) continue;
    spend->prompt_tokens += prompt_tokens;
    spend->completion_tokens += completion_tokens;
    spend->usd += usd;
  }
}

void SpendAccount::Seed(const std::string& problem, int64_t prompt_tokens, int64_t completion_tokens, double usd) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    run_.requests += 1;
    if (!problem.empty()) problems_[problem].requests += 1;
  }
  Settle(problem, prompt_tokens, completion_tokens, usd);
}

std::optional<std::string> SpendAccount::Stopped(const std::string& problem) const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto reason = RunReasonLocked()) return reason;
  return ProblemReasonLocked(problem);
}

Spend SpendAccount::RunSpend() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return run_;
}

Spend SpendAccount::ProblemSpend(const std::string& problem) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = problems_.find(problem);
  return it == problems_.end() ? Spend{} : it->second;
}

json SpendAccount::Status(const std::vector<std::string>& problems) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto run_reason = RunReasonLocked();
  json out = {{"endpoint", endpoint_}, {"caps", caps_.ToJson()}, {"run", WithStopped(run_, run_reason)}, {"problems", json::object()}};
  auto add = [&](const std::string& name) {
    if (name.empty()) return;
    auto it = problems_.find(name);
    const Spend spend = it == problems_.end() ? Spend{} : it->second;
    auto reason = run_reason ? run_reason : ProblemReasonLocked(name);
    out["problems"][name] = WithStopped(spend, reason);
  };
  if (problems.empty()) {
    for (const auto& [name, spend] : problems_) add(name);
  } else {
    for (const auto& name : problems) add(name);
  }
  return out;
}

std::string SpendAccount::ProgressText() const {
  std::lock_guard<std::mutex> lock(mutex_);
  const CapLimits& cap = caps_.run;
  std::string text = Part(cap.requests > 0, std::to_string(run_.requests), std::to_string(cap.requests)) + " req · " +
                     Part(cap.tokens > 0, CompactCount(static_cast<double>(run_.tokens())),
                          CompactCount(static_cast<double>(cap.tokens))) +
                     " tok · " + Part(cap.usd > 0, "$" + Usd(run_.usd), "$" + Usd(cap.usd));
  if (RunReasonLocked()) return text + " · run cap reached";
  int capped = 0;
  for (const auto& [name, spend] : problems_) {
    if (Reached(caps_.problem, spend, "problem")) ++capped;
  }
  if (capped > 0) text += " · " + std::to_string(capped) + (capped == 1 ? " problem" : " problems") + " at a cap";
  return text;
}

SpendCapChatClient::SpendCapChatClient(std::shared_ptr<SpendAccount> account, EndpointConfig endpoint,
                                       std::unique_ptr<ChatClient> inner)
    : account_(std::move(account)), endpoint_(std::move(endpoint)), inner_(std::move(inner)) {}

ChatResponse SpendCapChatClient::Complete(const ChatRequest& request) {
  account_->Admit(request.problem);  // throws llm_spend_cap: nothing is sent
  try {
    ChatResponse response = inner_->Complete(request);
    account_->Settle(request.problem, response.prompt_tokens, response.completion_tokens,
                     EstimateCostUsd(response.prompt_tokens, response.completion_tokens, endpoint_.price_per_mtok_in,
                                     endpoint_.price_per_mtok_out));
    return response;
  } catch (const LlmError& error) {
    // Nothing was sent for a configuration error or a replay miss: the request is not spent.
    if (error.kind == ErrorKind::kConfig || error.kind == ErrorKind::kReplayMiss) account_->Release(request.problem);
    throw;
  }
}

}  // namespace accelopt::llm
