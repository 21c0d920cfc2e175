#include "worker/syscall_policy.h"

#include <seccomp.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace accelopt::worker {
namespace {

// Allowed without an argument check. Measured with `strace -f -c` on a worker
// running every NKIBench kernel, the probe functions and the test suite's
// candidates (docs/isolation.md, "System call policy"); names a given
// architecture lacks are skipped.
const char* const kAllowed[] = {
    // file descriptors and files (Landlock decides which paths)
    "read", "write", "readv", "writev", "pread64", "pwrite64", "preadv", "pwritev", "preadv2", "pwritev2", "lseek",
    "close", "close_range", "fstat", "stat", "lstat", "newfstatat", "statx", "fstatfs", "statfs", "open", "openat",
    "openat2", "getdents", "getdents64", "getcwd", "chdir", "fchdir", "fcntl", "dup", "dup2", "dup3", "pipe", "pipe2",
    "ftruncate", "truncate", "fsync", "fdatasync", "flock", "fadvise64", "umask", "mkdir", "mkdirat", "rmdir",
    "unlink", "unlinkat", "rename", "renameat", "renameat2", "readlink", "readlinkat", "access", "faccessat",
    "faccessat2", "chmod", "fchmod", "fchmodat", "utimensat", "poll", "ppoll", "select", "pselect6", "eventfd2",
    "epoll_create1", "epoll_ctl", "epoll_wait", "epoll_pwait", "sendfile", "copy_file_range",
    // the spare takes its request's sealed input memfds from the worker's socket pair (then closes
    // it; socket() and socketpair() stay refused, so a candidate holds no socket at all)
    "recvmsg",
    // memory
    "mmap", "munmap", "mremap", "mprotect", "madvise", "brk", "msync", "mincore", "membarrier", "get_mempolicy", "set_mempolicy", "mbind",
    // signals delivered to the caller itself
    "rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "sigaltstack", "rt_sigpending", "rt_sigsuspend",
    "rt_sigtimedwait", "getitimer", "setitimer", "alarm", "timer_create", "timer_settime", "timer_gettime",
    "timer_getoverrun", "timer_delete", "pause",
    // identity, time, scheduling of the caller
    "getpid", "gettid", "getppid", "getuid", "geteuid", "getgid", "getegid", "getresuid", "getresgid", "getgroups",
    "getpgrp", "getpgid", "getsid", "getrandom", "clock_gettime", "clock_getres", "gettimeofday", "time",
    "nanosleep", "clock_nanosleep", "sched_yield", "sched_getaffinity", "sched_getparam", "sched_getscheduler",
    "sched_get_priority_max", "sched_get_priority_min", "getpriority", "getcpu", "getrusage", "times", "sysinfo",
    "uname", "getrlimit", "setrlimit",
    // threads
    "futex", "set_robust_list", "get_robust_list", "rseq", "set_tid_address", "exit", "exit_group",
};

// Added by the hardware profile (the SDK's compiler runs as child processes;
// the Neuron runtime drives the device with ioctl and locked memory).
const char* const kHardwareAllowed[] = {
    "fork", "vfork", "execve", "execveat", "wait4", "waitid", "arch_prctl", "setpgid", "setsid",
    "getpgid", "ioctl", "prctl", "mlock", "mlock2", "munlock", "mlockall", "munlockall", "memfd_create", "shmget",
    "shmat", "shmdt", "shmctl", "link", "linkat", "symlink", "symlinkat", "sched_setaffinity", "sched_setscheduler",
    "sched_setparam", "setpriority", "prlimit64", "getxattr", "lgetxattr", "fgetxattr", "listxattr", "llistxattr",
    "flistxattr", "nice", "inotify_init1", "inotify_add_watch", "inotify_rm_watch", "timerfd_create",
    "timerfd_settime", "timerfd_gettime", "signalfd4", "epoll_create", "epoll_pwait2", "sync_file_range", "fallocate",
    "chown", "fchown", "lchown", "fchownat", "futimesat", "utimes", "utime",
};

// Syscalls whose first argument is a process: allowed for the caller only.
const char* const kSelfOnly[] = {"kill", "tkill", "tgkill", "prlimit64", "sched_setaffinity"};

// ioctl requests CPython and NumPy issue on their own descriptors.
const unsigned long kIoctls[] = {TCGETS, FIONREAD, FIONBIO, FIOCLEX, FIONCLEX};

// prctl options CPython's threading uses.
const int kPrctls[] = {PR_SET_NAME, PR_GET_NAME};

#ifndef CLONE_THREAD
constexpr unsigned long kCloneThread = 0x00010000;
#else
constexpr unsigned long kCloneThread = CLONE_THREAD;
#endif

}  // namespace

