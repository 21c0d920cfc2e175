// search_status.h - the live state of a search loop for the progress line:
// iteration, candidates evaluated of the (estimated) budget, best speedup so
// far and an ETA (docs/reports.md, "Search progress").
//
// A loop group of a pipeline is a search. Candidates evaluated are the
// for_each items finished inside its body (the optimize loop's profile
// items). The budget is exact for the iterations seen so far and
// extrapolated from the current one for the rest (marked "≈"), capped by
// the loop's declared `budget` when it has one (a budgeted graph search runs
// until its budget is used, in far fewer iterations than max_iterations;
// its rounds evaluate fewer candidates as problems finish), and by the
// carry's `budget_left` when the search reports it (the evaluations its
// problems may still make: the graph search's select and the agent's step
// count 0 for a problem that is done, so a problem that ran out of moves is
// not waited for). After a round that evaluated nothing, the line says so
// instead of an ETA from the time per candidate. The best
// speedup comes from the loop's carry `best` (case -> {latency_ms,
// baseline_latency_ms or speedup_vs_baseline}), as the optimize loop carries it.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace accelopt {

class SearchStatus {
 public:
  using Clock = std::chrono::steady_clock;

  /// A loop `id` with at most `max_iterations` iterations starts at `now`; `cap`: at most
  /// this many candidates in all (the loop's `budget:` key), nullopt when not declared.
  void Start(const std::string& id, int64_t max_iterations, Clock::time_point now,
             std::optional<int64_t> cap = std::nullopt);
  /// Iteration `iteration` (0-based) starts.
  void BeginIteration(int64_t iteration);
  /// A for_each stage of the body starts with `total` items.
  void ItemsPlanned(int64_t total);
  /// One item of such a stage finished; `reused`: taken from an earlier attempt of a resumed
  /// run (it counts as evaluated, but not in the time per candidate of the ETA).
  void ItemDone(bool reused = false);
  /// The loop's carry changed (its `best` gives the best speedup).
  void Carry(const nlohmann::json& carry);
  /// The current iteration finished.
  void EndIteration();

  const std::string& id() const { return id_; }
  int64_t evaluated() const { return evaluated_; }
  /// Candidates the whole loop is expected to evaluate; nullopt before any is planned.
  std::optional<int64_t> Budget() const;
  /// True when Budget() is exact (the last iteration's candidates are planned).
  bool BudgetExact() const;
  /// Best speedup over the baseline among the cases (max) and their geomean.
  std::optional<double> best_speedup() const { return best_; }
  std::optional<double> geomean_speedup() const { return geomean_; }
  /// Seconds left: time per candidate evaluated so far in this process (reused ones left
  /// out) times the candidates left; nullopt before one is evaluated.
  std::optional<double> EtaSeconds(Clock::time_point now) const;
  /// "optimize 2/16 · 17/≈1152 candidates · best 1.198x (geomean 1.164x) · ETA 12m30s".
  std::string Line(Clock::time_point now) const;

 private:
  std::string id_;
  int64_t max_iterations_ = 0;
  int64_t iteration_ = 0;
  int64_t evaluated_ = 0;
  int64_t reused_ = 0;                 // of evaluated_: reused from an earlier attempt (resume)
  int64_t done_before_iteration_ = 0;  // items of the finished iterations
  int64_t planned_this_iteration_ = 0;
  int64_t last_iteration_items_ = 0;   // items of the last finished iteration
  std::optional<double> best_, geomean_;
  std::optional<int64_t> cap_;         // the loop's declared budget
  std::optional<int64_t> left_;        // the carry's budget_left ...
  int64_t left_base_ = 0;              // ... counted from this many evaluated
  bool Stalled() const;                // the last round evaluated nothing and nothing is planned now
  std::optional<int64_t> Estimate() const;  // Budget() before budget_left
  Clock::time_point started_{};
};

/// {"best", "geomean"} speedups from a carry's `best` map; nullopt fields when none.
std::pair<std::optional<double>, std::optional<double>> BestSpeedups(const nlohmann::json& carry);

}  // namespace accelopt
