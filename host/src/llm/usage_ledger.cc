#include "llm/usage_ledger.h"

namespace accelopt::llm {

using nlohmann::json;

json UsageTotals::ToJson() const {
  return {{"requests", requests},
          {"failed_requests", failed_requests},
          {"replayed_requests", replayed_requests},
          {"prompt_tokens", prompt_tokens},
          {"completion_tokens", completion_tokens},
          {"total_tokens", prompt_tokens + completion_tokens},
          {"attempts", attempts},
          {"latency_ms", latency_ms},
          {"cost_usd", cost_usd}};
}

double EstimateCostUsd(int64_t prompt_tokens, int64_t completion_tokens, double price_per_mtok_in,
                       double price_per_mtok_out) {
  return static_cast<double>(prompt_tokens) / 1e6 * price_per_mtok_in +
         static_cast<double>(completion_tokens) / 1e6 * price_per_mtok_out;
}

double UsageLedger::RecordSuccess(const std::string& stage, const std::string& model, const std::string& endpoint,
                                  int64_t prompt_tokens, int64_t completion_tokens, double price_per_mtok_in,
                                  double price_per_mtok_out, int attempts, int64_t latency_ms, bool replayed) {
  const double cost = EstimateCostUsd(prompt_tokens, completion_tokens, price_per_mtok_in, price_per_mtok_out);
  std::lock_guard<std::mutex> lock(mutex_);
  for (UsageTotals* totals : {&total_, &by_stage_[Label(stage)], &by_model_[Label(model)], &by_endpoint_[Label(endpoint)]}) {
    totals->requests += 1;
    totals->replayed_requests += replayed ? 1 : 0;
    totals->prompt_tokens += prompt_tokens;
    totals->completion_tokens += completion_tokens;
    totals->attempts += attempts;
    totals->latency_ms += latency_ms;
    totals->cost_usd += cost;
  }
  return cost;
}

void UsageLedger::RecordFailure(const std::string& stage, const std::string& model, const std::string& endpoint,
                                int attempts) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (UsageTotals* totals : {&total_, &by_stage_[Label(stage)], &by_model_[Label(model)], &by_endpoint_[Label(endpoint)]}) {
    totals->failed_requests += 1;
    totals->attempts += attempts;
  }
}

UsageTotals UsageLedger::Total() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return total_;
}

UsageTotals UsageLedger::ForStage(const std::string& stage) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = by_stage_.find(Label(stage));
  return it == by_stage_.end() ? UsageTotals{} : it->second;
}

UsageTotals UsageLedger::ForModel(const std::string& model) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = by_model_.find(Label(model));
  return it == by_model_.end() ? UsageTotals{} : it->second;
}

json UsageLedger::Summary() const {
  std::lock_guard<std::mutex> lock(mutex_);
  json out = {{"total", total_.ToJson()},
              {"by_stage", json::object()},
              {"by_model", json::object()},
              {"by_endpoint", json::object()}};
  for (const auto& [name, totals] : by_stage_) out["by_stage"][name] = totals.ToJson();
  for (const auto& [name, totals] : by_model_) out["by_model"][name] = totals.ToJson();
  for (const auto& [name, totals] : by_endpoint_) out["by_endpoint"][name] = totals.ToJson();
  return out;
}

}  // namespace accelopt::llm
