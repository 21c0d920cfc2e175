#include "core/progress.h"

#include <cstdio>

#include <spdlog/spdlog.h>

namespace accelopt {
namespace {

std::string Elapsed(std::chrono::steady_clock::time_point start) {
  auto seconds = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - start).count();
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%02lld:%02lld", static_cast<long long>(seconds / 60),
                static_cast<long long>(seconds % 60));
  return buffer;
}

}  // namespace

Progress::Progress(bool live) : live_(live), start_(std::chrono::steady_clock::now()) {}

Progress::~Progress() { Clear(); }

void Progress::Draw(const std::string& line) {
  std::fprintf(stderr, "\r\033[K%s", line.c_str());
  std::fflush(stderr);
  line_shown_ = true;
}

void Progress::Clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (live_ && line_shown_) {
    std::fprintf(stderr, "\r\033[K");
    std::fflush(stderr);
    line_shown_ = false;
  }
}

void Progress::SetStatusSource(std::function<std::string()> source) {
  std::lock_guard<std::mutex> lock(mutex_);
  status_source_ = std::move(source);
}

std::string Progress::SearchLine() const {
  std::string line = search_.Line(std::chrono::steady_clock::now());
  if (status_source_) {
    std::string status;
    try {
      status = status_source_();
    } catch (const std::exception&) {
    }
    if (!status.empty()) line += " · " + status;
  }
  return line;
}

std::string Progress::WithSearch(const std::string& text) const {
  if (search_depth_ == 0) return text;
  return "[" + SearchLine() + "] " + text;
}

void Progress::StageStarted(const std::string& stage_id, int64_t total_items) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string items = total_items > 0 ? " (" + std::to_string(total_items) + " items)" : "";
  if (live_) Draw(WithSearch("[" + stage_id + "] running" + items + "  " + Elapsed(start_)));
  else spdlog::info("stage {} started{}", stage_id, items);
}

void Progress::Item(const std::string& stage_id, int64_t done, int64_t total, const std::string& label) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string text = "[" + stage_id + "] " + std::to_string(done) + "/" + std::to_string(total) + (label.empty() ? "" : "  " + label);
  if (live_) Draw(WithSearch(text + "  " + Elapsed(start_)));
  else spdlog::info("{}", text);
}

void Progress::StageFinished(const std::string& stage_id, const std::string& status, double seconds) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (live_ && line_shown_) {
    std::fprintf(stderr, "\r\033[K");
    line_shown_ = false;
  }
  spdlog::info("stage {} {} in {:.2f}s", stage_id, status, seconds);
}

void Progress::SearchStarted(const std::string& loop_id, int64_t max_iterations, std::optional<int64_t> budget) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (search_depth_++ == 0) search_.Start(loop_id, max_iterations, std::chrono::steady_clock::now(), budget);
}

void Progress::SearchIteration(int64_t iteration) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (search_depth_ == 1) search_.BeginIteration(iteration);
}

void Progress::SearchIterationFinished() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (search_depth_ != 1) return;
  search_.EndIteration();
  if (live_ && line_shown_) {
    std::fprintf(stderr, "\r\033[K");
    line_shown_ = false;
  }
  spdlog::info("search {}", SearchLine());
}

void Progress::SearchItemsPlanned(int64_t total) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (search_depth_ > 0) search_.ItemsPlanned(total);
}

void Progress::SearchItemDone(bool reused) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (search_depth_ > 0) search_.ItemDone(reused);
}

void Progress::SearchCarry(const nlohmann::json& carry) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (search_depth_ == 1) search_.Carry(carry);
}

void Progress::SearchFinished() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (search_depth_ > 0) --search_depth_;
}

}  // namespace accelopt
