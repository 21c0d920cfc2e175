#include "worker/pool.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <thread>

#include <spdlog/spdlog.h>

#include "worker/shared_fds.h"

namespace accelopt::worker {

CallLimits ParseLimits(const nlohmann::json& limits) {
  CallLimits out;
  if (!limits.is_object()) return out;
  if (limits.contains("timeout_s") && !limits["timeout_s"].is_null()) {
    if (!limits["timeout_s"].is_number() || limits["timeout_s"].get<double>() < 0)
      throw std::invalid_argument("limits.timeout_s must be a non-negative number of seconds");
    out.timeout_s = limits["timeout_s"].get<double>();
  }
  if (limits.contains("memory_bytes") && !limits["memory_bytes"].is_null()) {
    if (!limits["memory_bytes"].is_number() || limits["memory_bytes"].get<double>() < 0)
      throw std::invalid_argument("limits.memory_bytes must be a non-negative number of bytes");
    out.memory_bytes = static_cast<uint64_t>(limits["memory_bytes"].get<double>());
  }
  return out;
}

WorkerPool::WorkerPool(PoolOptions options) : options_(std::move(options)) {
  int count = options_.workers > 0 ? options_.workers : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  // One worker per GPU / per NeuronCore (fewer when --workers asks for fewer).
  const auto& gpus = options_.config.gpu_devices;
  if (!gpus.empty())
    count = options_.workers > 0 ? std::min<int>(options_.workers, static_cast<int>(gpus.size()))
                                 : static_cast<int>(gpus.size());
  const auto& cores = options_.config.neuron_cores;
  if (options_.config.backend == "neuron" && !cores.empty())
    count = options_.workers > 0 ? std::min<int>(options_.workers, static_cast<int>(cores.size()))
                                 : static_cast<int>(cores.size());
  for (int i = 0; i < count; ++i) {
    workers_.push_back(std::make_unique<WorkerProcess>(i, options_.config));
    busy_.push_back(false);
  }
  spawner_ = std::thread([this] { SpawnerLoop(); });
  try {
    for (auto& worker : workers_) {
      Spawn(*worker);
      ++stats_.spawned;
    }
  } catch (...) {
    StopSpawner();  // a joinable std::thread must not outlive a failed constructor
    for (auto& worker : workers_) worker->Kill();
    throw;
  }
}

WorkerPool::~WorkerPool() {
  StopSpawner();
  for (auto& worker : workers_) worker->Kill();
}

void WorkerPool::StopSpawner() {
  if (!spawner_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(spawn_mu_);
    stopping_ = true;
  }
  spawn_cv_.notify_all();
  spawner_.join();
}

void WorkerPool::SpawnerLoop() {
  while (true) {
    std::packaged_task<void()> task;
    {
      std::unique_lock<std::mutex> lock(spawn_mu_);
      bool woken = spawn_cv_.wait_for(lock, std::chrono::seconds(1),
                                      [&] { return stopping_ || !spawn_tasks_.empty(); });
      if (stopping_ && spawn_tasks_.empty()) return;
      if (!woken) {
        lock.unlock();
        ReplaceDeadIdleWorkers();
        continue;
      }
      task = std::move(spawn_tasks_.front());
      spawn_tasks_.pop_front();
    }
    task();
  }
}

void WorkerPool::ReplaceDeadIdleWorkers() {
  for (size_t slot = 0; slot < workers_.size(); ++slot) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (busy_[slot]) continue;
      busy_[slot] = true;  // held while we look, so no call takes it meanwhile
    }
    bool replaced = false;
    if (workers_[slot]->ReapIfExited()) {
      try {
        workers_[slot]->Start();  // this is the spawner thread (see Spawn)
        replaced = true;
      } catch (const std::exception& error) {
        spdlog::error("worker {}: respawn failed: {}", slot, error.what());
      }
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      busy_[slot] = false;
      if (replaced) {
        ++stats_.spawned;
        ++stats_.crashes;
      }
    }
    free_.notify_one();
  }
}

void WorkerPool::Spawn(WorkerProcess& worker) {
  std::packaged_task<void()> task([&worker] { worker.Start(); });
  std::future<void> done = task.get_future();
  {
    std::lock_guard<std::mutex> lock(spawn_mu_);
    if (stopping_) throw std::runtime_error("worker pool is shutting down");
    spawn_tasks_.push_back(std::move(task));
  }
  spawn_cv_.notify_one();
  done.get();
}

int WorkerPool::Acquire() {
  std::unique_lock<std::mutex> lock(mu_);
  free_.wait(lock, [&] { return std::find(busy_.begin(), busy_.end(), false) != busy_.end(); });
  int slot = static_cast<int>(std::find(busy_.begin(), busy_.end(), false) - busy_.begin());
  if (core_held_.size() == busy_.size()) {
    for (size_t i = 0; i < busy_.size(); ++i) {
      if (!busy_[i] && !core_held_[i]) {
        slot = static_cast<int>(i);
        break;
      }
    }
  }
  busy_[slot] = true;
  return slot;
}

void WorkerPool::Release(int slot) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    busy_[slot] = false;
  }
  free_.notify_one();
}

