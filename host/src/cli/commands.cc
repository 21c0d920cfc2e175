#include "cli/commands.h"
#include "cli/report_command.h"
#include "cli/run_outcome.h"
#include "cli/run_record.h"
#include "cli/run_services.h"

#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <cstdio>
#include <iostream>
#include <thread>

#include <spdlog/spdlog.h>

#include "core/errors.h"
#include "core/journal.h"
#include "core/text.h"
#include "core/progress.h"
#include "core/run_dir.h"
#include "pipeline/executor.h"
#include "pipeline/loader.h"
#include "pipeline/validator.h"
#include "plugin/registry.h"
#include "python/interpreter.h"
#include "worker/isolated_call.h"

namespace accelopt::cli {
namespace {

// Ctrl-C flag (cli/run_record.h installs the handlers that raise it).
std::shared_ptr<std::atomic<bool>> g_cancel = std::make_shared<std::atomic<bool>>(false);

void PrintDiagnostics(const ConfigError& error) {
  for (const auto& d : error.diagnostics()) std::cerr << d.ToString() << "\n";
}

void LoadRegistry(StageRegistry& registry) {
  std::vector<std::string> warnings;
  registry.LoadPlugins(&warnings);
  for (const auto& warning : warnings) spdlog::warn("plugin skipped: {}", warning);
}

// Loads and validates; prints diagnostics and returns nullopt on error.
std::optional<std::pair<Pipeline, ResolvedStages>> Prepare(const std::string& file, const std::vector<std::string>& sets,
                                                           StageRegistry& registry) {
  try {
    Pipeline pipeline = LoadPipeline(file, sets);
    ResolvedStages stages = ValidatePipeline(pipeline, registry);
    return std::make_pair(std::move(pipeline), std::move(stages));
  } catch (const ConfigError& error) {
    PrintDiagnostics(error);
    return std::nullopt;
  }
}

nlohmann::json Versions() {
  nlohmann::json versions = {{"accelopt_host", ACCELOPT_VERSION}};
  if (python::IsInitialized()) {
    auto info = python::Info();
    versions["python"] = info.version;
    versions["python_executable"] = info.executable;
    versions["numpy"] = info.numpy_version;
  }
  versions["lua"] = "5.4";
  return versions;
}

// Which backend `requested` ("auto" | "emulator" | "neuron") resolves to in
// this interpreter and why (accelopt.backends.choose_backend), for run.json.
nlohmann::json BackendChoice(const std::string& requested) {
  try {
    return python::CallJson(accelopt::api::kBackendsChoose, requested);
  } catch (const std::exception& error) {
    return {{"requested", requested}, {"error", error.what()}};
  }
}

// The key of a "KEY=VALUE" --set ("" when there is no '=').
std::string SetKey(const std::string& set) {
  auto eq = set.find('=');
  return eq == std::string::npos ? "" : set.substr(0, eq);
}

// For --resume: the pipeline file and --set values recorded in run.json, then
// the --set values given now, applied on top (docs/cli.md, "Run directories
// and `--resume`"). vars.* and llm.* are applied and said: the executor reuses
// only stages whose resolved inputs are unchanged, so what a new value
// affects runs again and the rest is reused. backend.* and name are refused
// (exit 2): the run's finished candidates were measured on the recorded
// backend and target, and new ones would not compare with them.
bool LoadResumeOptions(RunOptions& options, std::vector<std::string>* applied) {
  auto path = std::filesystem::path(options.resume) / "run.json";
  std::vector<std::string> given = options.sets;
  try {
    auto run = nlohmann::json::parse(ReadFile(path));
    options.pipeline = run.at("pipeline").get<std::string>();
    options.sets = run.value("sets", std::vector<std::string>{});
    options.run_dir = options.resume;
  } catch (const std::exception& error) {
    std::cerr << path.string() << ": error: cannot resume: " << error.what() << "\n";
    return false;
  }
  bool ok = true;
  for (const auto& set : given) {
    const std::string key = SetKey(set);
    const std::string top = key.substr(0, key.find('.'));
    if (top == "backend" || top == "name") {
      std::cerr << "--set " << set << ": error: cannot change " << (key.empty() ? set : key)
                << " when resuming: the run's finished stages and candidates were made with the recorded value"
                << " (run.json \"sets\"); start a new run instead\n";
      ok = false;
      continue;
    }
    std::string before;
    for (const auto& recorded : options.sets)
      if (SetKey(recorded) == key) before = recorded;
    if (before == set) {
      spdlog::info("resume: --set {} is already the run's value", set);
      continue;
    }
    options.sets.push_back(set);  // later --set wins (pipeline/loader.h)
    applied->push_back(set);
    spdlog::info("resume: applying --set {}{}; stages whose inputs change run again, the others are reused", set,
                 before.empty() ? " (the run had the pipeline's value)" : " (the run had " + before + ")");
  }
  return ok;
}

}  // namespace

int RunCommand(const RunOptions& given, const std::vector<std::string>& argv) {
  // Ctrl-C from the start: a second one exits at once even while the pipeline
  // is validated or Python starts; a first one makes the run end interrupted.
  InstallSignalHandlers(g_cancel.get());
  RunOptions options = given;
  const bool resume = !options.resume.empty();
  std::vector<std::string> resume_sets;  // --set values given with --resume and applied
  if (resume && !LoadResumeOptions(options, &resume_sets)) return kExitUsage;
  StageRegistry registry;
  LoadRegistry(registry);
  auto prepared = Prepare(options.pipeline, options.sets, registry);
  if (!prepared) return kExitUsage;
  auto& [pipeline, stages] = *prepared;
  std::vector<std::string> python_paths = pipeline.python_path;  // python_path:, then --python-path
  for (const auto& path : options.python_paths) python_paths.push_back(std::filesystem::absolute(path).string());
  try {
    python::Initialize(python_paths);  // adds to the host's own folders
    python::CheckApi();                // the boundary this host was built for (api_entries.hpp)
  } catch (const python::PythonError& error) {
    std::cerr << "error: cannot start the embedded Python: " << error.what() << "\n";
    return kExitUsage;
  }
  std::optional<RunDirectory> run_dir;
  try {
    run_dir = RunDirectory::Create(options.run_dir, pipeline.name);
  } catch (const std::exception& error) {
    std::cerr << "error: cannot create the run directory: " << error.what() << "\n";
    return kExitUsage;
  }
  nlohmann::json run_json = {{"pipeline", pipeline.file.string()}, {"name", pipeline.name}, {"argv", argv},
                             {"sets", options.sets}, {"versions", Versions()}, {"started_at", UtcNowIso()},
                             {"status", "running"}, {"run_dir", run_dir->path().string()},
                             {"backend", BackendChoice(pipeline.backend.value("nki", std::string("auto")))}};
  if (resume) {
    try {
      auto previous = nlohmann::json::parse(ReadFile(run_dir->path() / "run.json"));
      run_json["started_at"] = previous.value("started_at", run_json["started_at"].get<std::string>());
      run_json["resumes"] = previous.value("resumes", 0) + 1;
      if (!resume_sets.empty()) {
        nlohmann::json history = previous.value("resume_sets", nlohmann::json::array());
        history.push_back({{"resume", run_json["resumes"]}, {"sets", resume_sets}});
        run_json["resume_sets"] = history;
      }
      if (ReadFile(run_dir->path() / "pipeline.resolved.yaml") != pipeline.resolved_yaml) {
        spdlog::warn("the pipeline changed since this run started; stages whose inputs changed run again");
      }
    } catch (const std::exception& error) {
      spdlog::warn("resume: {}", error.what());
    }
  }
  // From here on run.json never stays "running": the record finalises it on
  // every exit path, signals and crashes included (cli/run_record.h).
  std::optional<RunRecord> record;
  try {
    run_dir->WriteText("pipeline.resolved.yaml", pipeline.resolved_yaml);
    record.emplace(*run_dir, run_json);
  } catch (const std::exception& error) {
    std::cerr << "error: cannot write the run directory: " << error.what() << "\n";
    return kExitUsage;
  }
  std::unique_ptr<Journal> journal;
  try {
    journal = std::make_unique<Journal>(run_dir->path() / "journal.jsonl");
    nlohmann::json started = {{"event", resume ? "run_resumed" : "run_started"}, {"pipeline", pipeline.file.string()}};
    if (!resume_sets.empty()) started["sets_applied"] = resume_sets;
    journal->Append(started);
  } catch (const std::exception& error) {
    std::cerr << "error: " << error.what() << "\n";
    record->Finish("failed", {{"kind", "config_error"}, {"message", error.what()}});
    return kExitUsage;
  }
  spdlog::info("run {} → {}", pipeline.name, run_dir->path().string());

  std::unique_ptr<RunServices> services;
  try {
    services = StartRunServices(pipeline, *run_dir,
                                ServiceOptions{options.workers, resume, options.neuron_cores, python_paths,
                                               options.executor, options.gpus});
  } catch (const ConfigError& error) {
    PrintDiagnostics(error);
    record->Finish("failed", {{"kind", "config_error"}, {"message", error.what()}});
    return kExitUsage;
  } catch (const std::exception& error) {
    std::cerr << "error: cannot start the run's services: " << error.what() << "\n";
    record->Finish("failed", {{"kind", "config_error"}, {"message", error.what()}});
    return kExitUsage;
  }

  Progress progress(::isatty(STDERR_FILENO) && std::getenv("ACCELOPT_NO_PROGRESS") == nullptr);
  progress.SetStatusSource([&services] { return services->ProgressText(); });  // the LLM spend against its caps
  Executor executor(pipeline, stages, *run_dir, progress);
  executor.SetCancelFlag(g_cancel);
  if (options.max_parallel > 0) executor.SetParallelCap(options.max_parallel);
  executor.SetResume(resume);
  executor.SetJournal(journal.get());
  RunResult result;
  try {
    result = executor.Run();
  } catch (const std::exception& error) {  // a host bug or an I/O failure: record it, never leave "running"
    spdlog::error("run aborted: {}", error.what());
    progress.Clear();
    RunOutcome outcome{"failed", kExitFailed, {{"kind", "internal_error"}, {"message", error.what()}}};
    record->Finish(outcome.status, outcome.error);
    spdlog::error("{}", OutcomeLine(pipeline.name, outcome, RunResult{}, run_dir->path().string()));
    return outcome.exit_code;
  }
  try {
    journal->Append({{"event", "run_finished"}, {"status", result.status}, {"reused", executor.reused()}});
  } catch (const std::exception& error) {
    spdlog::warn("journal: {}", error.what());
  }
  if (resume) spdlog::info("resume: reused {} finished stage/item results", executor.reused());
  progress.Clear();

  record->json()["failed_stages"] = result.failed_stages;
  record->json()["failed_items"] = result.failed_items;
  record->json()["stages"] = result.stages;
  const nlohmann::json summary = services->Summary();
  if (!summary.is_null()) record->json()["services"] = summary;
  // The spend caps that stopped LLM requests (docs/llm.md, "Spend caps"): said once at the end.
  if (summary.is_object() && summary.contains("llm") && summary.at("llm").is_object() && summary.at("llm").contains("spend")) {
    const nlohmann::json spend_by_endpoint = summary.at("llm").at("spend");
    for (const auto& [endpoint, spend] : spend_by_endpoint.items()) {
      if (!spend.is_object()) continue;
      const nlohmann::json run_spend = spend.value("run", nlohmann::json::object());
      const nlohmann::json run_stopped = run_spend.value("stopped", nlohmann::json());
      const nlohmann::json problems = spend.value("problems", nlohmann::json::object());
      if (run_stopped.is_string()) spdlog::warn("LLM endpoint '{}': {}", endpoint, run_stopped.get<std::string>());
      for (const auto& [problem, p] : problems.items()) {
        const nlohmann::json stopped = p.is_object() ? p.value("stopped", nlohmann::json()) : nlohmann::json();
        if (stopped.is_string() && !run_stopped.is_string())
          spdlog::warn("LLM endpoint '{}', problem {}: {}", endpoint, problem, stopped.get<std::string>());
      }
      const int64_t refused = run_spend.value("refused", int64_t{0});
      if (refused > 0) spdlog::info("LLM endpoint '{}': {} request(s) refused by a spend cap (not sent)", endpoint, refused);
    }
  }
  // One rule for status, exit code and the last line (cli/run_outcome.h, docs/cli.md).
  nlohmann::json first_llm_error;
  if (summary.is_object() && summary.contains("llm") && summary["llm"].value("transcript", nlohmann::json()).is_string())
    first_llm_error = FirstTranscriptError(summary["llm"]["transcript"].get<std::string>());
  const RunOutcome outcome = DecideOutcome(result, summary, first_llm_error);
  record->Finish(outcome.status, outcome.error);
  const std::string last_line = OutcomeLine(pipeline.name, outcome, result, run_dir->path().string());
  auto say_outcome = [&] {
    if (outcome.status == "succeeded") spdlog::info("{}", last_line);
    else spdlog::error("{}", last_line);
  };
  // report.html and the runs index; a failure there is a warning, never the run's outcome.
  if (AbandonedStages() == 0) FinishRunArtifacts(run_dir->path());
  else spdlog::warn("report skipped while timed-out stages still run; write it with `accelopt-host report {}`", run_dir->path().string());
  if (int abandoned = AbandonedStages(); abandoned > 0) {
    // Their threads may still run plugin code and use the LLM client: unloading
    // plugins or destroying the services under them would crash. Every result
    // is on disk (atomic writes, fsync'd journal), so leave without destructors.
    spdlog::warn("{} timed-out stage(s) still running; exiting without waiting for them", abandoned);
    say_outcome();
    spdlog::default_logger()->flush();
    std::fflush(nullptr);
    std::_Exit(outcome.exit_code);
  }
  say_outcome();  // the last line: the same status as run.json and the exit code
  return outcome.exit_code;
}

int ValidateCommand(const std::string& file, const std::vector<std::string>& sets) {
  StageRegistry registry;
  LoadRegistry(registry);
  auto prepared = Prepare(file, sets, registry);
  if (!prepared) return kExitUsage;
  std::cout << file << ": ok (" << prepared->first.stages.size() << " top-level stages)\n";
  return kExitOk;
}

namespace {

// One line per parameter or output field of `stages`: name, type, flag, doc [one of ...].
void PrintFields(const char* heading, const nlohmann::json& fields, bool params) {
  if (fields.empty()) return;
  std::printf("    %s:\n", heading);
  for (const auto& [name, field] : fields.items()) {
    std::string type = field.value("type", "any");
    std::string flag;
    if (params) {
      flag = field.value("required", false) ? "required" : (field.contains("default") ? "default " + field["default"].dump() : "optional");
    }
    std::string doc = field.value("doc", "");
    if (field.contains("enum") && field["enum"].is_array()) {
      std::string choices;
      for (const auto& choice : field["enum"]) choices += (choices.empty() ? "" : ", ") + (choice.is_string() ? choice.get<std::string>() : choice.dump());
      doc += (doc.empty() ? "" : " ") + std::string("[one of: ") + choices + "]";
    }
    std::printf("      %-16s %-8s %-18s %s\n", name.c_str(), type.c_str(), flag.c_str(), doc.c_str());
  }
}

}  // namespace

int StagesCommand(bool as_json) {
  StageRegistry registry;
  LoadRegistry(registry);
  nlohmann::json listing = nlohmann::json::array();
  for (const auto& name : registry.NativeNames()) {
    auto stage = registry.FindNative(name);
    listing.push_back({{"uses", stage->Uses()}, {"description", stage->Description()}, {"params", stage->Params()},
                       {"outputs", stage->Outputs()}, {"origin", stage->Origin()}});
  }
  std::vector<std::filesystem::path> lua_dirs{std::filesystem::path(ACCELOPT_SOURCE_DIR) / "pipelines" / "lua"};
  if (const char* env = std::getenv("ACCELOPT_LUA_PATH"); env && *env) lua_dirs.emplace_back(env);
  for (const auto& script : StageRegistry::FindLuaScripts(lua_dirs)) {
    try {
      auto stage = registry.LuaStage(script, "lua:" + script.string());
      listing.push_back({{"uses", "lua:" + script.string()}, {"description", stage->Description()},
                         {"params", stage->Params()}, {"outputs", stage->Outputs()}, {"origin", script.string()}});
    } catch (const ConfigError& error) {
      PrintDiagnostics(error);
    }
  }
  if (as_json) {
    std::cout << listing.dump(2) << "\n";
    return kExitOk;
  }
  for (const auto& stage : listing) {
    std::cout << stage["uses"].get<std::string>() << "\n    " << stage["description"].get<std::string>() << "\n";
    std::fflush(stdout);
    PrintFields("params", stage["params"], true);
    PrintFields("outputs", stage["outputs"], false);
    std::fflush(stdout);
  }
  return kExitOk;
}

// `profile --isolation worker`: one sandboxed worker with a private scratch
// dir, started for the backend the request resolves to (on neuron: pinned
// to the first NeuronCore of --neuron-cores or neuron-ls). Also used by `moves`.
nlohmann::json ProfileInWorker(const ProfileOptions& options, const nlohmann::json& request) {
  worker::PoolOptions pool_options;
  // Two workers where two cores are: a call of several passes keeps both busy
  // (limits.parallel_passes below; issue 14). The neuron backend keeps one.
  pool_options.workers = std::thread::hardware_concurrency() >= 2 ? 2 : 1;
  // The emulator's default is 4 GiB; the Neuron compiler and runtime get the
  // pool default (3/4 of physical memory), as their needs are not bounded here.
  pool_options.config.memory_bytes = options.memory_limit.empty() ? (4ull << 30) : worker::ParseByteSize(options.memory_limit);
  pool_options.neuron_cores = options.neuron_cores;
  for (const auto& path : options.python_paths)
    pool_options.config.python_paths.push_back(std::filesystem::absolute(path).string());
  std::string scratch_template = (std::filesystem::temp_directory_path() / "accelopt-profile-XXXXXX").string();
  if (mkdtemp(scratch_template.data()) == nullptr) throw std::runtime_error("cannot create a scratch directory");
  pool_options.config.scratch_root = scratch_template;
  nlohmann::json result;
  {
    std::unique_ptr<worker::WorkerPool> pool;
    auto pools = [&](const std::string& backend) -> worker::WorkerPool& {
      if (!pool) {
        worker::PoolOptions ready = worker::PoolOptionsFor(pool_options, backend);
        if (options.memory_limit.empty() && backend == "neuron") ready.config.memory_bytes = worker::DefaultWorkerMemoryBytes();
        if (backend == "neuron") ready.workers = 1;
        pool = std::make_unique<worker::WorkerPool>(ready);
      }
      return *pool;
    };
    try {
      result = worker::IsolatedCall(pools, accelopt::api::kNkiProfile, request,
                                    {{"timeout_s", options.timeout_s}, {"parallel_passes", true}});
    } catch (...) {
      pool.reset();
      std::error_code ignored;
      std::filesystem::remove_all(scratch_template, ignored);
      throw;
    }
  }
  std::error_code ignored;
  std::filesystem::remove_all(scratch_template, ignored);
  return result;
}

// Waits until the published draws this process computed are written to the disk draw store
// (accelopt/sandbox/draw_store.py): they are written on a background thread, and the embedded
// interpreter is never finalised, so a command that exits at once loses them and the next cold
// `profile` draws again (rope: a partial folder and 2 s of np.random per seed). Best effort.
void SettleDrawStore() {
  try {
    python::CallJson(accelopt::api::kSandboxSettleDraws, nullptr);
  } catch (const std::exception& error) {
    spdlog::debug("draw store not settled: {}", error.what());
  }
}

int ProfileCommand(const ProfileOptions& options) {
  try {
    std::vector<std::string> python_paths;
    for (const auto& path : options.python_paths) python_paths.push_back(std::filesystem::absolute(path).string());
    python::Initialize(python_paths);
    python::CheckApi();
  } catch (const python::PythonError& error) {
    std::cerr << "error: cannot start the embedded Python: " << error.what() << "\n";
    return kExitUsage;
  }
  nlohmann::json request = {{"kernel", std::filesystem::absolute(options.kernel).string()},
                            {"reference", std::filesystem::absolute(options.reference).string()},
                            {"backend", options.backend},
                            {"target", options.target},
                            {"rel_tol", options.rel_tol}};
  nlohmann::json result;
  try {
    if (options.isolation == "inprocess") {
      result = python::CallJson(accelopt::api::kNkiProfile, request);
    } else {
      result = ProfileInWorker(options, request);
    }
  } catch (const python::PythonError& error) {
    result = {{"compiled", false}, {"correct", false}, {"latency_ms", nullptr}, {"metrics", nlohmann::json::object()},
              {"error", {{"kind", "host_error"}, {"message", error.what()}, {"traceback", error.traceback()}}}};
  } catch (const std::invalid_argument& error) {
    std::cerr << "error: " << error.what() << "\n";
    return kExitUsage;
  } catch (const std::exception& error) {  // StageError (worker failures), spawn failures
    std::string kind = "worker_error";
    if (auto* stage_error = dynamic_cast<const StageError*>(&error)) kind = stage_error->kind();
    result = {{"compiled", false}, {"correct", false}, {"latency_ms", nullptr}, {"metrics", nlohmann::json::object()},
              {"error", {{"kind", kind}, {"message", error.what()}, {"traceback", ""}}}};
  }
  if (options.json) {
    std::cout << result.dump(2) << "\n";
  } else {
    std::cout << "kernel:    " << options.kernel << "\n"
              << "compiled:  " << (result.value("compiled", false) ? "yes" : "no") << "\n"
              << "correct:   " << (result.value("correct", false) ? "yes" : "no") << "\n";
    if (result.contains("latency_ms") && result["latency_ms"].is_number()) {
      std::printf("latency:   %.4f ms%s\n", result["latency_ms"].get<double>(),
                  result.value("estimated", false) ? " (estimated)" : " (measured)");
    }
    if (result.contains("backend") && result["backend"].is_string()) {
      std::cout << "backend:   " << result["backend"].get<std::string>();
      if (result.contains("sdk_version") && result["sdk_version"].is_string())
        std::cout << " (SDK " << result["sdk_version"].get<std::string>() << ")";
      std::cout << "\n";
      if (result.contains("backend_reason") && result["backend_reason"].is_string())
        std::cout << "           " << result["backend_reason"].get<std::string>() << "\n";
    }
    if (result.contains("error") && result["error"].is_object()) {
      std::cout << "error:     [" << result["error"].value("kind", "?") << "] " << result["error"].value("message", "") << "\n";
    }
    if (result.contains("metrics") && result["metrics"].is_object()) {
      for (const auto& [key, value] : result["metrics"].items()) std::cout << "  " << key << ": " << value.dump() << "\n";
    }
  }
  std::cout.flush();
  SettleDrawStore();  // after the answer is out
  return result.value("correct", false) ? kExitOk : kExitFailed;
}

}  // namespace accelopt::cli
