// shared_fds.h - sealed memfds passed between the host, a worker and its
// candidate process over AF_UNIX sockets (SCM_RIGHTS), so that input and
// output arrays cross the process boundary without being copied through
// pipes (issue 14; docs/isolation.md "Shared inputs and outputs").
//
// A memfd travels only once it is sealed against writing, growing and
// shrinking (F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK, memfd_create(2),
// fcntl(2) "File Sealing"): no process holding it, a hostile candidate
// included, can change its bytes afterwards, and the kernel refuses the seal
// while anyone still has a writable shared mapping of it.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/unique_fd.h"

namespace accelopt::worker {

using accelopt::UniqueFd;

/// Most descriptors one message carries (the kernel allows 253, SCM_MAX_FD).
constexpr size_t kMaxSharedFds = 64;

/// A connected AF_UNIX SOCK_SEQPACKET pair, both ends close-on-exec.
/// Throws std::runtime_error when the system refuses.
void MakeFdChannel(int fds[2]);

/// Sends `fds` (duplicated into the receiver; the caller keeps its own) in
/// one message whose payload is `tag` (at most 128 bytes: the request's
/// nonce, so a receiver can tell a stale message from the one it waits for).
/// Returns false on any error (EPIPE: the receiver is gone).
bool SendFds(int socket, const std::vector<int>& fds, const std::string& tag);

/// Receives the message tagged `tag` carrying exactly `count` descriptors,
/// waiting at most `timeout_ms` (< 0: forever). Messages with another tag
/// (left over from an abandoned call) are dropped and their descriptors
/// closed. Returns false with *error set on timeout, EOF, a wrong count or
/// any other error; descriptors received with a failed message are closed.
bool RecvFds(int socket, size_t count, const std::string& tag, long timeout_ms, std::vector<UniqueFd>* fds,
             std::string* error);

/// True when `fd` carries F_SEAL_WRITE, F_SEAL_GROW and F_SEAL_SHRINK;
/// else false with *error naming what is missing.
bool IsSealedReadOnly(int fd, std::string* error);

/// Adds F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK to a memfd created with
/// MFD_ALLOW_SEALING. Fails (false, *error set) when it was not, when
/// F_SEAL_SEAL is set, or when a writable shared mapping of it exists
/// (EBUSY): the caller then must not treat its bytes as fixed.
bool SealReadOnly(int fd, std::string* error);

/// The bytes of `shared` = {"memfds": [fd, ...], "blobs": [[k, offset, bytes], ...]}
/// read into one string per range (for workers that cannot take descriptors).
/// Throws std::runtime_error when a range is malformed or cannot be read.
std::vector<std::string> ReadSharedRanges(const nlohmann::json& shared);

}  // namespace accelopt::worker
