#include "worker/worker_process.h"

#include <algorithm>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>
#include <stdexcept>

#include <spdlog/spdlog.h>

#include "core/run_dir.h"

extern char** environ;

namespace accelopt::worker {

uint64_t DefaultWorkerMemoryBytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page_size = ::sysconf(_SC_PAGESIZE);
  const uint64_t physical = (pages > 0 && page_size > 0) ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_size) : 0;
  return std::max<uint64_t>(4ull << 30, physical / 4 * 3);
}

namespace {

constexpr size_t kRecentLogLines = 30;
// A candidate's stdout/stderr: lines are cut to kMaxLogLine bytes before they
// are buffered, and of each call's output only the first kLogBudget bytes
// are logged; the rest is read, counted and dropped.
constexpr size_t kMaxLogLine = 4096;
constexpr uint64_t kLogBudget = 1u << 20;
// Longest reply header accepted from the worker (its zygote cuts a
// candidate's header to 16 MiB and every string in it to 256 KiB).
constexpr size_t kMaxReplyHeader = 64u << 20;
// The worker enforces a call's deadline itself (it kills the candidate
// process and answers `timeout`); the host waits this much longer before it
// kills the whole worker.
constexpr double kDeadlineGraceS = 10;
// A worker whose pipe or channel failed has this long to exit by itself before
// the host kills it (its exit status then says why it ended).
constexpr int kDeadGraceMs = 2000;
// Environment variables a worker inherits (no API keys, no PYTHON*).
const char* const kPassedEnv[] = {"PATH", "LANG", "LC_ALL", "LC_CTYPE", "ACCELOPT_PYTHON_PATH", "NEURON_RT_VISIBLE_CORES",
                                   "ACCELOPT_SPARE_WARM_UP", "ACCELOPT_PREFAULT", "ACCELOPT_SANDBOX_READ",
                                   "ACCELOPT_SANDBOX_WRITE", "ACCELOPT_NEURON_ROOT", "ACCELOPT_SECCOMP_AUDIT",
                                   "ACCELOPT_WORKER_TIMING", "ACCELOPT_CONTENT_CHECK", "ACCELOPT_VENV"};
// Also passed to neuron workers: the Neuron runtime's and compiler's settings
// (NEURON_*) and where the user's Neuron installation lives.
const char* const kNeuronEnv[] = {"LD_LIBRARY_PATH", "VIRTUAL_ENV"};

}  // namespace

std::vector<std::string> SlurmCommand(const SlurmOptions& slurm, int id, const std::vector<std::string>& worker_argv) {
  std::vector<std::string> argv = {slurm.srun, "--quiet", "--unbuffered", "--nodes=1", "--ntasks=1",
                                   "--kill-on-bad-exit=1", "--job-name=accelopt-w" + std::to_string(id),
                                   "--cpus-per-task=" + std::to_string(std::max(1, slurm.cpus_per_task))};
  if (!slurm.partition.empty()) argv.push_back("--partition=" + slurm.partition);
  if (!slurm.time.empty()) argv.push_back("--time=" + slurm.time);
  if (!slurm.mem.empty()) argv.push_back("--mem=" + slurm.mem);
  if (!slurm.gres.empty()) argv.push_back("--gres=" + slurm.gres);
  argv.insert(argv.end(), slurm.extra.begin(), slurm.extra.end());
  // The worker answers on fd 3 and logs on fd 1/2; srun relays stdout and
  // stderr, so a shell points fd 3 at stdout and stdout at stderr.
  argv.insert(argv.end(), {"/bin/sh", "-c", "exec 3>&1 1>&2; exec \"$@\"", "accelopt-worker"});
  argv.insert(argv.end(), worker_argv.begin(), worker_argv.end());
  return argv;
}

