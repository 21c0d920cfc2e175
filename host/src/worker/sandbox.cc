#include "worker/sandbox.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/landlock.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <cstring>

namespace accelopt::worker {
namespace {

std::string Errno(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

}  // namespace

bool CloseInheritedFds(int first) {
#ifdef SYS_close_range
  if (syscall(SYS_close_range, static_cast<unsigned>(first), ~0u, 0u) == 0) return true;
#endif
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return false;
  std::vector<int> fds;
  while (dirent* entry = readdir(dir)) {
    int fd = std::atoi(entry->d_name);
    if (fd >= first && fd != dirfd(dir)) fds.push_back(fd);
  }
  closedir(dir);
  for (int fd : fds) close(fd);
  return true;
}

void DieWithParent(int expected_parent) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (expected_parent > 0 && getppid() != expected_parent) _exit(70);
}

void ApplyResourceLimits(uint64_t address_space_bytes, uint64_t cpu_seconds, std::vector<std::string>* warnings) {
  rlimit core{0, 0};
  if (setrlimit(RLIMIT_CORE, &core) != 0) warnings->push_back(Errno("RLIMIT_CORE"));
  if (address_space_bytes > 0) {
    rlimit as{address_space_bytes, address_space_bytes};
    if (setrlimit(RLIMIT_AS, &as) != 0) warnings->push_back(Errno("RLIMIT_AS"));
  }
  if (cpu_seconds > 0) {
    rlimit cpu{cpu_seconds, cpu_seconds + 5};  // SIGXCPU at the soft limit, SIGKILL at the hard one
    if (setrlimit(RLIMIT_CPU, &cpu) != 0) warnings->push_back(Errno("RLIMIT_CPU"));
  }
}

bool DropNetwork(std::vector<std::string>* warnings) {
  if (unshare(CLONE_NEWUSER | CLONE_NEWNET) == 0) return true;
  warnings->push_back(Errno("no network namespace (unshare(CLONE_NEWUSER|CLONE_NEWNET))") +
                      "; sockets are still refused by the seccomp filter");
  return false;
}

bool RestrictFileSystem(const std::vector<std::string>& read_paths, const std::vector<std::string>& write_paths,
                        std::vector<std::string>* warnings) {
  long abi = syscall(SYS_landlock_create_ruleset, nullptr, 0, LANDLOCK_CREATE_RULESET_VERSION);
  if (abi < 1) {
    warnings->push_back(Errno("no Landlock (file system not restricted)"));
    return false;
  }
  const uint64_t kRead = LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR;
  const uint64_t kFileRights = LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE |
                               LANDLOCK_ACCESS_FS_READ_FILE | (abi >= 3 ? (1ULL << 14) : 0);
  uint64_t handled = (1ULL << 13) - 1;  // EXECUTE .. MAKE_SYM (ABI 1)
  if (abi >= 2) handled |= LANDLOCK_ACCESS_FS_REFER;
  if (abi >= 3) handled |= 1ULL << 14;  // TRUNCATE
  landlock_ruleset_attr attr{};
  attr.handled_access_fs = handled;
  int ruleset = static_cast<int>(syscall(SYS_landlock_create_ruleset, &attr, sizeof(attr), 0));
  if (ruleset < 0) {
    warnings->push_back(Errno("landlock_create_ruleset"));
    return false;
  }
  auto add = [&](const std::string& path, uint64_t access) {
    int fd = open(path.c_str(), O_PATH | O_CLOEXEC);
    if (fd < 0) return;  // missing paths are simply not allowed
    struct stat st{};
    if (fstat(fd, &st) == 0 && !S_ISDIR(st.st_mode)) access &= kFileRights;
    landlock_path_beneath_attr rule{};
    rule.allowed_access = access & handled;
    rule.parent_fd = fd;
    if (syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &rule, 0) != 0)
      warnings->push_back(Errno(("landlock rule for " + path).c_str()));
    close(fd);
  };
  for (const auto& path : read_paths) add(path, kRead);
  for (const auto& path : write_paths) add(path, handled);
  bool ok = prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 && syscall(SYS_landlock_restrict_self, ruleset, 0) == 0;
  if (!ok) warnings->push_back(Errno("landlock_restrict_self"));
  close(ruleset);
  return ok;
}

