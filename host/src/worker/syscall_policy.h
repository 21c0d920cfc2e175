// syscall_policy.h - the seccomp allow-list a candidate process runs under.
//
// Only the system calls that CPython 3.11, NumPy/OpenBLAS and the NKI
// emulator were measured to need are allowed (docs/isolation.md, "System
// call policy", lists them with how they were found). Everything else fails
// with EPERM, which the harness reports as `sandbox_violation`: process
// creation, exec, every socket call, io_uring, ptrace, signals to anything
// but the caller itself, namespace and mount calls, BPF, perf, keyrings.
#pragma once

#include <string>
#include <vector>

namespace accelopt::worker {

/// Installs the candidate allow-list filter on the calling thread's process
/// (with PR_SET_NO_NEW_PRIVS; inherited by threads started later). Calls
/// whose first argument names a process (kill, tgkill, tkill, prlimit64,
/// sched_setaffinity) are allowed only for the caller itself (its pid as
/// seen in its PID namespace, or 0). `clone` is allowed for threads only;
/// `clone3` fails with ENOSYS so glibc falls back to `clone`. `ioctl` is
/// limited to terminal/FIONREAD/FIONBIO/FIOCLEX queries, `prctl` to
/// PR_SET_NAME/PR_GET_NAME. Returns false and appends to `warnings` when the
/// kernel or architecture has no seccomp filter mode (x86-64 and aarch64 are
/// supported).
bool InstallCandidatePolicy(std::vector<std::string>* warnings);

/// Names of the system calls the allow-list admits without an argument
/// check (for docs and tests).
std::vector<std::string> AllowedSyscallNames();

}  // namespace accelopt::worker
