#include "worker/isolated_call.h"

#include <fcntl.h>

#include <algorithm>
#include <cstdlib>
#include <chrono>
#include <deque>
#include <filesystem>
#include <future>
#include <map>
#include <mutex>

#include <spdlog/spdlog.h>

#include "core/errors.h"
#include "core/run_dir.h"
#include "plugin/host_services.h"
#include "python/interpreter.h"

namespace accelopt::worker {
namespace {

// Most worker rounds of one isolated call: passes of input sets plus timing rounds.
constexpr int kMaxRounds = 64;

// The outcome as accelopt.sandbox.trusted.finish reads it; wall_ms: the worker call's round trip.
nlohmann::json OutcomeJson(const CallOutcome& outcome) {
  nlohmann::json out;
  if (outcome.ok && outcome.reply_memfd) {
    // The outputs stayed in the candidate's sealed reply memfd: accelopt.sandbox.sealed maps it
    // (the descriptor stays this process's; it is closed when `outcome` goes).
    out = {{"ok", true}, {"result", outcome.result}, {"integrity", outcome.integrity},
           {"reply_memfd",
            {{"fd", outcome.reply_memfd->get()}, {"at", outcome.reply_memfd_at}, {"sizes", outcome.reply_memfd_sizes}}}};
  } else if (outcome.ok) {
    out = {{"ok", true}, {"result", outcome.result}, {"integrity", outcome.integrity}};
  } else {
    out = {{"ok", false},
           {"error", {{"kind", outcome.kind}, {"message", outcome.message}, {"traceback", outcome.traceback}}},
           {"integrity", outcome.integrity}};
  }
  out["wall_ms"] = outcome.wall_ms;
  return out;
}

// A worker call running on its own thread. It holds its own duplicates of the job's
// memfds, so they stay valid whatever the trusted side closes meanwhile.
struct PassInFlight {
  std::vector<UniqueFd> memfds;
  std::future<CallOutcome> outcome;
};

std::unique_ptr<PassInFlight> Launch(WorkerPool& pool, const nlohmann::json& job, std::vector<std::string> blobs,
                                     const CallLimits& limits, uint64_t share_min_bytes) {
  auto pass = std::make_unique<PassInFlight>();
  nlohmann::json transfer = {{"reply_memfd", true}, {"reply_min_bytes", share_min_bytes}};
  if (job.contains("shared")) {
    nlohmann::json shared = job["shared"];
    nlohmann::json numbers = nlohmann::json::array();
    for (const auto& fd : shared.value("memfds", nlohmann::json::array())) {
      int copy = fd.is_number_integer() ? fcntl(fd.get<int>(), F_DUPFD_CLOEXEC, 0) : -1;
      if (copy < 0) throw StageError("worker_error", "a pass's shared inputs name no open memfd");
      pass->memfds.emplace_back(copy);
      numbers.push_back(copy);
    }
    shared["memfds"] = numbers;
    transfer["shared"] = shared;
  }
  pass->outcome = std::async(std::launch::async, [&pool, job, blobs = std::move(blobs), limits, transfer]() {
    return pool.Call(job.value("module", ""), job.value("function", ""), job.value("arg", nlohmann::json()), limits,
                     &blobs, nullptr, transfer);
  });
  return pass;
}

// The passes of one profile call, two at a time on two workers (limits.parallel_passes):
// the next pass is sent (trusted.ahead) while the current one runs; outcomes are judged
// in pass order. Returns finish's final answer.
nlohmann::json ParallelPasses(WorkerPool& pool, const std::string& token, nlohmann::json job,
                              std::vector<std::string> job_blobs, const CallLimits& call_limits,
                              uint64_t share_min_bytes) {
  const auto first_sent = std::chrono::steady_clock::now();
  auto remaining = [&] {
    CallLimits limits = call_limits;
    if (call_limits.timeout_s > 0) {
      double spent_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - first_sent).count();
      limits.timeout_s = std::max(1.0, call_limits.timeout_s - spent_s);
    }
    return limits;
  };
  std::deque<std::unique_ptr<PassInFlight>> in_flight;
  in_flight.push_back(Launch(pool, job, std::move(job_blobs), call_limits, share_min_bytes));
  for (int round = 0; round < kMaxRounds; ++round) {
    if (in_flight.size() < 2) {
      python::Packed extra = python::CallPacked(accelopt::api::kSandboxAhead, {{{"token", token}}, {}});
      if (extra.value.contains("worker"))
        in_flight.push_back(Launch(pool, extra.value["worker"], std::move(extra.blobs), remaining(), share_min_bytes));
    }
    CallOutcome outcome = in_flight.front()->outcome.get();
    in_flight.pop_front();
    python::Packed judged = python::CallPacked(
        accelopt::api::kSandboxFinish,
        {{{"token", token}, {"outcome", OutcomeJson(outcome)}}, std::move(outcome.blobs)});
    if (judged.value.value("next_pass", false)) {
      in_flight.push_back(Launch(pool, judged.value["worker"], std::move(judged.blobs), remaining(), share_min_bytes));
    } else if (judged.value.value("pending", false)) {
      if (in_flight.empty()) throw StageError("worker_error", "the trusted harness waits for a pass never sent");
    } else {
      for (auto& pass : in_flight) pass->outcome.wait();  // a call answered early (a wrong seed) lets them end
      return judged.value;
    }
  }
  for (auto& pass : in_flight) pass->outcome.wait();
  throw StageError("worker_error", "the trusted harness kept asking for more worker rounds");
}

}  // namespace

