#include "worker/sandbox.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/landlock.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
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

NamespaceResult EnterNamespaces(std::vector<std::string>* warnings) {
  NamespaceResult result;
  if (unshare(CLONE_NEWUSER | CLONE_NEWNET | CLONE_NEWPID | CLONE_NEWIPC) == 0) {
    result.network = result.pid = true;
  } else if (unshare(CLONE_NEWUSER | CLONE_NEWNET) == 0) {
    result.network = true;
    warnings->push_back(Errno("no PID namespace (unshare(CLONE_NEWPID))") +
                        "; candidates are still limited to signalling themselves by the seccomp filter");
  } else {
    warnings->push_back(Errno("no network namespace (unshare(CLONE_NEWUSER|CLONE_NEWNET))") +
                        "; sockets are still refused by the seccomp filter");
    return result;
  }
  if (!result.pid) return result;
  // unshare(CLONE_NEWPID) moves only our children: the next one is pid 1 of
  // the new namespace. It goes on as the worker; this process stays outside
  // as its parent and mirrors its end, so the host sees one worker either way.
  pid_t child = fork();
  if (child < 0) {
    warnings->push_back(Errno("fork into the PID namespace"));
    result.pid = false;
    return result;
  }
  if (child == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    return result;
  }
  for (int fd = 0; fd < 4; ++fd) close(fd);
  int status = 0;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFSIGNALED(status)) {
    signal(WTERMSIG(status), SIG_DFL);
    kill(getpid(), WTERMSIG(status));
  }
  _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 70);
}

namespace {

bool Restrict(const std::vector<std::string>& read_paths, const std::vector<std::string>& write_paths,
              const std::vector<std::string>* exec_paths, std::vector<std::string>* warnings) {
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
  auto add = [&](const std::string& path, uint64_t access, bool writable) {
    // A writable path must not be a link (one planted in a run directory
    // would grant write access to its target): O_NOFOLLOW refuses it.
    int fd = open(path.c_str(), O_PATH | O_CLOEXEC | (writable ? O_NOFOLLOW : 0));
    if (fd < 0) {
      if (writable && errno == ELOOP) warnings->push_back("not writable: " + path + " is a symbolic link");
      return;  // missing paths are simply not allowed
    }
    struct stat st{};
    if (fstat(fd, &st) == 0 && !S_ISDIR(st.st_mode)) access &= kFileRights;
    landlock_path_beneath_attr rule{};
    rule.allowed_access = access & handled;
    rule.parent_fd = fd;
    if (syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &rule, 0) != 0)
      warnings->push_back(Errno(("landlock rule for " + path).c_str()));
    close(fd);
  };
  if (exec_paths == nullptr) {
    for (const auto& path : read_paths) add(path, kRead, false);
    for (const auto& path : write_paths) add(path, handled, true);
  } else {
    for (const auto& path : read_paths) add(path, kRead & ~uint64_t{LANDLOCK_ACCESS_FS_EXECUTE}, false);
    for (const auto& path : write_paths) add(path, handled & ~uint64_t{LANDLOCK_ACCESS_FS_EXECUTE}, true);
    for (const auto& path : *exec_paths) add(path, kRead, false);
  }
  bool ok = prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 && syscall(SYS_landlock_restrict_self, ruleset, 0) == 0;
  if (!ok) warnings->push_back(Errno("landlock_restrict_self"));
  close(ruleset);
  return ok;
}

}  // namespace

bool RestrictFileSystem(const std::vector<std::string>& read_paths, const std::vector<std::string>& write_paths,
                        std::vector<std::string>* warnings) {
  return Restrict(read_paths, write_paths, nullptr, warnings);
}

bool RestrictFileSystemWithExec(const std::vector<std::string>& read_paths,
                                const std::vector<std::string>& write_paths,
                                const std::vector<std::string>& exec_paths, std::vector<std::string>* warnings) {
  return Restrict(read_paths, write_paths, &exec_paths, warnings);
}

}  // namespace accelopt::worker
