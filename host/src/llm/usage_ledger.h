// llm/usage_ledger.h - token usage and estimated cost per stage, model, endpoint and run.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include <nlohmann/json.hpp>

namespace accelopt::llm {

/// Aggregated usage of a group of requests. Tokens are counts, cost in USD.
struct UsageTotals {
  int64_t requests = 0;           ///< Successful requests (live or replayed).
  int64_t failed_requests = 0;    ///< Requests that ended in an LlmError.
  int64_t replayed_requests = 0;  ///< Of `requests`, how many were answered from a transcript.
  int64_t prompt_tokens = 0;      ///< Sum of usage.prompt_tokens.
  int64_t completion_tokens = 0;  ///< Sum of usage.completion_tokens.
  int64_t attempts = 0;           ///< HTTP attempts including retries (recorded values when replayed).
  int64_t latency_ms = 0;         ///< Sum of per-request latencies, ms.
  double cost_usd = 0.0;          ///< Estimated cost, USD.

  /// {"requests", "failed_requests", "replayed_requests", "prompt_tokens",
  ///  "completion_tokens", "total_tokens", "attempts", "latency_ms", "cost_usd"}.
  nlohmann::json ToJson() const;
};

/// Estimated cost in USD: prompt/1e6 * price_in + completion/1e6 * price_out
/// (prices in USD per million tokens).
double EstimateCostUsd(int64_t prompt_tokens, int64_t completion_tokens, double price_per_mtok_in,
                       double price_per_mtok_out);

/// Thread-safe accumulator of LLM usage for one run.
class UsageLedger {
 public:
  /// Records one successful request. Empty stage/model/endpoint names are grouped as "(none)".
  /// Returns the request's estimated cost in USD.
  double RecordSuccess(const std::string& stage, const std::string& model, const std::string& endpoint,
                       int64_t prompt_tokens, int64_t completion_tokens, double price_per_mtok_in,
                       double price_per_mtok_out, int attempts = 1, int64_t latency_ms = 0, bool replayed = false);

  /// Records one failed request (counted, no tokens or cost).
  void RecordFailure(const std::string& stage, const std::string& model, const std::string& endpoint, int attempts = 0);

  /// Totals over the whole run.
  UsageTotals Total() const;
  /// Totals of one stage (zeros when unknown).
  UsageTotals ForStage(const std::string& stage) const;
  /// Totals of one model (zeros when unknown).
  UsageTotals ForModel(const std::string& model) const;

  /// {"total": {...}, "by_stage": {name: {...}}, "by_model": {...}, "by_endpoint": {...}}
  /// with UsageTotals::ToJson objects.
  nlohmann::json Summary() const;

 private:
  static std::string Label(const std::string& name) { return name.empty() ? "(none)" : name; }

  mutable std::mutex mutex_;
  UsageTotals total_;
  std::map<std::string, UsageTotals> by_stage_;
  std::map<std::string, UsageTotals> by_model_;
  std::map<std::string, UsageTotals> by_endpoint_;
};

}  // namespace accelopt::llm