namespace {

#if defined(__x86_64__)
constexpr uint32_t kAuditArch = AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
constexpr uint32_t kAuditArch = AUDIT_ARCH_AARCH64;
#else
constexpr uint32_t kAuditArch = 0;
#endif

constexpr uint32_t kArgLow(int index) { return offsetof(seccomp_data, args) + 8 * index; }  // little endian

sock_filter Stmt(uint16_t code, uint32_t k) { return BPF_STMT(code, k); }
sock_filter Jump(uint16_t code, uint32_t k, uint8_t jt, uint8_t jf) { return BPF_JUMP(code, k, jt, jf); }

}  // namespace

bool InstallSyscallFilter(std::vector<std::string>* warnings) {
  if (kAuditArch == 0) {
    warnings->push_back("no seccomp filter for this CPU architecture");
    return false;
  }
  const uint32_t kAllow = SECCOMP_RET_ALLOW;
  const uint32_t kDeny = SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA);
  const uint32_t kNoSys = SECCOMP_RET_ERRNO | (ENOSYS & SECCOMP_RET_DATA);
  const uint32_t self = static_cast<uint32_t>(getpid());

  std::vector<int> denied = {
#ifdef __NR_fork
      __NR_fork,
#endif
#ifdef __NR_vfork
      __NR_vfork,
#endif
      __NR_execve,       __NR_execveat,        __NR_socket,       __NR_socketpair, __NR_ptrace,
      __NR_process_vm_readv, __NR_process_vm_writev, __NR_mount,  __NR_unshare,    __NR_setns,
      __NR_tkill,        __NR_pidfd_open,      __NR_pidfd_send_signal};

  std::vector<sock_filter> prog;
  prog.push_back(Stmt(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)));
  prog.push_back(Jump(BPF_JMP | BPF_JEQ | BPF_K, kAuditArch, 1, 0));
  prog.push_back(Stmt(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS));
  prog.push_back(Stmt(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)));
  for (int nr : denied) {
    prog.push_back(Jump(BPF_JMP | BPF_JEQ | BPF_K, static_cast<uint32_t>(nr), 0, 1));
    prog.push_back(Stmt(BPF_RET | BPF_K, kDeny));
  }
  // clone3's flags live behind a pointer: make glibc fall back to clone.
  prog.push_back(Jump(BPF_JMP | BPF_JEQ | BPF_K, __NR_clone3, 0, 1));
  prog.push_back(Stmt(BPF_RET | BPF_K, kNoSys));
  // clone: threads only.
  prog.push_back(Jump(BPF_JMP | BPF_JEQ | BPF_K, __NR_clone, 0, 4));
  prog.push_back(Stmt(BPF_LD | BPF_W | BPF_ABS, kArgLow(0)));
  prog.push_back(Jump(BPF_JMP | BPF_JSET | BPF_K, CLONE_THREAD, 0, 1));
  prog.push_back(Stmt(BPF_RET | BPF_K, kAllow));
  prog.push_back(Stmt(BPF_RET | BPF_K, kDeny));
  // kill(pid): only this process or its own group (0).
  prog.push_back(Jump(BPF_JMP | BPF_JEQ | BPF_K, __NR_kill, 0, 5));
  prog.push_back(Stmt(BPF_LD | BPF_W | BPF_ABS, kArgLow(0)));
  prog.push_back(Jump(BPF_JMP | BPF_JEQ | BPF_K, self, 2, 0));
  prog.push_back(Jump(BPF_JMP | BPF_JEQ | BPF_K, 0, 1, 0));
  prog.push_back(Stmt(BPF_RET | BPF_K, kDeny));
  prog.push_back(Stmt(BPF_RET | BPF_K, kAllow));
  // tgkill(tgid, ...): only this process's threads.
  prog.push_back(Jump(BPF_JMP | BPF_JEQ | BPF_K, __NR_tgkill, 0, 4));
  prog.push_back(Stmt(BPF_LD | BPF_W | BPF_ABS, kArgLow(0)));
  prog.push_back(Jump(BPF_JMP | BPF_JEQ | BPF_K, self, 1, 0));
  prog.push_back(Stmt(BPF_RET | BPF_K, kDeny));
  prog.push_back(Stmt(BPF_RET | BPF_K, kAllow));
  prog.push_back(Stmt(BPF_RET | BPF_K, kAllow));

  sock_fprog fprog{static_cast<unsigned short>(prog.size()), prog.data()};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &fprog) != 0) {
    warnings->push_back(Errno("no seccomp filter (fork/exec/sockets not blocked)"));
    return false;
  }
  return true;
}

}  // namespace accelopt::worker
