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

/// unshare(CLONE_NEWUSER | CLONE_NEWNET): no network interface but a down
/// loopback. Appends a warning and returns false where user namespaces are
/// unavailable (the seccomp filter still refuses socket()).
bool DropNetwork(std::vector<std::string>* warnings);

/// Landlock: afterwards the process may read (and execute) only beneath
/// `read_paths` and read/write only beneath `write_paths`; everything else
/// is EACCES. Paths that do not exist are skipped. Returns false (with a
/// warning) if the kernel has no Landlock.
bool RestrictFileSystem(const std::vector<std::string>& read_paths, const std::vector<std::string>& write_paths,
                        std::vector<std::string>* warnings);

/// Seccomp filter (sets no_new_privs): fork, vfork, clone without
/// CLONE_THREAD, execve(at), socket, socketpair, ptrace, process_vm_*,
/// kill/tgkill of other processes, mount, unshare and setns fail with EPERM;
/// clone3 fails with ENOSYS so glibc falls back to clone, where the flags are
/// visible. Returns false (with a warning) if seccomp is unavailable.
bool InstallSyscallFilter(std::vector<std::string>* warnings);

}  // namespace accelopt::worker
