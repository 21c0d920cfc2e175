#include "worker/protocol.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <stdexcept>

namespace accelopt::worker {
namespace {

bool WriteAll(int fd, const char* data, size_t size) {
  size_t done = 0;
  while (done < size) {
    ssize_t n = write(fd, data + done, size - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    done += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

bool WriteLine(int fd, const std::string& line) {
  std::string data = line + "\n";
  return WriteAll(fd, data.data(), data.size());
}

bool WriteFrame(int fd, nlohmann::json header, const std::vector<std::string>& blobs) {
  return WriteFrame(fd, std::move(header), std::vector<std::string_view>(blobs.begin(), blobs.end()));
}

bool WriteFrame(int fd, nlohmann::json header, const std::vector<std::string_view>& blobs) {
  if (!blobs.empty()) {
    nlohmann::json sizes = nlohmann::json::array();
    for (const auto& blob : blobs) sizes.push_back(blob.size());
    header["blobs"] = std::move(sizes);
  } else if (header.is_object()) {
    header.erase("blobs");
  }
  if (!WriteLine(fd, header.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace))) return false;
  for (const auto& blob : blobs) {
    if (!WriteAll(fd, blob.data(), blob.size())) return false;
  }
  return true;
}

std::vector<uint64_t> BlobSizes(const nlohmann::json& header, uint64_t max_total_bytes) {
  std::vector<uint64_t> sizes;
  if (!header.is_object() || !header.contains("blobs")) return sizes;
  const auto& list = header["blobs"];
  if (!list.is_array() || list.size() > 1000000) throw std::invalid_argument("malformed blob list in frame header");
  uint64_t total = 0;
  for (const auto& size : list) {
    if (!size.is_number_integer() || (!size.is_number_unsigned() && size.get<int64_t>() < 0))
      throw std::invalid_argument("malformed blob size in frame header");
    sizes.push_back(size.get<uint64_t>());
    total += sizes.back();
    if (total > max_total_bytes)
      throw std::invalid_argument("frame announces more than " + std::to_string(max_total_bytes) + " bytes");
  }
  return sizes;
}

void WidenPipe(int fd, int bytes) { (void)fcntl(fd, F_SETPIPE_SZ, bytes); }

LineReader::Status LineReader::Wait(long timeout_ms, std::chrono::steady_clock::time_point deadline) {
  while (true) {
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
    return ready == 0 ? kTimeout : kLine;
  }
}

LineReader::Status LineReader::Fill(long timeout_ms, std::chrono::steady_clock::time_point deadline) {
  char chunk[65536];
  while (true) {
    Status status = Wait(timeout_ms, deadline);
    if (status != kLine) return status;
    ssize_t n = read(fd_, chunk, sizeof(chunk));
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return kError;
    }
    if (n == 0) return kEof;
    buffer_.append(chunk, static_cast<size_t>(n));
    return kLine;
  }
}

LineReader::Status LineReader::ReadLine(std::string* line, long timeout_ms) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms < 0 ? 0 : timeout_ms);
  while (true) {
    size_t newline = buffer_.find('\n', scanned_);
    if (skipping_) {  // drop the rest of an over-long line, up to its newline
      size_t drop = newline == std::string::npos ? buffer_.size() : newline + 1;
      discarded_ += newline == std::string::npos ? drop : newline;  // the newline is not content
      buffer_.erase(0, drop);
      scanned_ = 0;
      if (newline != std::string::npos) {
        skipping_ = false;
        continue;
      }
    } else if (newline != std::string::npos && newline <= max_line_) {
      line->assign(buffer_, 0, newline);
      buffer_.erase(0, newline + 1);
      scanned_ = 0;
      return kLine;
    } else if (buffer_.size() > max_line_) {  // too long: keep its head, drop the rest
      line->assign(buffer_, 0, max_line_);
      size_t end = newline == std::string::npos ? buffer_.size() : newline + 1;
      discarded_ += end - max_line_ - (newline == std::string::npos ? 0 : 1);
      buffer_.erase(0, end);
      scanned_ = 0;
      skipping_ = newline == std::string::npos;
      return kLine;
    } else {
      scanned_ = buffer_.size();
    }
    Status status = Fill(timeout_ms, deadline);
    if (status != kLine) return status;
  }
}

LineReader::Status LineReader::ReadExact(std::string* bytes, size_t size, long timeout_ms) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms < 0 ? 0 : timeout_ms);
  size_t have = std::min(size, buffer_.size());
  bytes->assign(buffer_, 0, have);
  buffer_.erase(0, have);
  scanned_ = 0;
  bytes->resize(size);
  while (have < size) {
    Status status = Wait(timeout_ms, deadline);
    if (status != kLine) return status;
    ssize_t n = read(fd_, bytes->data() + have, size - have);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return kError;
    }
    if (n == 0) return kEof;
    have += static_cast<size_t>(n);
  }
  return kLine;
}

}  // namespace accelopt::worker
