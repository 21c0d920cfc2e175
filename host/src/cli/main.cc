// accelopt-host: runs kernel-optimization pipelines (docs/cli.md).
#include "core/allocator.h"
#include <csignal>
#include <cstdlib>
#include <iostream>

#include <CLI/CLI.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "cli/commands.h"
#include "cli/doctor_command.h"
#include "cli/moves_command.h"
#include "cli/prompts_command.h"
#include "cli/report_cli.h"
#include "worker/worker_main.h"
#include "cli/flashinfer_cli.h"  // flashinfer validate (docs/flashinfer.md)

int main(int argc, char** argv) {
  accelopt::TuneAllocatorForArrays();  // host and workers (same binary)
  std::signal(SIGPIPE, SIG_IGN);  // libcurl and pipes to workers: report EPIPE, don't die
  auto logger = spdlog::stderr_color_mt("accelopt");
  spdlog::set_default_logger(logger);
  spdlog::set_pattern("%H:%M:%S %^%l%$ %v");

  CLI::App app{"accelopt-host: optimize accelerator kernels with LLM agents, through YAML pipelines of native and Lua stages"};
  app.set_version_flag("--version", std::string("accelopt-host ") + ACCELOPT_VERSION);
  app.require_subcommand(1);
  std::string log_level = "info";
  app.add_option("--log-level", log_level, "trace, debug, info, warn or error")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error"}));
  app.footer("Exit codes: 0 succeeded, 1 failed or interrupted (results still written), 2 usage or pipeline error; docs/cli.md, \"Statuses and exit codes\".");

  accelopt::cli::RunOptions run;
  auto* run_cmd = app.add_subcommand("run", "Run a pipeline");
  auto* pipeline_arg = run_cmd->add_option("pipeline", run.pipeline, "Pipeline YAML file");
  auto* resume_opt = run_cmd->add_option("--resume", run.resume, "Continue an interrupted run in RUN_DIR (finished stages and items are reused)");
  pipeline_arg->excludes(resume_opt);
  run_cmd->add_option("--set", run.sets, "Override KEY=VALUE (vars.x=1, backend.target=trn2); repeatable");
  run_cmd->add_option("--run-dir", run.run_dir, "Directory for this run's files (default runs/<timestamp>-<name>)");
  run_cmd->add_option("--max-parallel", run.max_parallel, "Cap on items in flight in any for_each")->check(CLI::PositiveNumber);
  run_cmd->add_option("--workers", run.workers, "Worker processes for untrusted candidates (default: number of cores; neuron: of NeuronCores)")
      ->check(CLI::PositiveNumber);
  run_cmd->add_option("--executor", run.executor, "Where workers run: local (child processes) or slurm (job steps through srun; docs/scale-out.md); default backend.executor, else local")
      ->check(CLI::IsMember({"local", "slurm"}));
  run_cmd->add_option("--gpus", run.gpus, "GPUs for the workers, e.g. 0-3, or auto (nvidia-smi): one worker each, pinned with CUDA_VISIBLE_DEVICES");
  run_cmd->add_option("--neuron-cores", run.neuron_cores, "NeuronCores for the neuron backend, e.g. 0-31 (default: ACCELOPT_NEURON_CORES, else neuron-ls); one worker each");
  run_cmd->add_option("--python-path", run.python_paths, "Folder to add to the embedded Python's sys.path (host and workers); repeatable")
      ->check(CLI::ExistingDirectory);

  std::string validate_pipeline;
  std::vector<std::string> validate_sets;
  auto* validate_cmd = app.add_subcommand("validate", "Check a pipeline (schema, stages, parameters, Lua syntax) without running it");
  validate_cmd->add_option("pipeline", validate_pipeline, "Pipeline YAML file")->required();
  validate_cmd->add_option("--set", validate_sets, "Override KEY=VALUE as for `run`");

  bool stages_json = false;
  auto* stages_cmd = app.add_subcommand("stages", "List every registered stage (native and Lua) with its parameters");
  stages_cmd->add_flag("--json", stages_json, "Print JSON instead of text");

  accelopt::cli::ProfileOptions profile;
  auto* profile_cmd = app.add_subcommand("profile", "Profile one NKI kernel against a NumPy reference");
  profile_cmd->add_option("kernel", profile.kernel, "Kernel file exposing `kernel` (or `optimized_kernel`)")->required()->check(CLI::ExistingFile);
  profile_cmd->add_option("--reference", profile.reference, "Reference module (get_inputs, forward, transform_*)")->required()->check(CLI::ExistingFile);
  profile_cmd->add_option("--backend", profile.backend, "emulator, neuron or auto (neuron if the Neuron SDK, nki or neuronxcc, is importable)")
      ->check(CLI::IsMember({"auto", "emulator", "neuron"}));
  profile_cmd->add_option("--target", profile.target, "trn1 or trn2")->check(CLI::IsMember({"trn1", "trn2"}));
  profile_cmd->add_option("--rel-tol", profile.rel_tol, "Relative L2 tolerance (default 2e-5)")->check(CLI::PositiveNumber);
  profile_cmd->add_flag("--json", profile.json, "Print one JSON object");
  profile_cmd->add_option("--isolation", profile.isolation, "worker (default: a sandboxed worker process) or inprocess (trusted kernels)")
      ->check(CLI::IsMember({"worker", "inprocess"}));
  profile_cmd->add_option("--timeout", profile.timeout_s, "Wall-clock limit in seconds for the kernel (worker isolation; default 300)")
      ->check(CLI::PositiveNumber);
  profile_cmd->add_option("--neuron-cores", profile.neuron_cores, "NeuronCores for the neuron backend (the first is used), e.g. 0-31");
  profile_cmd->add_option("--python-path", profile.python_paths, "Folder to add to the embedded Python's sys.path (host and worker); repeatable")
      ->check(CLI::ExistingDirectory);
  profile_cmd->add_option("--memory-limit", profile.memory_limit, "Address-space limit of the worker, e.g. 4G or 512M (default 4G; neuron backend: 3/4 of physical memory)");

  accelopt::cli::MovesOptions moves;
  auto* moves_cmd = app.add_subcommand("moves", "List the rule-based moves that apply to an NKI kernel, best first (docs/rules.md)");
  moves_cmd->add_option("kernel", moves.kernel, "Kernel file (parsed, not executed, for the listing)")->required()->check(CLI::ExistingFile);
  moves_cmd->add_option("--reference", moves.reference, "Profile the kernel against this reference first (sandboxed worker) and rank by its metrics")
      ->check(CLI::ExistingFile);
  moves_cmd->add_option("--target", moves.target, "trn1 or trn2")->check(CLI::IsMember({"trn1", "trn2"}));
  moves_cmd->add_option("--rel-tol", moves.rel_tol, "Relative L2 tolerance of the profile (default 2e-5)")->check(CLI::PositiveNumber);
  moves_cmd->add_option("--max", moves.max_moves, "Moves listed (default 30)")->check(CLI::NonNegativeNumber);
  moves_cmd->add_flag("--json", moves.json, "Print {kernel, profile, plans} as JSON");
  moves_cmd->add_option("--timeout", moves.profile.timeout_s, "Wall-clock limit of the profile in seconds (default 300)")->check(CLI::PositiveNumber);
  moves_cmd->add_option("--memory-limit", moves.profile.memory_limit, "Address-space limit of the profiling worker (default 4G)");
  moves_cmd->add_option("--python-path", moves.profile.python_paths, "Folder to add to the embedded Python's sys.path; repeatable")
      ->check(CLI::ExistingDirectory);

  accelopt::cli::DoctorOptions doctor;
  auto* doctor_cmd = app.add_subcommand("doctor", "Say what the neuron backend finds here (SDK, namespaces, NeuronCores, target, sandbox) and what it will do; runs no kernel (docs/trainium.md)");
  doctor_cmd->add_option("--python-path", doctor.python_paths, "Folder to add to the embedded Python's sys.path (e.g. the DLAMI venv's site-packages); repeatable")
      ->check(CLI::ExistingDirectory);
  doctor_cmd->add_option("--neuron-cores", doctor.neuron_cores, "NeuronCores to use, e.g. 0-31 (default: ACCELOPT_NEURON_CORES, else neuron-ls)");
  doctor_cmd->add_option("--target", doctor.target, "auto (neuron-ls's instance type), trn1 or trn2")
      ->check(CLI::IsMember({"auto", "trn1", "trn2"}));
  doctor_cmd->add_flag("--json", doctor.json, "Print the report as JSON");

  accelopt::cli::PromptsRenderOptions prompts;
  auto* prompts_cmd = app.add_subcommand("prompts", "Work with the LLM prompts (docs/optimize.md)");
  prompts_cmd->require_subcommand(1);
  auto* render_cmd = prompts_cmd->add_subcommand("render", "Print the planner, executor, fixer and summarizer prompts for one case without calling an LLM");
  render_cmd->add_option("pipeline", prompts.pipeline, "Pipeline YAML with vars.nkibench and vars.prompts (pipelines/nkibench-optimize.yaml)")
      ->required();
  render_cmd->add_option("--case", prompts.case_name, "Benchmark case, e.g. silu_M256_N1024")->required();
  render_cmd->add_option("--set", prompts.sets, "Override KEY=VALUE as for `run`");
  render_cmd->add_option("--stage", prompts.stage, "planner, executor, fixer, summarizer or all (default)")
      ->check(CLI::IsMember({"all", "planner", "executor", "fixer", "summarizer"}));
  render_cmd->add_option("--memory", prompts.memory, "memory.json whose experiences the planner shows")->check(CLI::ExistingFile);
  render_cmd->add_option("--plan", prompts.plan, "File with the plan text for the executor (default: a placeholder)")->check(CLI::ExistingFile);
  render_cmd->add_option("--kernel", prompts.kernel, "A second kernel (trusted: profiled in-process): the fixer's failed kernel or the summarizer's pair")
      ->check(CLI::ExistingFile);
  render_cmd->add_option("--out", prompts.out_dir, "Write <stage>_system.md and <stage>_user.md into this folder instead of printing");
  render_cmd->add_flag("--json", prompts.json, "Print [{stage, system, user}] as JSON");

  accelopt::cli::ReportCommands report_commands(app);  // report, runs, runs show, compare
  accelopt::cli::FlashinferCommands flashinfer_commands(app);  // flashinfer validate

  // Internal: one worker process of the pool (docs/isolation.md); not for users.
  accelopt::worker::WorkerMainOptions worker;
  std::string worker_memory = "0", worker_cpu = "0";
  bool worker_no_sandbox = false;
  auto* worker_cmd = app.add_subcommand("worker", "");
  worker_cmd->group("");  // hidden from --help
  worker_cmd->add_option("--id", worker.id);
  worker_cmd->add_option("--parent", worker.parent_pid);
  worker_cmd->add_option("--scratch", worker.scratch);
  worker_cmd->add_option("--python-path", worker.python_paths);
  worker_cmd->add_option("--memory", worker_memory);
  worker_cmd->add_option("--cpu", worker_cpu);
  worker_cmd->add_flag("--no-sandbox", worker_no_sandbox);
  worker_cmd->add_option("--backend", worker.backend)->check(CLI::IsMember({"emulator", "neuron", "torch"}));

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    int code = app.exit(error);
    return code == 0 ? 0 : accelopt::cli::kExitUsage;
  }
  spdlog::set_level(spdlog::level::from_str(log_level));
  if (int code = 0; flashinfer_commands.Dispatch(&code)) return code;  // flashinfer validate

  if (*worker_cmd) {
    worker.memory_bytes = std::strtoull(worker_memory.c_str(), nullptr, 10);
    worker.cpu_seconds = std::strtoull(worker_cpu.c_str(), nullptr, 10);
    worker.sandbox = !worker_no_sandbox;
    int code = accelopt::worker::WorkerMain(worker);
    spdlog::default_logger()->flush();
    std::_Exit(code);  // no static destructors: the interpreter is never finalised
  }

  std::vector<std::string> args(argv, argv + argc);
  if (*run_cmd) {
    if (run.pipeline.empty() && run.resume.empty()) {
      std::cerr << "run: give a PIPELINE file or --resume RUN_DIR\n" << run_cmd->help();
      return accelopt::cli::kExitUsage;
    }
    return accelopt::cli::RunCommand(run, args);
  }
  if (*validate_cmd) return accelopt::cli::ValidateCommand(validate_pipeline, validate_sets);
  if (*stages_cmd) return accelopt::cli::StagesCommand(stages_json);
  if (*profile_cmd) return accelopt::cli::ProfileCommand(profile);
  if (*moves_cmd) return accelopt::cli::MovesCommand(moves);
  if (*doctor_cmd) return accelopt::cli::DoctorCommand(doctor);
  if (*render_cmd) return accelopt::cli::PromptsRenderCommand(prompts);
  if (int code = 0; report_commands.Dispatch(&code)) return code;
  return accelopt::cli::kExitUsage;
}
