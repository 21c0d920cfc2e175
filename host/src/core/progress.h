// progress.h - what the user sees while a pipeline runs.
//
// On a TTY: one live line on stderr ("[profile] 3/14  silu  00:12"),
// redrawn in place. Otherwise: plain spdlog lines, one per event.
#pragma once

#include <chrono>
#include <mutex>
#include <string>

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

 private:
  void Draw(const std::string& line);
  bool live_;
  std::mutex mutex_;
  std::chrono::steady_clock::time_point start_;
  bool line_shown_ = false;
};

}  // namespace accelopt
