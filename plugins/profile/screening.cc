// plugins/profile/screening.cc - see screening.h.
#include "screening.h"

#include <chrono>
#include <stdexcept>
#include <string>

using nlohmann::json;

namespace accelopt_profile {
namespace {

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

json Slice(const json& seeds, size_t from, size_t to) {
  json out = json::array();
  for (size_t i = from; i < to && i < seeds.size(); ++i) out.push_back(seeds[i]);
  return out;
}

bool Correct(const json& result) { return result.is_object() && result.value("correct", false); }

bool HasLatency(const json& result) { return result.contains("latency_ms") && result["latency_ms"].is_number(); }

json Timings(const json& result) { return result.is_object() ? result.value("timings", json::object()) : json::object(); }

std::string SeedList(const json& seeds) {
  std::string out = "[";
  for (size_t i = 0; i < seeds.size(); ++i) out += (i ? ", " : "") + seeds[i].dump();
  return out + "]";
}

}  // namespace

json ScreenThenConfirm(const json& request, const ScreenPlan& plan, const ProfileCall& call) {
  if (plan.screen_seeds < 0) throw std::invalid_argument("screen_seeds must be >= 0, got " + std::to_string(plan.screen_seeds));
  const json seeds = request.value("seeds", json());
  if (!seeds.is_array() || seeds.empty()) throw std::invalid_argument("the request's seeds must be a non-empty list");
  // screen_seeds 0 (or all of them) turns screening off; hidden_only changes what a screen runs.
  if (plan.screen_seeds == 0 || (!plan.hidden_only && static_cast<size_t>(plan.screen_seeds) >= seeds.size())) {
    json result = call(request);
    result["validation"] = "full";
    result["validated_seeds"] = Correct(result) ? seeds : json::array();
    return result;
  }

  const size_t screened = plan.hidden_only ? 0 : static_cast<size_t>(plan.screen_seeds);
  json screen_request = request;
  screen_request["seeds"] = Slice(seeds, 0, screened);
  if (plan.hidden_only) screen_request["hidden_only"] = true;
  auto start = std::chrono::steady_clock::now();
  json result = call(screen_request);
  result["validation"] = "screened";
  result["validated_seeds"] = Correct(result) ? screen_request["seeds"] : json::array();
  result["screen"] = {{"seeds", screen_request["seeds"]}, {"wall_s", Seconds(start)}, {"timings", Timings(result)}};
  // A screen without a latency (a timing error) has nothing to confirm; an untimed one is always confirmed.
  if (!Correct(result) || (request.value("timing", true) && !HasLatency(result))) return result;
  if (plan.confirm_below_ms && HasLatency(result) && !(result["latency_ms"].get<double>() < *plan.confirm_below_ms)) return result;

  json confirm_request = request;
  confirm_request["seeds"] = Slice(seeds, screened, seeds.size());
  confirm_request["timing"] = false;  // the latency is the screen's, from its hidden run
  confirm_request.erase("hidden_reuse");
  confirm_request.erase("hidden_only");  // a confirmation draws a fresh hidden set (docs/isolation.md, R1)
  start = std::chrono::steady_clock::now();
  const json confirm = call(confirm_request);
  const bool passed = Correct(confirm);
  json confirm_error = confirm.is_object() ? confirm.value("error", json()) : json();
  result["confirm"] = {{"seeds", confirm_request["seeds"]},
                       {"below_ms", plan.confirm_below_ms ? json(*plan.confirm_below_ms) : json()},
                       {"correct", passed},
                       {"wall_s", Seconds(start)},
                       {"rel_errors", confirm.is_object() ? confirm.value("rel_errors", json::array()) : json::array()},
                       {"error", confirm_error},
                       {"timings", Timings(confirm)}};
  if (!result["rel_errors"].is_array()) result["rel_errors"] = json::array();
  for (const auto& rel : result["confirm"]["rel_errors"]) result["rel_errors"].push_back(rel);
  if (passed) {
    result["validation"] = "confirmed";
    result["validated_seeds"] = seeds;
    return result;
  }
  // Refused: the candidate failed, with the confirm's error, like any failing candidate.
  if (!confirm_error.is_object()) confirm_error = {{"kind", "wrong_result"}, {"message", "not correct"}, {"traceback", ""}};
  confirm_error["message"] = "confirmation on seeds " + SeedList(confirm_request["seeds"]) +
                             " failed: " + confirm_error.value("message", std::string());
  result["error"] = confirm_error;
  result["correct"] = false;
  result["screened_latency_ms"] = result.value("latency_ms", json());
  result["latency_ms"] = nullptr;
  return result;
}

}  // namespace accelopt_profile
