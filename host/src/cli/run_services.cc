#include "cli/run_services.h"

#include <spdlog/spdlog.h>

#include "core/errors.h"
#include "llm/client_registry.h"
#include "llm/curl_chat_client.h"
#include "llm/llm_error.h"
#include "llm/spend_caps.h"
#include "llm/usage_ledger.h"
#include "plugin/host_services.h"
#include "python/interpreter.h"
#include "worker/isolated_call.h"

namespace accelopt::cli {
namespace {

using nlohmann::json;

// ---- LLM endpoints (llm: block) -------------------------------------------

// The `llm_chat` host service over a ClientRegistry. Request (AccelHostApi::llm_chat):
//   {"endpoint"?: name (default "default"), "messages": [...], "temperature"?, "max_tokens"?,
//    "seed"?: int, "extra"?: {...}, "problem"?: name (the per-problem spend caps)}
// or {"describe": true, "endpoint"?: name} -> {"available", "endpoint", "model", "replaying"}
// without calling the model, or {"spend": true, "endpoint"?: name, "problems"?: [names]} ->
// the endpoint's spend caps and what was spent (SpendAccount::Status: "run" and "problems"
// each with "stopped": the reason a next request would be refused, or null).
// Response: content, reasoning, finish_reason, model, request_id, prompt_tokens,
// completion_tokens, latency_ms (ms), attempts, replayed, cost_usd (USD, at the endpoint's
// configured prices). A request over a spend cap fails with kind llm_spend_cap, unsent.
json LlmChat(llm::ClientRegistry& registry, const json& request, const std::string& stage_id) {
  if (!request.is_object()) throw StageError("llm_config", "llm_chat: the request must be a JSON object");
  const std::string endpoint = request.value("endpoint", std::string("default"));
  if (request.value("spend", false)) {
    llm::SpendAccount* account = registry.Account(endpoint);
    if (!account) return {{"available", false}, {"endpoint", endpoint}, {"reason", "no LLM endpoint '" + endpoint + "'"}};
    std::vector<std::string> problems;
    for (const auto& name : request.value("problems", json::array())) {
      if (name.is_string()) problems.push_back(name.get<std::string>());
    }
    json status = account->Status(problems);
    status["available"] = true;
    return status;
  }
  if (request.value("describe", false)) {
    if (!registry.Has(endpoint)) {
      std::string known;
      for (const auto& name : registry.Names()) known += (known.empty() ? "" : ", ") + name;
      return {{"available", false}, {"endpoint", endpoint},
              {"reason", "no LLM endpoint '" + endpoint + "' (configured: " + (known.empty() ? "none" : known) + ")"}};
    }
    const auto& config = registry.Config(endpoint);
    return {{"available", true}, {"endpoint", endpoint}, {"model", config.model}, {"replaying", registry.Replaying()}};
  }
  llm::ChatRequest chat;
  chat.endpoint = endpoint;
  chat.stage = stage_id;
  if (request.contains("problem") && request["problem"].is_string()) chat.problem = request["problem"].get<std::string>();
  chat.messages = request.value("messages", json::array());
  if (request.contains("temperature") && request["temperature"].is_number()) chat.temperature = request["temperature"].get<double>();
  if (request.contains("max_tokens") && request["max_tokens"].is_number_integer()) chat.max_tokens = request["max_tokens"].get<int>();
  if (request.contains("extra") && request["extra"].is_object()) chat.extra = request["extra"];
  if (request.contains("seed") && request["seed"].is_number_integer()) chat.extra["seed"] = request["seed"];
  try {
    llm::ChatClient& client = registry.Get(endpoint);
    llm::ChatResponse response = client.Complete(chat);
    const auto& config = registry.Config(endpoint);
    return {{"content", response.content},
            {"reasoning", response.reasoning},
            {"finish_reason", response.finish_reason},
            {"model", response.model.empty() ? config.model : response.model},
            {"request_id", response.request_id},
            {"prompt_tokens", response.prompt_tokens},
            {"completion_tokens", response.completion_tokens},
            {"latency_ms", response.latency_ms},
            {"attempts", response.attempts},
            {"replayed", response.replayed},
            {"cost_usd", llm::EstimateCostUsd(response.prompt_tokens, response.completion_tokens,
                                              config.price_per_mtok_in, config.price_per_mtok_out)}};
  } catch (const llm::LlmError& error) {
    json details = error.ToJson().value("details", json::object());
    throw StageError(error.kind_name(), error.what(), details);
  }
}

class Services : public RunServices {
 public:
  ~Services() override { GlobalHostServices() = HostServices{}; }

