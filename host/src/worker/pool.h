// pool.h - a fixed-size pool of persistent worker processes.
//
// Call() blocks until a worker is free, so requests issued from several
// threads (a for_each's items) run in parallel across workers. A worker that
// died or asked to be replaced is respawned at once (in the background of its
// next use; one that dies while idle is noticed within a second by the
// spawner thread, reaped and replaced). A request whose worker crashed is retried once on a fresh
// worker; a request that killed two workers is reported, never retried
// again. Timeouts are not retried (the deadline is the candidate's budget).
#pragma once

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <thread>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "worker/worker_process.h"

namespace accelopt::worker {

/// Pool size and defaults of per-call limits.
struct PoolOptions {
  int workers = 0;                    ///< number of processes; 0 = number of CPU cores (neuron: of NeuronCores)
  WorkerConfig config;                ///< how each worker is started
  double default_timeout_s = 300;     ///< wall-clock limit per call when the caller gives none (s)
  /// NeuronCores for a neuron pool ("0-31", "0,2"); "" = ACCELOPT_NEURON_CORES,
  /// else neuron-ls (accelopt.backends.neuron_cores). Read by ScopedWorkerPool.
  std::string neuron_cores;
};

/// Per-call limits (from the plugin API's limits_json).
struct CallLimits {
  double timeout_s = 0;       ///< wall clock in s; 0 = the pool default
  uint64_t memory_bytes = 0;  ///< address space in bytes; 0 = the worker's cap
};

/// Counters for run.json and tests.
struct PoolStats {
  int64_t calls = 0;
  int64_t spawned = 0;     ///< processes started, including respawns
  int64_t timeouts = 0;    ///< calls that ended as `timeout`
  int64_t crashes = 0;     ///< calls that ended as `crash` or `sandbox_violation` (a candidate process or a worker died)
  int64_t retries = 0;     ///< calls retried because the worker itself died
  int64_t restarts = 0;    ///< workers replaced for another reason (malformed reply, start failure)
};

class WorkerPool {
 public:
  /// Starts all workers (asynchronously: the first call to each waits for it).
  /// Throws std::runtime_error if a process cannot be spawned.
  explicit WorkerPool(PoolOptions options);
  ~WorkerPool();

  /// Runs `module.function(arg)` in a worker. Never throws for a failing
  /// call: the outcome carries the kind (timeout, crash, out_of_memory,
  /// sandbox_violation, python_error, worker_error). With `blobs`, the
  /// worker calls `function(arg, blobs)`, which returns (result, blobs)
  /// (accelopt.sandbox.codec); the returned ones are in the outcome.
  ///
  /// `while_held`, if set, runs after a successful call while the worker is
  /// still reserved for this caller (nothing runs in it, its scratch folder
  /// is as the candidate left it): the host reads what the candidate wrote
  /// there (e.g. NEFF/NTFF files to profile, docs/trainium.md) and may add
  /// to the outcome. It must not throw for candidate faults.
  ///
  /// `transfer` (optional, docs/isolation.md "Shared inputs and outputs"):
  /// {"shared"?: {"memfds": [fd, ...], "blobs": [[k, offset, bytes], ...]}:
  /// the attachments are ranges of these sealed memfds (the caller keeps the
  /// descriptors open until Call returns); "reply_memfd"?: true: the reply's
  /// attachments may come back as the candidate's sealed reply memfd
  /// (CallOutcome::reply_memfd) instead of bytes, when they are at least
  /// "reply_min_bytes"? (default 0) bytes}. A pool whose workers
  /// cannot take descriptors (Slurm) reads the shared ranges into blobs.
  /// `neuron_core`: the NeuronCore the held worker is pinned to (-1 outside a neuron pool).
  using WhileHeld = std::function<void(CallOutcome& outcome, const std::string& scratch, int neuron_core)>;
  CallOutcome Call(const std::string& module, const std::string& function, const nlohmann::json& arg,
                   const CallLimits& limits, const std::vector<std::string>* blobs = nullptr,
                   const WhileHeld& while_held = nullptr, const nlohmann::json& transfer = nullptr);
  /// The NeuronCores of a neuron pool's workers (worker k on the k-th), else empty.
  std::vector<int> NeuronCores() const {
    return std::vector<int>(options_.config.neuron_cores.begin(),
                            options_.config.neuron_cores.begin() + std::min<size_t>(options_.config.neuron_cores.size(), workers_.size()));
  }
  /// The NeuronCore worker `slot` is pinned to (WorkerProcess: the slot-th, cyclically), or -1.
  int NeuronCoreOf(int slot) const {
    const auto& cores = options_.config.neuron_cores;
    return cores.empty() ? -1 : cores[static_cast<size_t>(slot) % cores.size()];
  }
  /// The backend every worker of this pool serves ("emulator" or "neuron").
  const std::string& backend() const { return options_.config.backend; }
  /// Whether sealed memfds can reach this pool's workers (local processes, not Slurm job steps).
  bool SharesFds() const { return options_.config.executor != "slurm"; }

  int size() const { return static_cast<int>(workers_.size()); }
  PoolStats Stats() const;
  /// Sandbox warnings reported by the first worker that became ready.
  std::vector<std::string> Warnings() const;
  /// Process id (in the host's PID namespace) of worker `slot`, -1 while it
  /// is not running. For diagnostics and tests; the process may end at any time.
  pid_t WorkerPid(int slot) const;

 private:
  /// A free slot, one whose NeuronCore was not found held by another process first.
  int Acquire();
  /// True when a neuron worker's answer says its NeuronCore is held by another process.
  bool DeviceUnavailable(const CallOutcome& out) const;
  void Release(int slot);
  /// Runs `start` on the pool's spawner thread and waits for it (rethrows).
  /// Workers must be spawned from a thread that lives as long as the pool:
  /// PR_SET_PDEATHSIG fires when the *thread* that spawned a child exits.
  void Spawn(WorkerProcess& worker);
  void SpawnerLoop();
  /// On the spawner thread: reaps and respawns workers that died while idle.
  void ReplaceDeadIdleWorkers();
  void StopSpawner();
  CallOutcome CallOnce(int slot, const nlohmann::json& request, const std::vector<std::string>& blobs,
                       double timeout_s);

  PoolOptions options_;
  std::vector<std::unique_ptr<WorkerProcess>> workers_;
  std::vector<bool> busy_;
  /// Slots whose NeuronCore the runtime reported held by another process (device_unavailable).
  std::vector<bool> core_held_;
  mutable std::mutex mu_;
  std::condition_variable free_;
  PoolStats stats_;
  std::vector<std::string> warnings_;
  bool warned_ = false;
  std::mutex spawn_mu_;
  std::condition_variable spawn_cv_;
  std::deque<std::packaged_task<void()>> spawn_tasks_;
  bool stopping_ = false;
  std::thread spawner_;
};

/// Parses limits_json ({"timeout_s", "memory_bytes"}; other keys ignored).
/// Throws std::invalid_argument for negative or non-numeric values.
CallLimits ParseLimits(const nlohmann::json& limits);

}  // namespace accelopt::worker
