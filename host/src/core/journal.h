// journal.h - the run's append-only event log (journal.jsonl).
//
// Line 1 is a version header {"journal": "accelopt", "version": 1}; every
// later line is one event object with a "ts" field. Each line is written
// with one write() and fsync'd, so after a crash (even SIGKILL) the journal
// holds every event that was reported, and at most a torn last line, which
// readers skip.
#pragma once

#include <filesystem>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace accelopt {

class Journal {
 public:
  static constexpr int kVersion = 1;
  static constexpr int kOldestSupportedVersion = 1;

  /// Opens (creating, or appending to) `path`. Throws std::runtime_error if
  /// the file cannot be opened or has an unsupported version header.
  explicit Journal(const std::filesystem::path& path);
  ~Journal();
  Journal(const Journal&) = delete;
  Journal& operator=(const Journal&) = delete;

  /// Appends one event (adds "ts") durably. Thread-safe.
  void Append(nlohmann::json event);

  /// Reads all complete events (without the header) of a journal file.
  /// Throws std::runtime_error for a missing file or unsupported version.
  static std::vector<nlohmann::json> Read(const std::filesystem::path& path);

 private:
  int fd_ = -1;
  std::mutex mutex_;
};

}  // namespace accelopt
