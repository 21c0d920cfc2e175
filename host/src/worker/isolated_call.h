// isolated_call.h - the host side of AccelHostApi::isolated_call: the
// trusted/untrusted split of profiling around a WorkerPool, and the RAII
// installer of that service into GlobalHostServices() for a run.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include <nlohmann/json.hpp>

#include "accelopt/api_entries.hpp"
#include "worker/pool.h"

namespace accelopt::worker {

/// Bytes of inputs (or of a reply's outputs) from which they cross the process boundary as a
/// sealed memfd rather than through the pipes (docs/isolation.md "Shared inputs and outputs"):
/// $ACCELOPT_SHARE_MIN_BYTES ("0", "64K", "1M", bytes), default kDefaultShareMinBytes. Below
/// it a memfd's system calls cost more than the copies they save.
constexpr uint64_t kDefaultShareMinBytes = 1u << 20;
uint64_t ShareMinBytes();

/// Sets the host interpreter's OpenBLAS to one thread (best effort; see
/// host/python/nki_emu/blas_threads.py): once workers occupy the cores,
/// multi-threaded BLAS in the host only spins against them. Called when a
/// ScopedWorkerPool starts its pool.
void LimitHostBlas();

/// Runs `module.function(arg)` for untrusted code (docs/isolation.md).
///
/// For accelopt.profile.profile_kernel the trusted part (reference, inputs,
/// source rules, judging) runs in this process's interpreter
/// (accelopt.sandbox.trusted) and only the kernel runs in a worker; the
/// result follows profile_kernel's contract and candidate failures
/// (timeout, crash, out_of_memory, forbidden_import, ...) are reported in
/// its `error`, never thrown. Other functions run as they are in a worker
/// and a failure throws StageError with the kind (timeout, out_of_memory,
/// crash, sandbox_violation, python_error, worker_error).
/// `limits`: {"timeout_s"?: s, "memory_bytes"?: bytes, "static_checks"?: bool,
/// "parallel_passes"?: bool}. With parallel_passes (an ad hoc profile, whose
/// pool would otherwise idle all but one worker) a call of several passes keeps
/// two of them with workers at once (accelopt.sandbox.trusted.ahead); they are
/// still judged one by one, in order, and share the call's time limit.
///
/// On the neuron backend the candidate leaves one NEFF/NTFF pair per timed
/// run in its worker's scratch; while the worker is still held, the host
/// runs neuron-profile on them (accelopt.backends.device_profile), and it
/// repeats the timed round in a worker while the round is unsteady
/// (AccelOpt's protocol; docs/trainium.md).
///
/// `pools` returns the pool for a resolved backend ("emulator" | "neuron");
/// it may start it, and throws StageError(worker_error) when it cannot.
using PoolForBackend = std::function<WorkerPool&(const std::string& backend)>;
nlohmann::json IsolatedCall(const PoolForBackend& pools, const std::string& module, const std::string& function,
                            const nlohmann::json& arg, const nlohmann::json& limits);

/// The same call naming an evaluator's entry of the declared boundary (accelopt::api::kNkiProfile, ...).
inline nlohmann::json IsolatedCall(const PoolForBackend& pools, const accelopt::api::Entry& entry,
                                   const nlohmann::json& arg, const nlohmann::json& limits) {
  return IsolatedCall(pools, entry.module, entry.function, arg, limits);
}

/// IsolatedCall with one pool; a call whose backend is not the pool's
/// fails with a StageError (config_error).
nlohmann::json IsolatedCall(WorkerPool& pool, const std::string& module, const std::string& function,
                            const nlohmann::json& arg, const nlohmann::json& limits);

/// `base` made ready for `backend`: for "neuron", config.backend set, the
/// scratch root moved to <root>/neuron and config.neuron_cores filled from
/// base.neuron_cores / ACCELOPT_NEURON_CORES / neuron-ls. Throws
/// StageError(config_error) when no NeuronCore can be found.
PoolOptions PoolOptionsFor(PoolOptions base, const std::string& backend);

/// Installs a worker pool as GlobalHostServices().isolated_call; the
/// destructor uninstalls it and stops the workers. The processes start on
/// the first isolated call (a run that never needs them pays nothing).
class ScopedWorkerPool {
 public:
  explicit ScopedWorkerPool(PoolOptions options);
  ~ScopedWorkerPool();
  /// The pool, started now if it was not yet. Throws std::runtime_error if
  /// workers cannot be spawned.
  WorkerPool& pool();
  /// The pool of `backend` ("emulator" | "neuron"), started now if it was not yet.
  WorkerPool& pool(const std::string& backend);
  /// null before the first call, else {"workers", "calls", "spawned",
  /// "timeouts", "crashes", "retries", "restarts", "sandbox_warnings",
  /// "backend", "neuron_cores"?} (sums over the backends' pools; "backend"
  /// names the backend(s) that ran).
  nlohmann::json Summary() const;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace accelopt::worker
