#include "worker/candidate_process.h"

#include <Python.h>

#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <thread>

namespace accelopt::worker {

double SteadyNowMs() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

pid_t ForkWithPython(const std::function<int()>& body) {
  PyGILState_STATE gil = PyGILState_Ensure();
  PyOS_BeforeFork();
  pid_t pid = fork();
  if (pid == 0) {
    PyOS_AfterFork_Child();
    PyGILState_Release(gil);
    int code = 70;
    try {
      code = body();
    } catch (...) {
      code = 70;
    }
    _exit(code);
  }
  int error = errno;
  PyOS_AfterFork_Parent();
  PyGILState_Release(gil);
  if (pid < 0) throw std::runtime_error(std::string("fork of a candidate process failed: ") + std::strerror(error));
  return pid;
}

namespace {

bool Reaped(pid_t pid, int options, ChildEnd* end) {
  int status = 0;
  pid_t done;
  while ((done = waitpid(pid, &status, options)) < 0 && errno == EINTR) {
  }
  if (done != pid) return false;
  if (WIFEXITED(status)) end->exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) end->signal = WTERMSIG(status);
  return true;
}

// After the child's "done" byte: stop it, unless it ended first.
void StopOrReap(pid_t pid, ChildEnd* end) {
  kill(pid, SIGSTOP);
  siginfo_t info{};
  while (waitid(P_PID, pid, &info, WSTOPPED | WEXITED) < 0 && errno == EINTR) {
  }
  if (info.si_code == CLD_STOPPED) {
    end->stopped = true;
    end->exit_code = 0;
  } else if (info.si_code == CLD_EXITED) {
    end->exit_code = info.si_status;
  } else {
    end->signal = info.si_status;
  }
}

}  // namespace

ChildEnd WaitForChild(pid_t pid, double timeout_s, double started_ms, int done_fd) {
  ChildEnd end;
  const double deadline = timeout_s > 0 ? started_ms + timeout_s * 1000 : 0;
  int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  while (!Reaped(pid, WNOHANG, &end)) {
    double left = deadline > 0 ? deadline - SteadyNowMs() : 1000;
    if (deadline > 0 && left <= 0) {
      kill(pid, SIGKILL);
      Reaped(pid, 0, &end);
      end.timed_out = true;
      break;
    }
    // Without a pidfd the exit is polled every 5 ms.
    int wait_ms = static_cast<int>(std::min(left, pidfd >= 0 ? 1000.0 : 5.0)) + 1;
    pollfd fds[2];
    nfds_t count = 0;
    if (pidfd >= 0) fds[count++] = {pidfd, POLLIN, 0};
    if (done_fd >= 0) fds[count++] = {done_fd, POLLIN, 0};
    if (count > 0) poll(fds, count, wait_ms);
    else std::this_thread::sleep_for(std::chrono::milliseconds(wait_ms));
    if (done_fd >= 0 && (fds[count - 1].revents & (POLLIN | POLLHUP))) {
      char byte = 0;
      if (read(done_fd, &byte, 1) == 1) {
        StopOrReap(pid, &end);
        break;
      }
      done_fd = -1;  // closed without the byte: wait for the exit
    }
  }
  if (pidfd >= 0) close(pidfd);
  end.wall_ms = SteadyNowMs() - started_ms;
  return end;
}

std::pair<std::string, std::string> ClassifyEnd(const ChildEnd& end, double timeout_s) {
  char limit[32];
  std::snprintf(limit, sizeof(limit), "%.2f", timeout_s);
  if (end.timed_out) return {"timeout", std::string("no answer within ") + limit + " s; candidate process killed"};
  if (end.signal != 0) {
    const char* abbrev = sigabbrev_np(end.signal);
    std::string name = abbrev ? std::string("SIG") + abbrev : std::to_string(end.signal);
    if (end.signal == SIGXCPU) return {"timeout", "CPU time limit exceeded (" + name + ")"};
    if (end.signal == SIGSYS) return {"sandbox_violation", "forbidden system call (" + name + ")"};
    if (end.signal == SIGXFSZ) return {"out_of_memory", "file size limit exceeded (" + name + ")"};
    return {"crash", "candidate process killed by signal " + name};
  }
  return {"crash", "candidate process exited with status " + std::to_string(end.exit_code) + " before answering"};
}

}  // namespace accelopt::worker