uint64_t ShareMinBytes() {
  const char* text = std::getenv("ACCELOPT_SHARE_MIN_BYTES");
  if (text == nullptr || *text == '\0') return kDefaultShareMinBytes;
  try {
    return ParseByteSize(text);
  } catch (const std::invalid_argument&) {
    return std::string(text) == "0" ? 0 : kDefaultShareMinBytes;
  }
}

void LimitHostBlas() {
  try {
    nlohmann::json previous = python::CallJson("nki_emu.blas_threads", "set_threads", 1);
    spdlog::debug("host BLAS threads: {} -> 1 while the worker pool runs", previous.dump());
  } catch (const std::exception& error) {
    spdlog::debug("cannot limit the host's BLAS threads: {}", error.what());
  }
}

namespace {

// Hardware timing: neuron-profile on the files the candidate left, run by
// the host while the worker is still held (accelopt.backends.device_profile).
// `core`: the held worker's NeuronCore, where timing mode "capture" runs the NEFF; `target`: as compiled.
void ProfileDeviceArtifacts(CallOutcome& outcome, const std::string& scratch, double timeout_s, int core,
                            const std::string& target) {
  if (!outcome.result.is_object() || !outcome.result.contains("device_artifacts")) return;
  nlohmann::json request = {{"scratch", scratch}, {"artifacts", outcome.result["device_artifacts"]},
                            {"target", target}};
  if (core >= 0) request["core"] = core;
  if (timeout_s > 0) request["timeout_s"] = timeout_s;
  try {
    outcome.result["device_profile"] = python::CallJson(accelopt::api::kDeviceProfileArtifacts, request);
  } catch (const std::exception& error) {
    outcome.result["device_profile"] = {{"error", std::string("cannot profile on the host: ") + error.what()}};
  }
}

}  // namespace

