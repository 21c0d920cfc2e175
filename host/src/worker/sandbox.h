// sandbox.h - what a worker process does to itself before it serves
// untrusted candidates (docs/isolation.md). Linux only; every step that the
// kernel refuses degrades to a warning instead of failing the worker.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace accelopt::worker {

/// Closes every file descriptor >= `first` (close_range, else a loop over
/// /proc/self/fd). Returns false if neither worked.
bool CloseInheritedFds(int first);

/// prctl(PR_SET_PDEATHSIG, SIGKILL), then exits at once (status 70) if the
/// parent `expected_parent` already died before the call.
void DieWithParent(int expected_parent);

/// Sets the hard and soft RLIMIT_AS to `address_space_bytes` (0 = keep),
/// RLIMIT_CPU to `cpu_seconds` (0 = keep) and RLIMIT_CORE to 0. Appends a
/// warning per limit the kernel refused.
void ApplyResourceLimits(uint64_t address_space_bytes, uint64_t cpu_seconds, std::vector<std::string>* warnings);

/// Which namespaces EnterNamespaces() reached.
struct NamespaceResult {
  bool network = false;  ///< own network namespace: no interface but a down loopback
  bool pid = false;      ///< own PID namespace: this process is now its pid 1
};

/// unshare(CLONE_NEWUSER | CLONE_NEWNET | CLONE_NEWPID | CLONE_NEWIPC), then
/// fork once so that the caller continues as pid 1 of the new PID namespace
/// (the host, pid 1 of the machine and other workers are not addressable
/// from it) while the original process waits outside and exits as the
/// child does (same status or signal). Must run while the process has one
/// thread. Falls back to user+network namespaces, then to none, appending a
/// warning for each step the kernel refused.
NamespaceResult EnterNamespaces(std::vector<std::string>* warnings);

/// Landlock: afterwards the process may read (and execute) only beneath
/// `read_paths` and read/write only beneath `write_paths`; everything else
/// is EACCES. Paths that do not exist are skipped. Returns false (with a
/// warning) if the kernel has no Landlock.
bool RestrictFileSystem(const std::vector<std::string>& read_paths, const std::vector<std::string>& write_paths,
                        std::vector<std::string>* warnings);

/// Landlock with an explicit allow-list of executables: as above, except
/// that `read_paths` and `write_paths` grant no execute right and only
/// files beneath `exec_paths` (also readable) may be started with execve
/// (the hardware profile, docs/trainium.md).
bool RestrictFileSystemWithExec(const std::vector<std::string>& read_paths,
                                const std::vector<std::string>& write_paths,
                                const std::vector<std::string>& exec_paths, std::vector<std::string>* warnings);

}  // namespace accelopt::worker
