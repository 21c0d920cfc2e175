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

/// Which allow-list a worker's candidates run under.
enum class SyscallProfile {
  kEmulator,  ///< the list above
  kHardware,  ///< plus what the Neuron SDK's compiler processes and the device need (below)
};

/// InstallCandidatePolicy for `profile`. kHardware adds process creation
/// and exec (fork, vfork, clone of any kind, execve, execveat, wait4,
/// waitid; Landlock limits exec to the executables of the hardware profile),
/// signals (see own_pid_namespace below), process groups (setpgid, setsid), every ioctl and
/// prctl (the device driver's requests), mlock family, memfd_create, SysV
/// shared memory (the worker has its own IPC namespace) and links. Sockets
/// and io_uring stay refused. With `audit` (ACCELOPT_SECCOMP_AUDIT=1, a
/// discovery aid for new SDK releases) calls outside the list are allowed
/// and logged by the kernel's audit instead of refused.
bool InstallCandidatePolicy(SyscallProfile profile, bool audit, std::vector<std::string>* warnings);

/// As above; `own_pid_namespace` (the worker is pid 1 of its own PID
/// namespace) lets the hardware profile's candidates signal any process of
/// that namespace (their compiler processes); without it, only themselves.
bool InstallCandidatePolicy(SyscallProfile profile, bool audit, bool own_pid_namespace,
                            std::vector<std::string>* warnings);

/// Names of the system calls the hardware profile adds without an argument check.
std::vector<std::string> HardwareSyscallNames();

/// Names of the system calls the allow-list admits without an argument
/// check (for docs and tests).
std::vector<std::string> AllowedSyscallNames();

}  // namespace accelopt::worker
