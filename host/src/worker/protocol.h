// protocol.h - JSON-lines framing over pipes between the host and workers.
#pragma once

#include <string>

namespace accelopt::worker {

/// Writes `line` plus '\n' completely (retrying on EINTR and short writes).
/// Returns false on any other error (EPIPE: the reader is gone).
bool WriteLine(int fd, const std::string& line);

/// Buffered reader of '\n'-terminated lines from a pipe.
class LineReader {
 public:
  enum Status { kLine, kTimeout, kEof, kError };
  explicit LineReader(int fd) : fd_(fd) {}
  /// Reads the next line (without '\n') into *line. `timeout_ms` < 0 waits
  /// forever; otherwise the wait for the whole line is bounded (ms).
  Status ReadLine(std::string* line, long timeout_ms);
  int fd() const { return fd_; }

 private:
  int fd_;
  std::string buffer_;
  size_t scanned_ = 0;
};

}  // namespace accelopt::worker
