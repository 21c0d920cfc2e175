// candidate_process.h - one fresh process per candidate, forked from the
// worker (the zygote) after NumPy, the emulator and the harness were
// imported: every candidate starts from the same clean state at the cost of
// a fork (milliseconds), and nothing it leaves behind (hooks, threads, open
// descriptors, signal handlers, edited module tables) reaches the next one.
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>
#include <utility>

namespace accelopt::worker {

/// How a candidate process ended.
struct ChildEnd {
  bool timed_out = false;  ///< killed by WaitForChild at its deadline
  bool stopped = false;    ///< said it was done and was stopped (SIGSTOP), not yet reaped
  int exit_code = -1;      ///< exit status when it exited, else -1
  int signal = 0;          ///< terminating signal, else 0
  double wall_ms = 0;      ///< from fork to reaping, in ms
};

/// Forks the calling process, which must have a single thread, with
/// CPython's fork hooks (PyOS_BeforeFork/AfterFork_*; the GIL is taken for
/// the fork and released on both sides). The child runs `body` and leaves
/// with `_exit(body())` (no atexit handlers, no destructors); this function
/// returns only in the parent, with the child's pid. Throws
/// std::runtime_error when fork fails.
pid_t ForkWithPython(const std::function<int()>& body);

/// Waits for child `pid` at most `timeout_s` seconds (<= 0: no limit),
/// through a pidfd (poll) where the kernel has one. At the deadline the
/// child gets SIGKILL and is reaped. `started_ms` is the steady-clock time
/// of the fork in ms (for ChildEnd::wall_ms). With `done_fd` >= 0 (the read
/// end of a pipe the child writes one byte to once its reply is complete),
/// a child that wrote it is stopped with SIGSTOP at once (its threads can
/// change nothing any more) and returned as `stopped`, exit_code 0, so its
/// reply can be forwarded before its exit's teardown (~3 ms); the caller
/// then SIGKILLs it and reaps it later. A child that closes the pipe
/// without the byte is waited for as usual.
ChildEnd WaitForChild(pid_t pid, double timeout_s, double started_ms, int done_fd = -1);

/// Error kind and message for a candidate process that ended without a
/// complete reply: timeout (deadline or SIGXCPU), sandbox_violation
/// (SIGSYS), out_of_memory (SIGXFSZ: its reply or files exceeded the size
/// limit is reported as such), crash (any other signal or exit status).
std::pair<std::string, std::string> ClassifyEnd(const ChildEnd& end, double timeout_s);

/// Steady-clock now in ms (for ChildEnd timing).
double SteadyNowMs();

}  // namespace accelopt::worker
