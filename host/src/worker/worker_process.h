// worker_process.h - the host's handle on one worker process: spawn
// (posix_spawn of the host binary in `worker` mode, never fork of the
// multi-threaded host), one request at a time with a hard deadline, death
// classification and process-group kill.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "worker/protocol.h"
#include "worker/shared_fds.h"

namespace accelopt::worker {

/// Default RLIMIT_AS per worker in bytes: 3/4 of physical memory, at least
/// 4 GiB. Full-size NKIBench kernels reach ~7 GB resident in the emulator
/// (docs/benchmarks/emulator-speed.txt), and address space runs above RSS.
uint64_t DefaultWorkerMemoryBytes();

/// Where a worker runs when WorkerConfig::executor is "slurm": as one Slurm
/// job step started with srun (docs/scale-out.md). Empty fields are left to
/// the cluster's defaults.
struct SlurmOptions {
  std::string partition;           ///< --partition
  std::string time;                ///< --time (Slurm's formats, e.g. "30", "2:00:00")
  int cpus_per_task = 1;           ///< --cpus-per-task
  std::string mem;                 ///< --mem (e.g. "8G")
  std::string gres;                ///< --gres (e.g. "neuron:1", "gpu:1")
  std::vector<std::string> extra;  ///< more srun arguments, as given
  std::string srun = "srun";       ///< the srun executable (PATH is searched)
};

/// srun's command line for worker `id` running `worker_argv`: the worker
/// speaks the usual protocol through srun's stdin (requests), stdout
/// (replies: a shell moves the worker's fd 3 there) and stderr (logs).
std::vector<std::string> SlurmCommand(const SlurmOptions& slurm, int id, const std::vector<std::string>& worker_argv);

/// How workers are started (shared by every worker of a pool).
struct WorkerConfig {
  std::string executable;                ///< binary with the `worker` subcommand; "" = this one
  std::string scratch_root;              ///< worker k writes only in <scratch_root>/w<k>
  std::vector<std::string> python_paths; ///< extra sys.path entries for the workers
  uint64_t memory_bytes = DefaultWorkerMemoryBytes();  ///< RLIMIT_AS per worker in bytes (cap of per-call limits)
  uint64_t cpu_seconds = 24 * 3600;      ///< RLIMIT_CPU backstop per worker in s
  bool single_thread_math = true;        ///< OPENBLAS/OMP/MKL_NUM_THREADS=1
  bool sandbox = true;                   ///< namespaces, Landlock, seccomp in the worker
  double startup_timeout_s = 120;        ///< spawn until "ready", in s
  std::string backend = "emulator";      ///< "emulator" | "neuron": what the workers load, which sandbox profile
  /// neuron: the NeuronCore of each worker (worker k, and any respawn of
  /// it, gets NEURON_RT_VISIBLE_CORES=neuron_cores[k]); empty = inherit.
  std::vector<int> neuron_cores;
  /// GPUs (worker k gets CUDA_VISIBLE_DEVICES=gpu_devices[k]); empty = inherit nothing.
  std::vector<int> gpu_devices;
  std::string executor = "local";        ///< "local" (a child process) or "slurm" (a job step through srun)
  SlurmOptions slurm;                    ///< for executor "slurm"
};

/// Outcome of one request.
struct CallOutcome {
  bool ok = false;
  nlohmann::json result;          ///< the function's return value when ok
  std::vector<std::string> blobs; ///< binary attachments of the result (see protocol.h)
  /// Or, when the worker handed over the candidate's sealed reply memfd
  /// (docs/isolation.md "Shared inputs and outputs"): the memfd, where its
  /// attachments start (bytes) and their sizes (bytes); `blobs` is then empty.
  std::shared_ptr<UniqueFd> reply_memfd;
  uint64_t reply_memfd_at = 0;
  std::vector<uint64_t> reply_memfd_sizes;
  std::string kind;               ///< error kind when !ok (timeout, crash, out_of_memory, ...)
  std::string message;            ///< human-readable error
  std::string traceback;          ///< Python traceback or the worker's last log lines
  nlohmann::json integrity = nlohmann::json::array();  ///< changes the worker found after the call
  bool worker_died = false;       ///< the worker process is gone (killed, crashed, exited)
  double wall_ms = 0;             ///< round trip in ms
};

/// One worker process. Not thread-safe: the pool hands it to one caller at a time.
class WorkerProcess {
 public:
  WorkerProcess(int id, const WorkerConfig& config);
  ~WorkerProcess();
  WorkerProcess(const WorkerProcess&) = delete;
  WorkerProcess& operator=(const WorkerProcess&) = delete;