std::vector<std::string> WorkerEnvironment(const WorkerConfig& config, int id, const std::string& scratch) {
  std::vector<std::string> env;
  const bool neuron = config.backend == "neuron";
  for (const char* name : kPassedEnv) {
    if (neuron && std::string(name) == "NEURON_RT_VISIBLE_CORES" && !config.neuron_cores.empty()) continue;
    if (const char* value = std::getenv(name)) env.push_back(std::string(name) + "=" + value);
  }
  if (neuron) {
    for (const char* name : kNeuronEnv) {
      if (const char* value = std::getenv(name)) env.push_back(std::string(name) + "=" + value);
    }
    for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
      std::string text = *entry;
      if (text.rfind("NEURON_", 0) == 0 && text.rfind("NEURON_RT_VISIBLE_CORES=", 0) != 0) env.push_back(text);
    }
    if (!config.neuron_cores.empty()) {
      int core = config.neuron_cores[static_cast<size_t>(id) % config.neuron_cores.size()];
      env.push_back("NEURON_RT_VISIBLE_CORES=" + std::to_string(core));
    }
  }
  if (!config.gpu_devices.empty()) {
    int gpu = config.gpu_devices[static_cast<size_t>(id) % config.gpu_devices.size()];
    env.push_back("CUDA_VISIBLE_DEVICES=" + std::to_string(gpu));
  }
  env.push_back("HOME=" + scratch);
  env.push_back("TMPDIR=" + scratch);
  if (config.single_thread_math) {
    for (const char* name : {"OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"}) env.push_back(std::string(name) + "=1");
  }
  return env;
}

namespace {

// A pipe whose ends are >= 10 and close-on-exec (so dup2 onto 0..3 never collides).
void MakePipe(int fds[2]) {
  int raw[2];
  if (pipe2(raw, O_CLOEXEC) != 0) throw std::runtime_error(std::string("pipe2: ") + std::strerror(errno));
  for (int i = 0; i < 2; ++i) {
    fds[i] = fcntl(raw[i], F_DUPFD_CLOEXEC, 10);
    close(raw[i]);
  }
  WidenPipe(fds[1]);
}

std::string RandomNonce() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  char text[33];
  std::snprintf(text, sizeof(text), "%016llx%016llx", static_cast<unsigned long long>(rng()),
                static_cast<unsigned long long>(rng()));
  return text;
}

double MsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

uint64_t ParseByteSize(const std::string& text) {
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    throw std::invalid_argument("not a size: '" + text + "' (use e.g. 4G, 512M or bytes)");
  }
  std::string suffix = text.substr(used);
  double scale = 1;
  if (suffix == "" || suffix == "B") scale = 1;
  else if (suffix == "K" || suffix == "k" || suffix == "KiB") scale = 1024.0;
  else if (suffix == "M" || suffix == "MiB") scale = 1024.0 * 1024;
  else if (suffix == "G" || suffix == "GiB") scale = 1024.0 * 1024 * 1024;
  else if (suffix == "T" || suffix == "TiB") scale = 1024.0 * 1024 * 1024 * 1024;
  else throw std::invalid_argument("not a size: '" + text + "' (suffixes: K, M, G, T)");
  if (!(value > 0) || !std::isfinite(value)) throw std::invalid_argument("size must be positive: '" + text + "'");
  return static_cast<uint64_t>(value * scale);
}

std::string SelfExecutable() {
  std::error_code error;
  auto path = std::filesystem::read_symlink("/proc/self/exe", error);
  return error ? std::string("/proc/self/exe") : path.string();
}

WorkerProcess::WorkerProcess(int id, const WorkerConfig& config) : id_(id), config_(config) {}

WorkerProcess::~WorkerProcess() { Kill(); }

std::string WorkerProcess::Scratch() const {
  return (std::filesystem::path(config_.scratch_root) / ("w" + std::to_string(id_))).string();
}