nlohmann::json IsolatedCall(const PoolForBackend& pools, const std::string& module, const std::string& function,
                            const nlohmann::json& arg, const nlohmann::json& limits) {
  CallLimits call_limits;
  try {
    call_limits = ParseLimits(limits);
  } catch (const std::invalid_argument& error) {
    throw StageError("config_error", error.what());
  }
  // shared_inputs: the inputs travel in a sealed memfd (docs/isolation.md "Shared inputs and outputs"),
  // as do the outputs, from ShareMinBytes() bytes on.
  const uint64_t share_min_bytes = ShareMinBytes();
  nlohmann::json options = {{"static_checks", limits.is_object() ? limits.value("static_checks", true) : true},
                            {"shared_inputs", true},
                            {"shared_min_bytes", share_min_bytes}};
  auto start = std::chrono::steady_clock::now();
  python::Packed prepared_call = python::CallPacked(
      accelopt::api::kSandboxPrepare,
      {{{"module", module}, {"function", function}, {"arg", arg}, {"options", options}}, {}});
  const nlohmann::json& prepared = prepared_call.value;
  if (prepared.contains("result")) return prepared["result"];  // decided before anything ran
  if (prepared.value("plain", false)) {
    CallOutcome outcome = pools("emulator").Call(module, function, arg, call_limits);
    if (outcome.ok) {
      if (!outcome.integrity.empty())
        throw StageError("forbidden_access", module + "." + function + " modified the worker's libraries",
                         {{"changes", outcome.integrity}});
      return outcome.result;
    }
    throw StageError(outcome.kind, outcome.message, {{"traceback", outcome.traceback}});
  }
  std::string token = prepared.value("token", "");
  std::string backend = prepared.value("backend", "emulator");
  WorkerPool::WhileHeld while_held;
  if (backend == "neuron") {
    const nlohmann::json& worker_arg = prepared["worker"].value("arg", nlohmann::json::object());
    std::string target = worker_arg.is_object() ? worker_arg.value("target", "trn1") : "trn1";
    while_held = [target](CallOutcome& outcome, const std::string& scratch, int core) {
      ProfileDeviceArtifacts(outcome, scratch, 0, core, target);
    };
  }
  nlohmann::json job = prepared["worker"];
  std::vector<std::string> job_blobs = std::move(prepared_call.blobs);
  const bool parallel = backend != "neuron" && limits.is_object() && limits.value("parallel_passes", false);
  if (parallel) {
    try {
      WorkerPool& pool = pools(backend);  // may throw (cannot start): the token is discarded below
      if (pool.size() > 1)
        return ParallelPasses(pool, token, std::move(job), std::move(job_blobs), call_limits, share_min_bytes);
    } catch (...) {
      python::CallJson(accelopt::api::kSandboxDiscard, {{"token", token}});
      throw;
    }
  }
  python::Packed judged;
  auto judging = std::chrono::steady_clock::now();
  CallOutcome outcome;
  // One round per pass of input sets (accelopt.sandbox.passes: one per set at most), plus
  // one per re-measurement the trusted side asks for (at most a few); bounded here too.
  auto another = [](const nlohmann::json& answer) {
    return answer.value("remeasure", false) || answer.value("next_pass", false);
  };
  CallLimits round_limits = call_limits;
  auto first_sent = std::chrono::steady_clock::now();
  for (int round = 0; round < kMaxRounds; ++round) {
    try {
      nlohmann::json transfer = {{"reply_memfd", true}, {"reply_min_bytes", share_min_bytes}};
      if (job.contains("shared")) transfer["shared"] = job["shared"];
      outcome = pools(backend).Call(job.value("module", ""), job.value("function", ""),
                                    job.value("arg", nlohmann::json()), round_limits, &job_blobs, while_held, transfer);
    } catch (...) {
      python::CallJson(accelopt::api::kSandboxDiscard, {{"token", token}});
      throw;
    }
    job_blobs.clear();  // the inputs are no longer needed here
    judging = std::chrono::steady_clock::now();
    judged = python::CallPacked(
        accelopt::api::kSandboxFinish,
        {{{"token", token}, {"outcome", OutcomeJson(outcome)}}, std::move(outcome.blobs)});
    if (!another(judged.value)) break;
    // The passes of one candidate share its time limit (a timing round gets its own).
    if (judged.value.value("next_pass", false) && call_limits.timeout_s > 0) {
      double spent_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - first_sent).count();
      round_limits.timeout_s = std::max(1.0, call_limits.timeout_s - spent_s);
    } else {
      round_limits = call_limits;
    }
    job = judged.value["worker"];
    job_blobs = std::move(judged.blobs);
  }
  if (another(judged.value)) {
    python::CallJson(accelopt::api::kSandboxDiscard, {{"token", token}});
    throw StageError("worker_error", "the trusted harness kept asking for more worker rounds");
  }
  auto ms = [](auto a, auto b) { return std::chrono::duration<double, std::milli>(b - a).count(); };
  spdlog::debug("isolated {}.{}: prepare+worker {:.1f} ms (worker round trip {:.1f} ms), judge {:.1f} ms", module,
                function, ms(start, judging), outcome.wall_ms, ms(judging, std::chrono::steady_clock::now()));
  return judged.value;
}

nlohmann::json IsolatedCall(WorkerPool& pool, const std::string& module, const std::string& function,
                            const nlohmann::json& arg, const nlohmann::json& limits) {
  return IsolatedCall(
      [&pool](const std::string& backend) -> WorkerPool& {
        if (backend != pool.backend())
          throw StageError("config_error", "this worker pool runs the " + pool.backend() +
                                               " backend; the call needs " + backend);
        return pool;
      },
      module, function, arg, limits);
}

