#include "worker/isolated_call.h"

#include <chrono>
#include <mutex>

#include <spdlog/spdlog.h>

#include "core/errors.h"
#include "plugin/host_services.h"
#include "python/interpreter.h"

namespace accelopt::worker {
namespace {

constexpr const char* kTrusted = "accelopt.sandbox.trusted";

nlohmann::json OutcomeJson(const CallOutcome& outcome) {
  if (outcome.ok) return {{"ok", true}, {"result", outcome.result}, {"integrity", outcome.integrity}};
  return {{"ok", false},
          {"error", {{"kind", outcome.kind}, {"message", outcome.message}, {"traceback", outcome.traceback}}},
          {"integrity", outcome.integrity}};
}

}  // namespace

void LimitHostBlas() {
  try {
    nlohmann::json previous = python::CallJson("nki_emu.blas_threads", "set_threads", 1);
    spdlog::debug("host BLAS threads: {} -> 1 while the worker pool runs", previous.dump());
  } catch (const std::exception& error) {
    spdlog::debug("cannot limit the host's BLAS threads: {}", error.what());
  }
}

nlohmann::json IsolatedCall(WorkerPool& pool, const std::string& module, const std::string& function,
                            const nlohmann::json& arg, const nlohmann::json& limits) {
  CallLimits call_limits;
  try {
    call_limits = ParseLimits(limits);
  } catch (const std::invalid_argument& error) {
    throw StageError("config_error", error.what());
  }
  nlohmann::json options = {{"static_checks", limits.is_object() ? limits.value("static_checks", true) : true}};
  auto start = std::chrono::steady_clock::now();
  python::Packed prepared_call = python::CallPacked(
      kTrusted, "prepare",
      {{{"module", module}, {"function", function}, {"arg", arg}, {"options", options}}, {}});
  const nlohmann::json& prepared = prepared_call.value;
  if (prepared.contains("result")) return prepared["result"];  // decided before anything ran
  if (prepared.value("plain", false)) {
    CallOutcome outcome = pool.Call(module, function, arg, call_limits);
    if (outcome.ok) {
      if (!outcome.integrity.empty())
        throw StageError("forbidden_access", module + "." + function + " modified the worker's libraries",
                         {{"changes", outcome.integrity}});
      return outcome.result;
    }
    throw StageError(outcome.kind, outcome.message, {{"traceback", outcome.traceback}});
  }
  std::string token = prepared.value("token", "");
  const nlohmann::json& job = prepared["worker"];
  CallOutcome outcome;
  try {
    outcome = pool.Call(job.value("module", ""), job.value("function", ""), job.value("arg", nlohmann::json()),
                        call_limits, &prepared_call.blobs);
  } catch (...) {
    python::CallJson(kTrusted, "discard", {{"token", token}});
    throw;
  }
  prepared_call.blobs.clear();  // the inputs are no longer needed here
  auto judging = std::chrono::steady_clock::now();
  python::Packed judged = python::CallPacked(
      kTrusted, "finish", {{{"token", token}, {"outcome", OutcomeJson(outcome)}}, std::move(outcome.blobs)});
  auto ms = [](auto a, auto b) { return std::chrono::duration<double, std::milli>(b - a).count(); };
  spdlog::debug("isolated {}.{}: prepare+worker {:.1f} ms (worker round trip {:.1f} ms), judge {:.1f} ms", module,
                function, ms(start, judging), outcome.wall_ms, ms(judging, std::chrono::steady_clock::now()));
  return judged.value;
}

struct ScopedWorkerPool::State {
  PoolOptions options;
  mutable std::mutex mu;
  std::shared_ptr<WorkerPool> pool;  // shared: a call still in flight keeps it alive
  std::shared_ptr<WorkerPool> Get() {
    std::lock_guard<std::mutex> lock(mu);
    if (!pool) {
      pool = std::make_shared<WorkerPool>(options);
      LimitHostBlas();
    }
    return pool;
  }
};

ScopedWorkerPool::ScopedWorkerPool(PoolOptions options) : state_(std::make_shared<State>()) {
  state_->options = std::move(options);
  std::shared_ptr<State> state = state_;
  GlobalHostServices().isolated_call = [state](const std::string& module, const std::string& function,
                                               const nlohmann::json& arg, const nlohmann::json& limits) {
    std::shared_ptr<WorkerPool> pool;
    try {
      pool = state->Get();
    } catch (const std::exception& error) {
      throw StageError("worker_error", std::string("cannot start the worker pool: ") + error.what());
    }
    return IsolatedCall(*pool, module, function, arg, limits);
  };
}

ScopedWorkerPool::~ScopedWorkerPool() {
  GlobalHostServices().isolated_call = nullptr;
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->pool.reset();
}

WorkerPool& ScopedWorkerPool::pool() { return *state_->Get(); }

nlohmann::json ScopedWorkerPool::Summary() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  if (!state_->pool) return nullptr;
  PoolStats stats = state_->pool->Stats();
  return {{"workers", state_->pool->size()}, {"calls", stats.calls},     {"spawned", stats.spawned},
          {"timeouts", stats.timeouts},      {"crashes", stats.crashes}, {"retries", stats.retries},
          {"restarts", stats.restarts},      {"sandbox_warnings", state_->pool->Warnings()}};
}

}  // namespace accelopt::worker
