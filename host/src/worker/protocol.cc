#include "worker/protocol.h"

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>

namespace accelopt::worker {

bool WriteLine(int fd, const std::string& line) {
  std::string data = line + "\n";
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = write(fd, data.data() + done, data.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    done += static_cast<size_t>(n);
  }
  return true;
}

LineReader::Status LineReader::ReadLine(std::string* line, long timeout_ms) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms < 0 ? 0 : timeout_ms);
  char chunk[65536];
  while (true) {
    size_t newline = buffer_.find('\n', scanned_);
    if (newline != std::string::npos) {
      line->assign(buffer_, 0, newline);
      buffer_.erase(0, newline + 1);
      scanned_ = 0;
      return kLine;
    }
    scanned_ = buffer_.size();
    int wait = -1;
    if (timeout_ms >= 0) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return kTimeout;
      wait = static_cast<int>(std::min<long long>(left.count(), 1 << 30));
    }
    pollfd pfd{fd_, POLLIN, 0};
    int ready = poll(&pfd, 1, wait);
    if (ready < 0) {
      if (errno == EINTR) continue;
      return kError;
    }
    if (ready == 0) return kTimeout;
    ssize_t n = read(fd_, chunk, sizeof(chunk));
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return kError;
    }
    if (n == 0) return kEof;
    buffer_.append(chunk, static_cast<size_t>(n));
  }
}

}  // namespace accelopt::worker