PoolOptions PoolOptionsFor(PoolOptions base, const std::string& backend) {
  base.config.backend = backend;
  if (backend != "neuron") return base;
  if (!base.config.scratch_root.empty())
    base.config.scratch_root = EnsurePrivateDir(std::filesystem::path(base.config.scratch_root), "neuron").string();
  nlohmann::json found;
  try {
    found = python::CallJson(accelopt::api::kNeuronCoresDiscover,
                             base.neuron_cores.empty() ? nlohmann::json() : nlohmann::json(base.neuron_cores));
  } catch (const python::PythonError& error) {
    throw StageError("config_error", std::string("no NeuronCores for the neuron backend: ") + error.what() +
                                         " (give --neuron-cores, e.g. 0-31)");
  }
  base.config.neuron_cores = found.value("cores", std::vector<int>{});
  if (base.config.neuron_cores.empty()) throw StageError("config_error", "no NeuronCores for the neuron backend");
  spdlog::info("neuron backend: {} NeuronCore(s) from {}, one worker each", base.config.neuron_cores.size(),
               found.value("source", "?"));
  return base;
}

struct ScopedWorkerPool::State {
  PoolOptions options;
  mutable std::mutex mu;
  // shared: a call still in flight keeps its pool alive
  std::map<std::string, std::shared_ptr<WorkerPool>> pools;
  std::shared_ptr<WorkerPool> Get(const std::string& backend) {
    std::lock_guard<std::mutex> lock(mu);
    auto& pool = pools[backend];
    if (!pool) {
      pool = std::make_shared<WorkerPool>(PoolOptionsFor(options, backend));
      if (pools.size() == 1) LimitHostBlas();
    }
    return pool;
  }
};

ScopedWorkerPool::ScopedWorkerPool(PoolOptions options) : state_(std::make_shared<State>()) {
  state_->options = std::move(options);
  std::shared_ptr<State> state = state_;
  GlobalHostServices().isolated_call = [state](const std::string& module, const std::string& function,
                                               const nlohmann::json& arg, const nlohmann::json& limits) {
    // The pools stay alive for the whole call (a shared_ptr per backend used).
    std::vector<std::shared_ptr<WorkerPool>> held;
    auto pools = [&state, &held](const std::string& backend) -> WorkerPool& {
      try {
        held.push_back(state->Get(backend));
      } catch (const StageError&) {
        throw;
      } catch (const std::exception& error) {
        throw StageError("worker_error", std::string("cannot start the worker pool: ") + error.what());
      }
      return *held.back();
    };
    return IsolatedCall(pools, module, function, arg, limits);
  };
}

ScopedWorkerPool::~ScopedWorkerPool() {
  GlobalHostServices().isolated_call = nullptr;
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->pools.clear();
}

WorkerPool& ScopedWorkerPool::pool() { return *state_->Get("emulator"); }

WorkerPool& ScopedWorkerPool::pool(const std::string& backend) { return *state_->Get(backend); }

nlohmann::json ScopedWorkerPool::Summary() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  if (state_->pools.empty()) return nullptr;
  PoolStats total;
  int workers = 0;
  std::vector<std::string> warnings, backends;
  nlohmann::json summary = nlohmann::json::object();
  for (const auto& [backend, pool] : state_->pools) {
    if (!pool) continue;
    PoolStats stats = pool->Stats();
    total.calls += stats.calls;
    total.spawned += stats.spawned;
    total.timeouts += stats.timeouts;
    total.crashes += stats.crashes;
    total.retries += stats.retries;
    total.restarts += stats.restarts;
    workers += pool->size();
    backends.push_back(backend);
    for (const auto& warning : pool->Warnings()) warnings.push_back(warning);
    if (backend == "neuron") summary["neuron_cores"] = pool->NeuronCores();
  }
  summary.update({{"workers", workers},          {"calls", total.calls},     {"spawned", total.spawned},
                  {"timeouts", total.timeouts},  {"crashes", total.crashes}, {"retries", total.retries},
                  {"restarts", total.restarts},  {"sandbox_warnings", warnings},
                  {"backend", backends.size() == 1 ? nlohmann::json(backends[0]) : nlohmann::json(backends)},
                  {"executor", state_->options.config.executor}});
  return summary;
}

}  // namespace accelopt::worker