CallOutcome WorkerPool::CallOnce(int slot, const nlohmann::json& request, const std::vector<std::string>& blobs,
                                 double timeout_s) {
  WorkerProcess& worker = *workers_[slot];
  if (!worker.Alive()) {
    Spawn(worker);
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.spawned;
  }
  std::string error;
  if (!worker.WaitReady(&error)) {
    // One more try with a fresh process before giving up on the call.
    Spawn(worker);
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.spawned;
    }
    if (!worker.WaitReady(&error)) {
      CallOutcome out;
      out.kind = "worker_error";
      out.message = "worker " + std::to_string(worker.id()) + " cannot start: " + error;
      return out;
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!warned_) {
      warned_ = true;
      warnings_ = worker.warnings();
      for (const auto& warning : warnings_) spdlog::warn("worker sandbox degraded: {}", warning);
    }
  }
  CallOutcome out = worker.Call(request, blobs, timeout_s);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (out.kind == "timeout") ++stats_.timeouts;
    else if (out.kind == "crash" || out.kind == "sandbox_violation") ++stats_.crashes;
    else if (out.worker_died) ++stats_.restarts;
  }
  if (out.worker_died) {
    // Respawn now so the next call finds it (nearly) ready.
    try {
      Spawn(worker);
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.spawned;
    } catch (const std::exception& e) {
      spdlog::error("worker {}: respawn failed: {}", worker.id(), e.what());
    }
  }
  return out;
}

CallOutcome WorkerPool::Call(const std::string& module, const std::string& function, const nlohmann::json& arg,
                             const CallLimits& limits, const std::vector<std::string>* blobs, const WhileHeld& while_held,
                             const nlohmann::json& transfer) {
  double timeout_s = limits.timeout_s > 0 ? limits.timeout_s : options_.default_timeout_s;
  nlohmann::json worker_limits = {{"cpu_s", timeout_s * 2 + 5}};
  if (limits.memory_bytes > 0) worker_limits["memory_bytes"] = limits.memory_bytes;
  nlohmann::json request = {{"module", module}, {"function", function}, {"arg", arg}, {"limits", worker_limits},
                            {"packed", blobs != nullptr}};
  static const std::vector<std::string> kNoBlobs;
  std::vector<std::string> read_back;  // a Slurm pool's shared inputs, read into blobs
  if (transfer.is_object() && transfer.contains("shared")) {
    if (SharesFds()) {
      request["shared"] = transfer["shared"];
    } else {
      read_back = ReadSharedRanges(transfer["shared"]);
      blobs = &read_back;
      request["packed"] = true;
    }
  }
  if (transfer.is_object() && transfer.value("reply_memfd", false) && SharesFds())
    request["reply_memfd_min_bytes"] = transfer.value("reply_min_bytes", uint64_t{0});
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.calls;
  }
  CallOutcome out;
  int device_retries = 0;
  for (int attempt = 1; attempt <= 2; ++attempt) {
    int slot = Acquire();
    try {
      out = CallOnce(slot, request, blobs ? *blobs : kNoBlobs, timeout_s);
      if (while_held && out.ok) while_held(out, workers_[static_cast<size_t>(slot)]->Scratch(), NeuronCoreOf(slot));
    } catch (const std::exception& error) {
      out = CallOutcome{};
      out.kind = "worker_error";
      out.message = error.what();
    }
    Release(slot);
    // The runtime found the worker's NeuronCore held by another process (accelopt.backends.
    // neuron_errors: device_unavailable): not the kernel's fault; run it again on another core.
    if (DeviceUnavailable(out) && static_cast<size_t>(device_retries) + 1 < workers_.size()) {
      ++device_retries;
      --attempt;  // a crash retry stays available
      std::lock_guard<std::mutex> lock(mu_);
      if (core_held_.size() != busy_.size()) core_held_.assign(busy_.size(), false);
      core_held_[static_cast<size_t>(slot)] = true;
      ++stats_.retries;
      spdlog::warn("{}.{}: NeuronCore {} is held by another process; retrying on another core", module, function,
                   NeuronCoreOf(slot));
      continue;
    }
    bool killed_worker = out.worker_died && out.kind == "crash";
    if (!killed_worker) break;
    if (attempt == 1) {
      spdlog::warn("{}.{}: worker crashed ({}); retrying once on a fresh worker", module, function, out.message);
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.retries;
    } else {
      out.message += " (killed two workers; not retried again)";
    }
  }
  return out;
}

bool WorkerPool::DeviceUnavailable(const CallOutcome& out) const {
  if (options_.config.backend != "neuron" || !out.ok || !out.result.is_object()) return false;
  const nlohmann::json none;
  const auto& error = out.result.contains("error") ? out.result["error"] : none;
  if (error.is_object() && error.value("kind", "") == "device_unavailable") return true;
  const auto& profile = out.result.contains("device_profile") ? out.result["device_profile"] : none;
  return profile.is_object() && profile.value("kind", "") == "device_unavailable";
}

PoolStats WorkerPool::Stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

pid_t WorkerPool::WorkerPid(int slot) const {
  std::lock_guard<std::mutex> lock(mu_);
  return workers_.at(static_cast<size_t>(slot))->pid();
}

std::vector<std::string> WorkerPool::Warnings() const {
  std::lock_guard<std::mutex> lock(mu_);
  return warnings_;
}

}  // namespace accelopt::worker
