#include "llm_caller.h"

#include <set>

#include "common.h"

namespace fs = std::filesystem;

namespace accelopt_optimize {

json Usage::ToJson() const {
  return {{"requests", requests}, {"failed", failed}, {"not_sent", not_sent}, {"prompt_tokens", prompt_tokens},
          {"completion_tokens", completion_tokens}, {"total_tokens", prompt_tokens + completion_tokens}, {"cost_usd", cost_usd}};
}

void Usage::Add(const Usage& other) {
  requests += other.requests;
  failed += other.failed;
  not_sent += other.not_sent;
  prompt_tokens += other.prompt_tokens;
  completion_tokens += other.completion_tokens;
  cost_usd += other.cost_usd;
}

LlmCaller::LlmCaller(const StageContext& ctx, std::string endpoint, const json& with) : ctx_(ctx), endpoint_(std::move(endpoint)) {
  if (with.contains("temperature") && with["temperature"].is_number()) temperature_ = with["temperature"].get<double>();
  if (with.contains("max_tokens") && with["max_tokens"].is_number_integer() && with["max_tokens"].get<int64_t>() > 0) {
    max_tokens_ = with["max_tokens"].get<int64_t>();
  }
}

json LlmCaller::Chat(const std::string& case_name, const std::string& system, const std::string& user,
                     std::optional<int64_t> seed) const {
  json request = {{"endpoint", endpoint_},
                  {"messages", json::array({{{"role", "system"}, {"content", system}}, {{"role", "user"}, {"content", user}}})}};
  if (temperature_) request["temperature"] = *temperature_;
  if (max_tokens_) request["max_tokens"] = *max_tokens_;
  if (seed) request["seed"] = *seed;
  if (!case_name.empty()) request["problem"] = case_name;  // the per-problem spend caps
  // A stage past its timeout (or a Ctrl-C'd run) may still have queued calls:
  // they are not sent, so an abandoned stage spends no more tokens.
  if (ctx_.Cancelled()) throw StageFailure("cancelled", "the stage was cancelled (timeout or interrupt); request not sent");
  Usage usage;
  try {
    json response = ctx_.LlmChat(request);
    usage.requests = 1;
    usage.prompt_tokens = response.value("prompt_tokens", int64_t{0});
    usage.completion_tokens = response.value("completion_tokens", int64_t{0});
    usage.cost_usd = response.value("cost_usd", 0.0);
    std::lock_guard<std::mutex> lock(mutex_);
    by_case_[case_name].Add(usage);
    return response;
  } catch (const std::exception& error) {
    (IsSpendCap(error) ? usage.not_sent : usage.failed) = 1;
    std::lock_guard<std::mutex> lock(mutex_);
    by_case_[case_name].Add(usage);
    throw;
  }
}

bool IsSpendCap(const std::exception& error) {
  const auto* failure = dynamic_cast<const StageFailure*>(&error);
  return failure != nullptr && failure->kind == kSpendCapKind;
}

std::map<std::string, std::string> SpendStopped(const StageContext& ctx, const std::string& endpoint, const json& items,
                                                const std::string& key) {
  std::set<std::string> cases;
  for (const auto& item : items) {
    if (!item.is_object()) continue;
    const json& holder = item.contains(key) ? item : item.value("candidate", json::object());
    const json name = holder.value(key, json());
    if (name.is_string() && !name.get<std::string>().empty()) cases.insert(name.get<std::string>());
  }
  return ctx.LlmStopped(endpoint, std::vector<std::string>(cases.begin(), cases.end()));
}

json StoppedJson(const std::map<std::string, std::string>& stopped) {
  json out = json::object();
  for (const auto& [name, reason] : stopped) out[name] = reason;
  return out;
}

json LlmCaller::UsageJson() const {
  std::lock_guard<std::mutex> lock(mutex_);
  Usage total;
  json by_case = json::object();
  for (const auto& [name, usage] : by_case_) {
    total.Add(usage);
    by_case[name] = usage.ToJson();
  }
  return {{"total", total.ToJson()}, {"by_case", by_case}};
}

void LlmCaller::Save(const StageContext& ctx, const std::string& stage) const {
  json usage = UsageJson();
  if (usage["total"]["requests"].get<int64_t>() == 0 && usage["total"]["failed"].get<int64_t>() == 0 &&
      usage["total"]["not_sent"].get<int64_t>() == 0) {
    return;
  }
  AppendJsonLine(fs::path(ctx.RunDir()) / "optimize" / "llm_usage.jsonl",
                 {{"key", ctx.StageDir()}, {"stage", stage}, {"usage", usage}});
}

bool UseLlm(const StageContext& ctx, const std::string& mode, const std::string& endpoint, std::string* why) {
  if (mode == "rules") return false;
  if (mode != "llm" && mode != "auto") {
    throw StageFailure("config_error", "mode must be auto, llm or rules, got '" + mode + "'");
  }
  json described;
  try {
    described = ctx.LlmChat({{"describe", true}, {"endpoint", endpoint}});
  } catch (const StageFailure& failure) {
    described = {{"available", false}, {"reason", failure.what()}};
  }
  bool available = described.value("available", false);
  if (why) *why = available ? "LLM endpoint '" + endpoint + "' (model " + described.value("model", "?") + ")" : described.value("reason", "no LLM");
  if (!available && mode == "llm") {
    throw StageFailure("llm_config", "mode llm: " + described.value("reason", std::string("no LLM endpoint")));
  }
  return available;
}

}  // namespace accelopt_optimize
