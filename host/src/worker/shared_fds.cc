#include "worker/shared_fds.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <stdexcept>

namespace accelopt::worker {
namespace {

constexpr unsigned kReadOnlySeals = F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK;
constexpr size_t kMaxTag = 128;

// Closes every descriptor an SCM_RIGHTS message carried into *fds.
void TakeRights(msghdr* message, std::vector<UniqueFd>* fds) {
  for (cmsghdr* c = CMSG_FIRSTHDR(message); c != nullptr; c = CMSG_NXTHDR(message, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    const unsigned char* data = CMSG_DATA(c);
    for (size_t i = 0; i < n; ++i) {
      int fd;
      std::memcpy(&fd, data + i * sizeof(int), sizeof(int));
      fds->emplace_back(fd);
    }
  }
}

}  // namespace

void MakeFdChannel(int fds[2]) {
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds) != 0)
    throw std::runtime_error(std::string("socketpair: ") + std::strerror(errno));
}

bool SendFds(int socket, const std::vector<int>& fds, const std::string& tag) {
  if (fds.empty() || fds.size() > kMaxSharedFds || tag.size() > kMaxTag) return false;
  std::string payload = tag.empty() ? std::string(1, '\0') : tag;
  iovec iov{payload.data(), payload.size()};
  std::vector<char> control(CMSG_SPACE(sizeof(int) * fds.size()), 0);
  msghdr message{};
  message.msg_iov = &iov;
  message.msg_iovlen = 1;
  message.msg_control = control.data();
  message.msg_controllen = control.size();
  cmsghdr* c = CMSG_FIRSTHDR(&message);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
  std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
  while (true) {
    ssize_t sent = sendmsg(socket, &message, MSG_NOSIGNAL);
    if (sent >= 0) return static_cast<size_t>(sent) == payload.size();
    if (errno != EINTR) return false;
  }
}

bool RecvFds(int socket, size_t count, const std::string& tag, long timeout_ms, std::vector<UniqueFd>* fds,
             std::string* error) {
  fds->clear();
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms < 0 ? 0 : timeout_ms);
  while (true) {
    if (timeout_ms >= 0) {
      long left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
      pollfd p{socket, POLLIN, 0};
      int ready = poll(&p, 1, static_cast<int>(std::max(0L, left)));
      if (ready < 0 && errno == EINTR) continue;
      if (ready <= 0) {
        *error = ready == 0 ? "no descriptors arrived in time" : std::string("poll: ") + std::strerror(errno);
        return false;
      }
    }
    char payload[kMaxTag + 1];
    iovec iov{payload, sizeof(payload)};
    std::vector<char> control(CMSG_SPACE(sizeof(int) * kMaxSharedFds), 0);
    msghdr message{};
    message.msg_iov = &iov;
    message.msg_iovlen = 1;
    message.msg_control = control.data();
    message.msg_controllen = control.size();
    ssize_t got = recvmsg(socket, &message, MSG_CMSG_CLOEXEC);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      *error = got == 0 ? "the descriptor channel closed" : std::string("recvmsg: ") + std::strerror(errno);
      return false;
    }
    std::vector<UniqueFd> received;
    TakeRights(&message, &received);
    std::string got_tag(payload, static_cast<size_t>(got));
    if (got_tag == std::string(1, '\0')) got_tag.clear();
    if (got_tag != tag) continue;  // stale: `received` closes its descriptors
    if ((message.msg_flags & (MSG_CTRUNC | MSG_TRUNC)) != 0 || received.size() != count) {
      *error = "expected " + std::to_string(count) + " descriptors, got " + std::to_string(received.size()) +
               ((message.msg_flags & MSG_CTRUNC) != 0 ? " (truncated)" : "");
      return false;
    }
    *fds = std::move(received);
    return true;
  }
}

bool IsSealedReadOnly(int fd, std::string* error) {
  int seals = fcntl(fd, F_GET_SEALS);
  if (seals < 0) {
    *error = std::string("not a sealable memfd: ") + std::strerror(errno);
    return false;
  }
  if ((static_cast<unsigned>(seals) & kReadOnlySeals) != kReadOnlySeals) {
    *error = "the memfd is not sealed against writing, growing and shrinking";
    return false;
  }
  return true;
}

bool SealReadOnly(int fd, std::string* error) {
  if (fcntl(fd, F_ADD_SEALS, kReadOnlySeals) != 0) {
    *error = std::string("cannot seal the memfd: ") + std::strerror(errno);
    return false;
  }
  return true;
}

std::vector<std::string> ReadSharedRanges(const nlohmann::json& shared) {
  std::vector<int> fds = shared.value("memfds", std::vector<int>{});
  std::vector<std::string> out;
  for (const auto& range : shared.value("blobs", nlohmann::json::array())) {
    if (!range.is_array() || range.size() != 3) throw std::runtime_error("malformed shared range " + range.dump());
    size_t index = range[0].get<size_t>();
    uint64_t offset = range[1].get<uint64_t>(), size = range[2].get<uint64_t>();
    if (index >= fds.size()) throw std::runtime_error("shared range " + range.dump() + " names no memfd");
    std::string bytes(size, '\0');
    uint64_t done = 0;
    while (done < size) {
      ssize_t got = pread(fds[index], bytes.data() + done, size - done, static_cast<off_t>(offset + done));
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) throw std::runtime_error("cannot read shared range " + range.dump());
      done += static_cast<uint64_t>(got);
    }
    out.push_back(std::move(bytes));
  }
  return out;
}

}  // namespace accelopt::worker
