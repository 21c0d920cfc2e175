// protocol.h - framing over pipes between the host and workers.
//
// A frame is one JSON line (the header) followed by zero or more binary
// attachments ("blobs": raw array bytes) whose byte sizes the header lists
// under "blobs". Arrays thus cross the pipe once, unencoded; only small
// metadata is JSON.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace accelopt::worker {

/// Writes `line` plus '\n' completely (retrying on EINTR and short writes).
/// Returns false on any other error (EPIPE: the reader is gone).
bool WriteLine(int fd, const std::string& line);

/// Writes `header` with "blobs": [byte sizes] set (only when `blobs` is not
/// empty) as one line, then each blob's bytes. Returns false like WriteLine.
bool WriteFrame(int fd, nlohmann::json header, const std::vector<std::string>& blobs);
/// The same frame from views of the blobs' bytes (no copy of them).
bool WriteFrame(int fd, nlohmann::json header, const std::vector<std::string_view>& blobs);

/// The byte sizes a frame header announces (its "blobs" array; empty when
/// absent). Throws std::invalid_argument when the list is malformed, holds
/// more than 1,000,000 entries or announces more than `max_total_bytes`.
std::vector<uint64_t> BlobSizes(const nlohmann::json& header, uint64_t max_total_bytes);

/// Buffered reader of '\n'-terminated lines and raw byte runs from a pipe.
class LineReader {
 public:
  enum Status { kLine, kTimeout, kEof, kError };
  explicit LineReader(int fd) : fd_(fd) {}
  /// Reads the next line (without '\n') into *line. `timeout_ms` < 0 waits
  /// forever; otherwise the wait for the whole line is bounded (ms). A line
  /// longer than max_line() is returned cut to that length and the rest of
  /// it is read and dropped (counted in discarded()), so the buffer never
  /// holds more than about max_line() + 64 KiB.
  Status ReadLine(std::string* line, long timeout_ms);
  /// Longest line kept, in bytes (default: unlimited).
  size_t max_line() const { return max_line_; }
  void set_max_line(size_t bytes) { max_line_ = bytes; }
  /// Bytes of over-long lines dropped so far.
  uint64_t discarded() const { return discarded_; }
  /// Reads exactly `size` bytes into *bytes (kLine on success), within
  /// `timeout_ms` like ReadLine.
  Status ReadExact(std::string* bytes, size_t size, long timeout_ms);
  int fd() const { return fd_; }

 private:
  /// Waits until the pipe is readable; kLine when it is.
  Status Wait(long timeout_ms, std::chrono::steady_clock::time_point deadline);
  /// Waits, then appends one read's bytes to buffer_; kLine when it got some.
  Status Fill(long timeout_ms, std::chrono::steady_clock::time_point deadline);

  int fd_;
  std::string buffer_;
  size_t scanned_ = 0;
  size_t max_line_ = SIZE_MAX;
  bool skipping_ = false;  // inside the dropped tail of an over-long line
  uint64_t discarded_ = 0;
};

/// Raises the pipe's capacity (F_SETPIPE_SZ) to `bytes` where the system
/// allows it, so large frames need fewer wake-ups. Best effort.
void WidenPipe(int fd, int bytes = 1 << 20);

}  // namespace accelopt::worker
