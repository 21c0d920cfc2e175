// progress.h - what the user sees while a pipeline runs.
//
// On a TTY: one live line on stderr ("[profile] 3/14  silu  00:12"),
// redrawn in place. Otherwise: plain spdlog lines, one per event. Inside a
// loop group (a search), the line starts with the search's state: iteration,
// candidates evaluated of the budget, best speedup so far and an ETA
// (core/search_status.h); without a TTY that state is logged once per iteration.
// A status source (SetStatusSource: the LLM spend against its caps, docs/llm.md
// "Spend caps") is appended to the search state.
#pragma once

#include <chrono>
#include <functional>
#include <mutex>
#include <string>

#include <nlohmann/json.hpp>

#include "core/search_status.h"

namespace accelopt {

class Progress {
 public:
  /// `live` = draw a live line (stderr is a TTY and not disabled).
  explicit Progress(bool live);
  ~Progress();

  void StageStarted(const std::string& stage_id, int64_t total_items);
  void Item(const std::string& stage_id, int64_t done, int64_t total, const std::string& label);
  void StageFinished(const std::string& stage_id, const std::string& status, double seconds);
  /// Clears the live line before other output; safe to call any time.
  void Clear();
  /// Text shown with the search state (live line and per-iteration log), e.g. the LLM spend
  /// "LLM 12/2000 req · 14.4k/40M tok · $0.01/$50"; "" shows nothing. Called under the
  /// progress lock: it must not call back into Progress.
  void SetStatusSource(std::function<std::string()> source);

  /// A loop group `loop_id` starts (a nested loop counts toward the outer one); `budget`:
  /// the loop's declared cap on candidates (its `budget:` key), if any.
  void SearchStarted(const std::string& loop_id, int64_t max_iterations,
                     std::optional<int64_t> budget = std::nullopt);
  /// Its iteration `iteration` (0-based) starts / finished.
  void SearchIteration(int64_t iteration);
  void SearchIterationFinished();
  /// A for_each inside the loop starts with `total` items / finishes one item (a candidate evaluated).
  void SearchItemsPlanned(int64_t total);
  /// `reused`: the item's outputs came from an earlier attempt (resume).
  void SearchItemDone(bool reused = false);
  /// The loop's carry changed (its `best` map gives the best speedup so far).
  void SearchCarry(const nlohmann::json& carry);
  /// The loop group ended.
  void SearchFinished();

 private:
  void Draw(const std::string& line);
  std::string WithSearch(const std::string& text) const;  // "[search state] text" while a search runs
  std::string SearchLine() const;                         // the search state + the status source's text
  std::function<std::string()> status_source_;
  bool live_;
  int search_depth_ = 0;
  SearchStatus search_;
  std::mutex mutex_;
  std::chrono::steady_clock::time_point start_;
  bool line_shown_ = false;
};

}  // namespace accelopt