void WorkerProcess::Start() {
  Kill();
  EnsurePrivateDir(Scratch());  // refuses a planted symlink: the worker may write only here
  int requests[2], replies[2], logs[2];
  MakePipe(requests);
  MakePipe(replies);
  MakePipe(logs);

  const bool slurm = config_.executor == "slurm";
  // Sealed memfds travel on a socket pair (fd 4 in the worker); srun cannot relay one.
  int channel[2] = {-1, -1};
  if (!slurm) {
    MakeFdChannel(channel);
    for (int& fd : channel) {
      int high = fcntl(fd, F_DUPFD_CLOEXEC, 10);  // >= 10, so dup2 onto 0..4 never collides
      if (high >= 0) {
        close(fd);
        fd = high;
      }
    }
  }
  std::string executable = config_.executable.empty() ? SelfExecutable() : config_.executable;
  // Under Slurm the worker's parent is slurmstepd, not this process: no parent check.
  std::vector<std::string> args = {executable, "worker", "--id", std::to_string(id_), "--parent",
                                   slurm ? "0" : std::to_string(getpid()), "--scratch", Scratch(), "--memory",
                                   std::to_string(config_.memory_bytes), "--cpu", std::to_string(config_.cpu_seconds)};
  for (const auto& path : config_.python_paths) {
    args.push_back("--python-path");
    args.push_back(path);
  }
  if (!config_.sandbox) args.push_back("--no-sandbox");
  args.push_back("--backend");
  args.push_back(config_.backend);
  std::vector<std::string> env = WorkerEnvironment(config_, id_, Scratch());
  if (slurm) {
    args = SlurmCommand(config_.slurm, id_, args);
    for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
      std::string text = *entry;  // srun's own settings (SLURM_CONF, ...)
      if (text.rfind("SLURM_", 0) == 0) env.push_back(text);
    }
  }
  std::vector<char*> argv, envp;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, requests[0], 0);
  if (slurm) {  // srun relays stdin, stdout and stderr only: replies travel on stdout
    posix_spawn_file_actions_adddup2(&actions, replies[1], 1);
    posix_spawn_file_actions_adddup2(&actions, logs[1], 2);
    posix_spawn_file_actions_addclosefrom_np(&actions, 3);
  } else {
    posix_spawn_file_actions_adddup2(&actions, logs[1], 1);
    posix_spawn_file_actions_adddup2(&actions, logs[1], 2);
    posix_spawn_file_actions_adddup2(&actions, replies[1], 3);
    posix_spawn_file_actions_adddup2(&actions, channel[1], 4);
    posix_spawn_file_actions_addclosefrom_np(&actions, 5);
  }
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t all, none;
  sigfillset(&all);
  sigemptyset(&none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setpgroup(&attr, 0);  // own process group: killed as a whole
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
  pid_t pid = -1;
  int rc = slurm ? posix_spawnp(&pid, args[0].c_str(), &actions, &attr, argv.data(), envp.data())
                 : posix_spawn(&pid, executable.c_str(), &actions, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  close(requests[0]);
  close(replies[1]);
  close(logs[1]);
  if (channel[1] >= 0) close(channel[1]);
  if (rc != 0) {
    if (channel[0] >= 0) close(channel[0]);
    close(requests[1]);
    close(replies[0]);
    close(logs[0]);
    throw std::runtime_error("cannot start worker " + std::to_string(id_) + " (" + args[0] + "): " + std::strerror(rc));
  }
  pid_ = pid;
  to_worker_ = requests[1];
  fd_channel_ = UniqueFd(channel[0]);
  replies_ = std::make_unique<LineReader>(replies[0]);
  replies_->set_max_line(kMaxReplyHeader);
  ready_ = false;
  {
    std::lock_guard<std::mutex> lock(log_mu_);
    recent_logs_.clear();
  }
  log_thread_ = std::thread([this, fd = logs[0]] { ReadLogs(fd); });
  spdlog::debug("worker {}: started pid {}", id_, pid_);
}

void WorkerProcess::ReadLogs(int fd) {
  LineReader reader(fd);
  reader.set_max_line(kMaxLogLine);
  std::string line;
  uint64_t discarded = 0;
  while (reader.ReadLine(&line, -1) == LineReader::kLine) {
    std::lock_guard<std::mutex> lock(log_mu_);
    uint64_t size = line.size() + 1 + (reader.discarded() - discarded);
    discarded = reader.discarded();
    if (log_bytes_ + size > kLogBudget) {
      dropped_log_bytes_ += size;
      continue;
    }
    log_bytes_ += size;
    spdlog::debug("[worker {}] {}", id_, line);
    recent_logs_.push_back(line);
    if (recent_logs_.size() > kRecentLogLines) recent_logs_.pop_front();
  }
  close(fd);
}

void WorkerProcess::ResetLogBudget() {
  std::lock_guard<std::mutex> lock(log_mu_);
  if (dropped_log_bytes_ > 0)
    spdlog::warn("worker {}: a candidate wrote {} bytes of output beyond the {} KiB kept", id_, dropped_log_bytes_,
                 kLogBudget >> 10);
  log_bytes_ = 0;
  dropped_log_bytes_ = 0;
  recent_logs_.clear();
}

std::string WorkerProcess::RecentLogs() {
  std::lock_guard<std::mutex> lock(log_mu_);
  std::string text;
  for (const auto& line : recent_logs_) text += line + "\n";
  return text;
}

bool WorkerProcess::WaitReady(std::string* error) {
  if (ready_) return true;
  if (pid_ <= 0) {
    *error = "worker not started";
    return false;
  }
  auto start = std::chrono::steady_clock::now();
  std::string line;
  auto status = replies_->ReadLine(&line, static_cast<long>(config_.startup_timeout_s * 1000));
  if (status != LineReader::kLine) {
    Kill();
    *error = status == LineReader::kTimeout ? "worker did not start within " + std::to_string(config_.startup_timeout_s) + " s"
                                            : "worker exited while starting";
    std::string logs = RecentLogs();
    if (!logs.empty()) *error += ":\n" + logs;
    return false;
  }
  auto hello = nlohmann::json::parse(line, nullptr, false);
  if (!hello.is_object() || !hello.value("ready", false)) {
    Kill();
    *error = "worker failed to start: " + (hello.is_object() ? hello.value("error", line) : line);
    return false;
  }
  warnings_.clear();
  for (const auto& w : hello.value("warnings", nlohmann::json::array())) warnings_.push_back(w.get<std::string>());
  ready_ = true;
  spdlog::debug("worker {}: ready in {:.0f} ms", id_, MsSince(start));
  return true;
}

int WorkerProcess::Reap() {
  if (pid_ <= 0) return -1;
  int status = -1;
  while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

void WorkerProcess::Kill() {
  if (pid_ > 0 && config_.executor == "slurm") {
    // srun cancels its job step on SIGTERM; SIGKILL would leave the step to
    // notice the lost connection by itself.
    kill(pid_, SIGTERM);
    for (int i = 0; i < 50 && waitpid(pid_, nullptr, WNOHANG) == 0; ++i) usleep(100 * 1000);
  }
  if (pid_ > 0) {
    kill(-pid_, SIGKILL);
    kill(pid_, SIGKILL);
    Reap();
    pid_ = -1;
  }
  if (to_worker_ >= 0) close(to_worker_);
  to_worker_ = -1;
  fd_channel_.Reset();
  if (replies_) close(replies_->fd());
  replies_.reset();
  if (log_thread_.joinable()) log_thread_.join();
  ready_ = false;
}

bool WorkerProcess::ReapIfExited() {
  if (pid_ <= 0) return false;
  int status = 0;
  pid_t done = waitpid(pid_, &status, WNOHANG);
  if (done != pid_) return false;
  kill(-pid_, SIGKILL);  // anything left in its group
  spdlog::warn("worker {}: exited while idle ({}); replacing it", id_,
               WIFSIGNALED(status) ? std::string("signal ") + std::to_string(WTERMSIG(status))
                                   : "status " + std::to_string(WEXITSTATUS(status)));
  pid_ = -1;
  Kill();  // closes the pipes and joins the log reader
  return true;
}

CallOutcome WorkerProcess::Dead(const std::string& context, double wall_ms) {
  // A pipe or the descriptor channel failed: the worker is gone or going. Reap it
  // and say why it ended; one still alive after kDeadGraceMs is killed first, so
  // the host never waits on a worker that did not die.
  int status = -1;
  for (int waited = 0; pid_ > 0; waited += 10) {
    pid_t done = waitpid(pid_, &status, WNOHANG);
    if (done == pid_ || (done < 0 && errno != EINTR)) break;
    if (waited >= kDeadGraceMs) {
      kill(pid_, SIGKILL);
      status = Reap();
      break;
    }
    usleep(10 * 1000);
  }
  kill(-pid_, SIGKILL);  // anything left in its group
  pid_ = -1;
  if (log_thread_.joinable()) log_thread_.join();
  CallOutcome out;
  out.worker_died = true;
  out.wall_ms = wall_ms;
  out.traceback = RecentLogs();
  if (status >= 0 && WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    std::string name = sigabbrev_np(sig) ? std::string("SIG") + sigabbrev_np(sig) : std::to_string(sig);
    if (sig == SIGXCPU) {
      out.kind = "timeout";
      out.message = "CPU time limit exceeded (" + name + ")";
    } else if (sig == SIGSYS) {
      out.kind = "sandbox_violation";
      out.message = "forbidden system call (" + name + ")";
    } else {
      out.kind = "crash";
      out.message = "worker killed by signal " + name;
    }
  } else if (status >= 0 && WIFEXITED(status)) {
    out.kind = "crash";
    out.message = "worker exited with status " + std::to_string(WEXITSTATUS(status));
  } else {
    out.kind = "crash";
    out.message = "worker vanished";
  }
  out.message += " " + context;
  if (replies_) close(replies_->fd());
  replies_.reset();
  if (to_worker_ >= 0) close(to_worker_);
  to_worker_ = -1;
  fd_channel_.Reset();
  ready_ = false;
  return out;
}

CallOutcome WorkerProcess::Call(const nlohmann::json& request_in, const std::vector<std::string>& blobs,
                                double timeout_s) {
  auto start = std::chrono::steady_clock::now();
  std::string error;
  if (!WaitReady(&error)) {
    CallOutcome out;
    out.kind = "worker_error";
    out.message = error;
    out.worker_died = true;
    return out;
  }
  nlohmann::json request = request_in;
  uint64_t id = next_id_++;
  std::string nonce = RandomNonce();
  request["id"] = id;
  request["nonce"] = nonce;
  if (!request.contains("scratch")) request["scratch"] = Scratch();
  request["deadline_s"] = std::max(0.001, timeout_s);
  ResetLogBudget();
  if (request.contains("shared")) {
    // The sealed memfds holding the inputs go first, tagged with the nonce; the
    // request line then says only how many there are.
    std::vector<int> fds = request["shared"].value("memfds", std::vector<int>{});
    if (!SharesFds() || fds.empty() || fds.size() > kMaxSharedFds) {
      CallOutcome out;
      out.kind = "worker_error";
      out.message = SharesFds() ? "a request shares 1 to " + std::to_string(kMaxSharedFds) + " memfds"
                                : "this worker cannot receive shared inputs (no descriptor channel)";
      return out;
    }
    if (!SendFds(fd_channel_.get(), fds, nonce)) {
      int why = errno;
      if (why == EPIPE || why == ECONNRESET || why == ECONNREFUSED)
        return Dead("while receiving the shared inputs", MsSince(start));
      // The host's side failed (e.g. EBADF: a memfd closed too early): not the worker's fault,
      // but its channel may now hold half a message, so it is replaced.
      Kill();
      CallOutcome out;
      out.kind = "worker_error";
      out.message = std::string("cannot pass the shared inputs to the worker: ") + std::strerror(why) +
                    "; worker replaced";
      out.worker_died = true;
      out.wall_ms = MsSince(start);
      return out;
    }
    request["shared"]["memfds"] = fds.size();
  }
  if (!WriteFrame(to_worker_, std::move(request), blobs)) return Dead("while receiving the request", MsSince(start));

  long timeout_ms = static_cast<long>((std::max(0.001, timeout_s) + kDeadlineGraceS) * 1000);
  while (true) {
    std::string line;
    long left = timeout_ms - static_cast<long>(MsSince(start));
    auto status = left <= 0 ? LineReader::kTimeout : replies_->ReadLine(&line, left);
    if (status == LineReader::kTimeout) {
      Kill();
      CallOutcome out;
      out.kind = "timeout";
      out.message = "no answer within " + std::to_string(timeout_s).substr(0, std::to_string(timeout_s).find('.') + 3) +
                    " s; worker killed";
      out.worker_died = true;
      out.wall_ms = MsSince(start);
      return out;
    }
    if (status != LineReader::kLine) return Dead("during the call", MsSince(start));
    if (line.size() >= kMaxReplyHeader) {
      Kill();
      CallOutcome out;
      out.kind = "worker_error";
      out.message = "reply header over " + std::to_string(kMaxReplyHeader >> 20) + " MiB; worker killed";
      out.worker_died = true;
      out.wall_ms = MsSince(start);
      return out;
    }
    auto reply = nlohmann::json::parse(line, nullptr, false);
    // A line that is not our reply (wrong nonce: forged or stale) is ignored.
    if (!reply.is_object() || reply.value("nonce", "") != nonce || reply.value("id", uint64_t{0}) != id) {
      spdlog::warn("worker {}: ignoring a reply line that does not match the request", id_);
      continue;
    }
    CallOutcome out;
    // The reply's attachments; a worker cannot hold more than its address-space cap.
    std::vector<uint64_t> sizes;
    try {
      sizes = BlobSizes(reply, config_.memory_bytes ? config_.memory_bytes : UINT64_MAX);
    } catch (const std::invalid_argument& error) {
      Kill();
      out.kind = "worker_error";
      out.message = std::string("malformed reply: ") + error.what() + "; worker killed";
      out.worker_died = true;
      out.wall_ms = MsSince(start);
      return out;
    }
    if (reply.contains("reply_memfd")) {
      // The attachments stayed in the candidate's sealed reply memfd (docs/isolation.md).
      std::vector<UniqueFd> received;
      std::string why;
      const auto& shared = reply["reply_memfd"];
      if (!shared.is_object() || !RecvFds(fd_channel_.get(), 1, nonce, 10000, &received, &why) ||
          !IsSealedReadOnly(received[0].get(), &why)) {
        Kill();
        out.kind = "worker_error";
        out.message = "the reply's memfd: " + why + "; worker killed";
        out.worker_died = true;
        out.wall_ms = MsSince(start);
        return out;
      }
      out.reply_memfd = std::make_shared<UniqueFd>(std::move(received[0]));
      out.reply_memfd_at = shared.value("at", uint64_t{0});
      out.reply_memfd_sizes = sizes;
      sizes.clear();
    }
    for (uint64_t size : sizes) {
      out.blobs.emplace_back();
      long left_ms = timeout_ms - static_cast<long>(MsSince(start));
      auto got = left_ms <= 0 ? LineReader::kTimeout : replies_->ReadExact(&out.blobs.back(), size, left_ms);
      if (got == LineReader::kTimeout) {
        Kill();
        out = CallOutcome{};
        out.kind = "timeout";
        out.message = "reply not received within the time limit; worker killed";
        out.worker_died = true;
        out.wall_ms = MsSince(start);
        return out;
      }
      if (got != LineReader::kLine) return Dead("while sending its reply", MsSince(start));
    }
    out.wall_ms = MsSince(start);
    out.ok = reply.value("ok", false);
    if (out.ok) {
      out.result = reply.value("result", nlohmann::json());
    } else {
      auto err = reply.value("error", nlohmann::json::object());
      out.kind = err.value("kind", "python_error");
      out.message = err.value("message", "worker call failed");
      out.traceback = err.value("traceback", "");
      // A candidate process that died: its last log lines (faulthandler's
      // traceback of a segfault, a flood's head) say why.
      if (reply.value("candidate_died", false) && out.traceback.empty()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));  // let the log reader catch up
        out.traceback = RecentLogs();
      }
    }
    out.integrity = reply.value("integrity", nlohmann::json::array());
    return out;
  }
}

}  // namespace accelopt::worker