std::vector<std::string> AllowedSyscallNames() {
  std::vector<std::string> names;
  for (const char* name : kAllowed) {
    if (seccomp_syscall_resolve_name(name) != __NR_SCMP_ERROR) names.push_back(name);
  }
  return names;
}

std::vector<std::string> HardwareSyscallNames() {
  std::vector<std::string> names;
  for (const char* name : kHardwareAllowed) {
    if (seccomp_syscall_resolve_name(name) != __NR_SCMP_ERROR) names.push_back(name);
  }
  return names;
}

bool InstallCandidatePolicy(std::vector<std::string>* warnings) {
  return InstallCandidatePolicy(SyscallProfile::kEmulator, false, warnings);
}

bool InstallCandidatePolicy(SyscallProfile profile, bool audit, std::vector<std::string>* warnings) {
  return InstallCandidatePolicy(profile, audit, false, warnings);
}

bool InstallCandidatePolicy(SyscallProfile profile, bool audit, bool own_pid_namespace,
                            std::vector<std::string>* warnings) {
  const bool hardware = profile == SyscallProfile::kHardware;
  scmp_filter_ctx ctx = seccomp_init(hardware && audit ? SCMP_ACT_LOG : SCMP_ACT_ERRNO(EPERM));
  if (ctx == nullptr) {
    warnings->push_back("no seccomp filter (seccomp_init failed): process creation, exec and sockets are not blocked");
    return false;
  }
  int rc = 0;
  auto add = [&](uint32_t action, const char* name, unsigned count, const scmp_arg_cmp* args) {
    int nr = seccomp_syscall_resolve_name(name);
    if (nr == __NR_SCMP_ERROR) return;  // not on this architecture
    int r = seccomp_rule_add_array(ctx, action, nr, count, args);
    if (r != 0 && rc == 0) rc = r;
  };
  for (const char* name : kAllowed) add(SCMP_ACT_ALLOW, name, 0, nullptr);
  if (hardware) {
    for (const char* name : kHardwareAllowed) add(SCMP_ACT_ALLOW, name, 0, nullptr);
    add(SCMP_ACT_ALLOW, "clone", 0, nullptr);  // child processes of any kind, not only threads
    if (own_pid_namespace) {
      // Only the worker's own candidate processes are addressable, and the
      // worker, their namespace's init, ignores signals it has no handler for.
      for (const char* name : {"kill", "tkill", "tgkill"}) add(SCMP_ACT_ALLOW, name, 0, nullptr);
    } else {
      const auto self = static_cast<scmp_datum_t>(getpid());
      for (const char* name : {"kill", "tkill", "tgkill"}) {
        scmp_arg_cmp me = SCMP_A0_32(SCMP_CMP_EQ, self);
        add(SCMP_ACT_ALLOW, name, 1, &me);
      }
    }
  }

  if (!hardware) {  // the hardware profile allows these without an argument check
    const auto self = static_cast<scmp_datum_t>(getpid());
    for (const char* name : kSelfOnly) {
      scmp_arg_cmp zero = SCMP_A0_32(SCMP_CMP_EQ, 0);
      scmp_arg_cmp me = SCMP_A0_32(SCMP_CMP_EQ, self);
      add(SCMP_ACT_ALLOW, name, 1, &me);
      // 0 means the caller for these two; for kill it means the process group
      // (the worker itself), so kill gets no such exception.
      if (std::strcmp(name, "prlimit64") == 0 || std::strcmp(name, "sched_setaffinity") == 0)
        add(SCMP_ACT_ALLOW, name, 1, &zero);
    }
    for (unsigned long request : kIoctls) {
      scmp_arg_cmp cmp = SCMP_A1_32(SCMP_CMP_EQ, static_cast<scmp_datum_t>(request));
      add(SCMP_ACT_ALLOW, "ioctl", 1, &cmp);
    }
    for (int option : kPrctls) {
      scmp_arg_cmp cmp = SCMP_A0_32(SCMP_CMP_EQ, static_cast<scmp_datum_t>(option));
      add(SCMP_ACT_ALLOW, "prctl", 1, &cmp);
    }
    scmp_arg_cmp thread = SCMP_A0_64(SCMP_CMP_MASKED_EQ, kCloneThread, kCloneThread);
    add(SCMP_ACT_ALLOW, "clone", 1, &thread);
  }
  add(SCMP_ACT_ERRNO(ENOSYS), "clone3", 0, nullptr);  // its flags sit behind a pointer: make glibc use clone

  if (rc == 0) rc = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 1);
  if (rc == 0) rc = seccomp_load(ctx);
  seccomp_release(ctx);
  if (rc != 0) {
    warnings->push_back(std::string("no seccomp filter (") + std::strerror(-rc) +
                        "): process creation, exec and sockets are not blocked");
    return false;
  }
  return true;
}

}  // namespace accelopt::worker