  /// Spawns the process (returns at once; see WaitReady). Throws
  /// std::runtime_error if posix_spawn fails.
  void Start();
  /// Waits for the worker's ready line (at most config.startup_timeout_s).
  /// Returns false with *error set if it died or did not answer in time.
  bool WaitReady(std::string* error);
  /// True after Start() and before the process was seen dead or killed.
  bool Alive() const { return pid_ > 0; }
  /// True when sealed memfds can be passed to this worker (a local process
  /// with a descriptor channel; not a Slurm job step).
  bool SharesFds() const { return fd_channel_.get() >= 0; }
  /// Sandbox warnings the worker reported when it became ready.
  const std::vector<std::string>& warnings() const { return warnings_; }

  /// Sends one request; the worker runs it in a fresh candidate process
  /// that it kills after `timeout_s` seconds (reply kind "timeout"). The
  /// host waits 10 s longer, then SIGKILLs the worker's whole process group
  /// (also "timeout"). A candidate process that died is classified by the
  /// worker (SIGXCPU -> timeout, SIGSYS -> sandbox_violation, other signals
  /// and exits -> crash; the worker lives on); a worker that died is
  /// classified here the same way, with worker_died set. `blobs` travel
  /// after the request line as raw bytes (protocol.h). With
  /// request["shared"] = {"memfds": [fd, ...], "blobs": [[k, offset, bytes], ...]}
  /// the attachments are ranges of those sealed memfds instead, passed on the
  /// worker's descriptor channel (the caller keeps its descriptors).
  CallOutcome Call(const nlohmann::json& request, const std::vector<std::string>& blobs, double timeout_s);

  /// SIGKILLs the process group and reaps the process (idempotent).
  void Kill();
  /// For an idle worker: true if the process has exited (it is reaped at
  /// once, so no zombie is left, and its pipes are closed); false while it
  /// runs or when it was never started.
  bool ReapIfExited();
  int id() const { return id_; }
  pid_t pid() const { return pid_; }
  /// The directory this worker may write in.
  std::string Scratch() const;

 private:
  CallOutcome Dead(const std::string& context, double wall_ms);
  void ReadLogs(int fd);
  void ResetLogBudget();  // per call: log the first kLogBudget bytes of output
  std::string RecentLogs();
  int Reap();  // waitpid; returns the raw status (or -1)

  int id_;
  WorkerConfig config_;
  pid_t pid_ = -1;
  int to_worker_ = -1;
  UniqueFd fd_channel_;  // SOCK_SEQPACKET to the worker's fd 4: sealed memfds both ways
  std::unique_ptr<LineReader> replies_;
  std::thread log_thread_;
  std::mutex log_mu_;
  std::deque<std::string> recent_logs_;
  uint64_t log_bytes_ = 0;          // output logged during the current call
  uint64_t dropped_log_bytes_ = 0;  // output read and dropped during it
  std::vector<std::string> warnings_;
  uint64_t next_id_ = 1;
  bool ready_ = false;
};

/// The environment worker `id` starts with: PATH, locale and ACCELOPT_*
/// settings from an allow-list (never API keys or PYTHON*), a private
/// HOME/TMPDIR = `scratch`, one BLAS thread; for a neuron worker also
/// NEURON_*, LD_LIBRARY_PATH, VIRTUAL_ENV and NEURON_RT_VISIBLE_CORES =
/// config.neuron_cores[id]; with config.gpu_devices, CUDA_VISIBLE_DEVICES =
/// gpu_devices[id] ("NAME=value" entries).
std::vector<std::string> WorkerEnvironment(const WorkerConfig& config, int id, const std::string& scratch);

/// Parses "4G", "512M", "1.5G", "1048576" (bytes; K/M/G/T are powers of
/// 1024). Throws std::invalid_argument on anything else.
uint64_t ParseByteSize(const std::string& text);

/// Path of the running executable (/proc/self/exe resolved).
std::string SelfExecutable();

}  // namespace accelopt::worker
