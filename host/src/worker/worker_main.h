// worker_main.h - the `accelopt-host worker` mode (internal, hidden): one
// persistent worker process that serves isolated calls for its parent. It is
// a zygote: it imports Python, NumPy and the emulator once, then forks a
// fresh, sandboxed candidate process for every request (candidate_process.h).
//
// Protocol (frames of worker/protocol.h: a JSON line, then the raw bytes of
// the "blobs" it announces; docs/isolation.md):
//   fd 0 (from the host): {"id", "nonce", "deadline_s", "module", "function",
//                          "arg", "packed", "scratch", "limits":
//                          {"memory_bytes", "cpu_s"}, "blobs"?}
//   fd 3 (to the host):   first {"ready": true, "pid", "warnings": [...],
//                          "versions": {...}}, then per request
//                          {"id", "nonce", "ok", "result" | "error",
//                           "integrity", "candidate_died"?, "blobs"?}
//   fd 1/2: log lines (the candidates' output too), forwarded by the host.
// Only the zygote writes fd 3; a candidate process writes its reply into a
// memfd that the zygote checks and forwards.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace accelopt::worker {

/// Settings of one worker process (its command line).
struct WorkerMainOptions {
  int id = 0;                            ///< worker number, for logs
  int parent_pid = 0;                    ///< exit at once if this process is not our parent
  std::string scratch;                   ///< the only writable directory (absolute)
  std::vector<std::string> python_paths; ///< extra sys.path entries (readable)
  uint64_t memory_bytes = 0;             ///< RLIMIT_AS of the process in bytes; 0 = none
  uint64_t cpu_seconds = 0;              ///< RLIMIT_CPU hard backstop in s; 0 = none
  bool sandbox = true;                   ///< false: skip namespaces, Landlock and seccomp (debugging)
  std::string backend = "emulator";      ///< "emulator" or "neuron": what is loaded and which sandbox profile applies
};

/// Runs the worker until its request pipe closes. Returns the process exit
/// status: 0 on EOF, 71 if Python failed to start, 74 on a malformed frame
/// from the host.
int WorkerMain(const WorkerMainOptions& options);

}  // namespace accelopt::worker
