#include "core/search_status.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace accelopt {
namespace {

std::string FormatEta(double seconds) {
  long total = std::lround(std::max(0.0, seconds));
  char buffer[32];
  if (total >= 3600) std::snprintf(buffer, sizeof(buffer), "%ldh%02ldm", total / 3600, (total % 3600) / 60);
  else std::snprintf(buffer, sizeof(buffer), "%ldm%02lds", total / 60, total % 60);
  return buffer;
}

std::optional<double> Number(const nlohmann::json& object, const char* key) {
  auto it = object.find(key);
  if (it == object.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

}  // namespace

std::pair<std::optional<double>, std::optional<double>> BestSpeedups(const nlohmann::json& carry) {
  if (!carry.is_object() || !carry.contains("best") || !carry["best"].is_object()) return {};
  double log_sum = 0, best = 0;
  int count = 0;
  for (const auto& [name, entry] : carry["best"].items()) {
    if (!entry.is_object()) continue;
    std::optional<double> speedup = Number(entry, "speedup_vs_baseline");
    auto latency = Number(entry, "latency_ms"), baseline = Number(entry, "baseline_latency_ms");
    if (latency && baseline && *latency > 0) speedup = *baseline / *latency;
    if (!speedup || !(*speedup > 0)) continue;
    best = std::max(best, *speedup);
    log_sum += std::log(*speedup);
    ++count;
  }
  if (count == 0) return {};
  return {best, std::exp(log_sum / count)};
}

void SearchStatus::Start(const std::string& id, int64_t max_iterations, Clock::time_point now,
                         std::optional<int64_t> cap) {
  *this = SearchStatus();
  id_ = id;
  cap_ = cap;
  max_iterations_ = max_iterations;
  started_ = now;
}

void SearchStatus::BeginIteration(int64_t iteration) {
  iteration_ = iteration;
  done_before_iteration_ = evaluated_;
  planned_this_iteration_ = 0;
}

void SearchStatus::ItemsPlanned(int64_t total) { planned_this_iteration_ += total; }

void SearchStatus::ItemDone(bool reused) {
  ++evaluated_;
  if (reused) ++reused_;
}

void SearchStatus::Carry(const nlohmann::json& carry) {
  if (carry.is_object() && carry.contains("budget_left") && carry["budget_left"].is_number()) {
    left_ = std::max<int64_t>(0, static_cast<int64_t>(carry["budget_left"].get<double>()));
    left_base_ = evaluated_;
  }
  auto [best, geomean] = BestSpeedups(carry);
  if (best) best_ = best;
  if (geomean) geomean_ = geomean;
}

void SearchStatus::EndIteration() { last_iteration_items_ = evaluated_ - done_before_iteration_; }

std::optional<int64_t> SearchStatus::Budget() const {
  std::optional<int64_t> estimate = Estimate();
  if (!left_) return estimate;
  const int64_t bound = left_base_ + *left_;  // what the search itself says it may still evaluate
  return std::max(evaluated_, estimate ? std::min(*estimate, bound) : bound);
}

std::optional<int64_t> SearchStatus::Estimate() const {
  int64_t per_iteration = planned_this_iteration_ > 0 ? planned_this_iteration_ : last_iteration_items_;
  // A round that evaluated nothing new (a graph search's transpositions only) says nothing about the
  // rounds to come: the average of the finished rounds does.
  if (per_iteration <= 0 && iteration_ > 0) {
    per_iteration = static_cast<int64_t>(std::ceil(static_cast<double>(done_before_iteration_) /
                                                   static_cast<double>(iteration_)));
  }
  if (per_iteration <= 0) return cap_ ? std::optional<int64_t>(std::max(evaluated_, *cap_))
                                      : (evaluated_ == 0 ? std::nullopt : std::optional<int64_t>(evaluated_));
  // The current iteration: its planned items, else (not planned yet) as many as the last one.
  const int64_t current = std::max(planned_this_iteration_ > 0 ? planned_this_iteration_ : per_iteration,
                                   evaluated_ - done_before_iteration_);
  const int64_t later = std::max<int64_t>(0, max_iterations_ - iteration_ - 1) * per_iteration;
  const int64_t estimate = done_before_iteration_ + current + later;
  // Never below what is already evaluated (a resumed run counts its reused items too).
  return cap_ ? std::max(evaluated_, std::min(estimate, *cap_)) : estimate;
}

bool SearchStatus::BudgetExact() const {
  return (iteration_ + 1 >= max_iterations_ && planned_this_iteration_ > 0) || (left_ && *left_ == 0);
}

bool SearchStatus::Stalled() const {
  return iteration_ > 0 && last_iteration_items_ == 0 && planned_this_iteration_ == 0 && evaluated_ == done_before_iteration_;
}

std::optional<double> SearchStatus::EtaSeconds(Clock::time_point now) const {
  auto budget = Budget();
  // A resumed run replays its finished candidates in no time: only fresh ones give the rate.
  const int64_t fresh = evaluated_ - reused_;
  // Rounds that evaluate nothing (a graph search's transpositions) take time the
  // time per candidate does not see: no ETA until candidates come again.
  if (!budget || fresh <= 0 || Stalled()) return std::nullopt;
  const double elapsed = std::chrono::duration<double>(now - started_).count();
  return elapsed / static_cast<double>(fresh) * static_cast<double>(std::max<int64_t>(0, *budget - evaluated_));
}

std::string SearchStatus::Line(Clock::time_point now) const {
  std::string line = id_ + " " + std::to_string(iteration_ + 1) + "/" + std::to_string(max_iterations_) + " · " +
                     std::to_string(evaluated_) + "/";
  auto budget = Budget();
  line += budget ? (BudgetExact() ? "" : "≈") + std::to_string(*budget) : std::string("?");
  line += " candidates";
  if (best_) {
    char buffer[64];
    std::snprintf(buffer, sizeof(buffer), " · best %.3fx", *best_);
    line += buffer;
    if (geomean_) {
      std::snprintf(buffer, sizeof(buffer), " (geomean %.3fx)", *geomean_);
      line += buffer;
    }
  }
  if (auto eta = EtaSeconds(now)) line += " · ETA " + FormatEta(*eta);
  else if (Stalled()) line += " · no new candidate in the last round";
  return line;
}

}  // namespace accelopt
