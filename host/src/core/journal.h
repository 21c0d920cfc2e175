// journal.h - the run's append-only event log (journal.jsonl).
//
// Line 1 is a version header {"journal": "accelopt", "version": 1}; every
// later line is one event object with a "ts" field. Each line is written
// with one write() and fsync'd, so after a crash (even SIGKILL) the journal
// holds every event that was reported, and at most a torn last line, which
// readers skip.
//
// Events of the executor: run_started / run_resumed, stage_finished {stage,
// dir, status, reused, outputs_sha256?}, item_finished {stage, item, dir,
// status, reused, outputs_sha256?}, run_finished. `outputs_sha256` is the
// SHA-256 of the outputs.json written (or verified) for that stage or item;
// `run --resume` reuses an outputs.json only if it still has that hash.
#pragma once

#include <filesystem>
#include <map>
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

  /// The journal file.
  const std::filesystem::path& path() const { return path_; }

  /// The latest "outputs_sha256" journaled for each "dir" (relative to the
  /// run directory) among `events`, e.g. {"stages/01-fan/item-0002": "ab12..."}.
  static std::map<std::string, std::string> OutputHashes(const std::vector<nlohmann::json>& events);

  /// Reads all complete events (without the header) of a journal file.
  /// Throws std::runtime_error for a missing file or unsupported version.
  static std::vector<nlohmann::json> Read(const std::filesystem::path& path);

 private:
  std::filesystem::path path_;
  int fd_ = -1;
  std::mutex mutex_;
};

}  // namespace accelopt