  /// {"llm": {"mode", "replay", "transcript", "endpoints", "usage": ledger summary,
  ///  "spend": {endpoint: caps, spend and stop reasons}}} or null.
  json Summary() const override {
    json summary = nullptr;
    if (llm_) {
      json llm = llm_->Describe();
      llm["usage"] = llm_->Ledger().Summary();
      llm["spend"] = llm_->SpendSummary();
      summary["llm"] = llm;
    }
    if (workers_) {
      if (json workers = workers_->Summary(); !workers.is_null()) summary["workers"] = workers;
    }
    return summary;
  }

  /// The LLM spend against the caps for the progress line ("" without requests).
  std::string ProgressText() const override { return llm_ ? llm_->SpendProgress() : std::string(); }

  std::unique_ptr<llm::ClientRegistry> llm_;
  std::unique_ptr<worker::ScopedWorkerPool> workers_;  // isolated_call: started on first use
};

// Builds the registry from the `llm:` block (+ env overrides). Returns null when no
// endpoint is configured and nothing is replayed. Throws ConfigError.
std::unique_ptr<llm::ClientRegistry> StartLlm(const Pipeline& pipeline, const RunDirectory& run_dir, bool resume) {
  llm::RegistryOptions options;
  options.base_dir = pipeline.file.parent_path();
  if (resume) options.resume_transcript = llm::TranscriptPathFor(run_dir.path());
  std::unique_ptr<llm::ClientRegistry> registry;
  try {
    // First without a run directory: no transcript file for a run that has no endpoint.
    if (llm::ClientRegistry(pipeline.llm, options).Names().empty()) {
      spdlog::debug("LLM: no endpoint configured (llm: block, or ACCELOPT_LLM_BASE_URL + ACCELOPT_LLM_MODEL)");
      return nullptr;
    }
    options.run_dir = run_dir.path();
    registry = std::make_unique<llm::ClientRegistry>(pipeline.llm, options);
  } catch (const llm::LlmError& error) {
    throw ConfigError(SourceLocation{pipeline.file.string(), 0, 0}, error.what());
  }
  json described = registry->Describe();
  for (const auto& [name, endpoint] : described["endpoints"].items()) {
    const std::string source = endpoint.value("base_url_source", std::string());
    spdlog::info("LLM endpoint '{}': model {} {}", name, endpoint.value("model", "?"),
                 registry->Replaying() ? "(replaying " + described.value("replay", json("")).dump() + ")"
                                       : "at " + endpoint.value("base_url", "?") +
                                             (source.empty() || source == "llm block" ? "" : " (from " + source + ")"));
    const llm::SpendCaps& caps = registry->Config(name).caps;
    auto limits = [](const llm::CapLimits& c) {
      auto one = [](bool set, const std::string& text) { return set ? text : std::string("no cap"); };
      return one(c.requests > 0, std::to_string(c.requests) + " requests") + ", " +
             one(c.tokens > 0, std::to_string(c.tokens) + " tokens") + ", " +
             one(c.usd > 0, json(c.usd).dump() + " USD");
    };
    spdlog::info("LLM endpoint '{}': spend caps per problem {}; per run {} (llm.{}.caps; docs/llm.md)", name,
                 limits(caps.problem), limits(caps.run), name);
  }
  return registry;
}

// Where workers run: `executor` (--executor) or backend.executor, and for
// Slurm the srun settings of backend.slurm (docs/scale-out.md). Throws
// ConfigError for an unknown executor or a malformed slurm block.
void ConfigureExecutor(const Pipeline& pipeline, const std::string& executor, worker::PoolOptions& pool) {
  const json& backend = pipeline.backend;
  std::string chosen = executor;
  if (chosen.empty() && backend.is_object()) chosen = backend.value("executor", std::string("local"));
  if (chosen.empty()) chosen = "local";
  SourceLocation where{pipeline.file.string(), 0, 0};
  if (chosen != "local" && chosen != "slurm")
    throw ConfigError(where, "backend.executor must be local or slurm, got '" + chosen + "'");
  pool.config.executor = chosen;
  if (chosen != "slurm") return;
  pool.config.startup_timeout_s = 600;  // a job may wait in the queue
  const json slurm = backend.is_object() ? backend.value("slurm", json::object()) : json::object();
  if (!slurm.is_object()) throw ConfigError(where, "backend.slurm must be a mapping");
  try {
    auto text = [&slurm](const char* key) {
      if (!slurm.contains(key) || slurm[key].is_null()) return std::string();
      return slurm[key].is_string() ? slurm[key].get<std::string>() : slurm[key].dump();
    };
    pool.config.slurm.partition = text("partition");
    pool.config.slurm.time = text("time");
    pool.config.slurm.mem = text("mem");
    pool.config.slurm.gres = text("gres");
    if (slurm.contains("srun") && slurm["srun"].is_string()) pool.config.slurm.srun = slurm["srun"].get<std::string>();
    if (slurm.contains("cpus_per_task")) pool.config.slurm.cpus_per_task = slurm["cpus_per_task"].get<int>();
    if (slurm.contains("extra")) pool.config.slurm.extra = slurm["extra"].get<std::vector<std::string>>();
  } catch (const json::exception& error) {
    throw ConfigError(where, std::string("backend.slurm: ") + error.what() +
                                 " (partition, time, mem, gres: strings; cpus_per_task: integer; extra: list of strings)");
  }
  spdlog::info("workers run as Slurm job steps (srun{}{})",
               pool.config.slurm.partition.empty() ? "" : " --partition=" + pool.config.slurm.partition,
               pool.config.slurm.gres.empty() ? "" : " --gres=" + pool.config.slurm.gres);
}

}  // namespace

std::unique_ptr<RunServices> StartRunServices(const Pipeline& pipeline, const RunDirectory& run_dir,
                                              const ServiceOptions& options) {
  auto services = std::make_unique<Services>();
  llm::GlobalInit();
  services->llm_ = StartLlm(pipeline, run_dir, options.resume);
  if (services->llm_) {
    llm::ClientRegistry* registry = services->llm_.get();
    GlobalHostServices().llm_chat = [registry](const json& request, const std::string& stage_id) {
      return LlmChat(*registry, request, stage_id);
    };
  }
  // Worker processes for untrusted candidates (docs/isolation.md).
  worker::PoolOptions pool;
  pool.workers = options.workers;
  // A real directory, never a symlink planted in the run directory (a resumed
  // run's folder is not trusted); each worker's w<k> below it is made with
  // EnsurePrivateDir(path) as well.
  pool.config.scratch_root = EnsurePrivateDir(run_dir.path(), "workers").string();
  pool.config.python_paths = options.python_paths;  // python_path: and --python-path reach the workers too
  pool.neuron_cores = options.neuron_cores;
  ConfigureExecutor(pipeline, options.executor, pool);
  if (!options.gpus.empty()) {
    try {
      json found = python::CallJson(accelopt::api::kGpusDiscover, options.gpus);
      pool.config.gpu_devices = found.value("gpus", std::vector<int>{});
      spdlog::info("GPUs: {} from {}, one worker each", pool.config.gpu_devices.size(), found.value("source", "?"));
    } catch (const python::PythonError& error) {
      throw ConfigError(SourceLocation{pipeline.file.string(), 0, 0}, std::string("--gpus: ") + error.what());
    }
  }
  services->workers_ = std::make_unique<worker::ScopedWorkerPool>(pool);
  return services;
}

}  // namespace accelopt::cli
