#include "cli/report_cli.h"

#include <CLI/CLI.hpp>

#include "cli/report_command.h"
#include "cli/runs_command.h"

namespace accelopt::cli {

struct ReportCommands::State {
  ReportOptions report;
  RunsOptions runs;
  std::string show_id;
  CompareOptions compare;
  CLI::App* report_cmd = nullptr;
  CLI::App* runs_cmd = nullptr;
  CLI::App* show_cmd = nullptr;
  CLI::App* compare_cmd = nullptr;
};

ReportCommands::ReportCommands(CLI::App& app) : state_(std::make_unique<State>()) {
  State& s = *state_;
  s.report_cmd = app.add_subcommand("report", "Write a run's HTML report with charts (RUN_DIR/report.html; written at the end of every run)");
  s.report_cmd->add_option("run_dir", s.report.run_dir, "Run directory (runs/<id>)")->required();
  s.report_cmd->add_option("--out", s.report.out, "Write the page here instead of RUN_DIR/report.html");
  s.report_cmd->add_flag("--json", s.report.json, "Print {path, kind, charts, bytes, seconds, warnings} as JSON");

  s.runs_cmd = app.add_subcommand("runs", "List the runs under a folder from its SQLite index (kept up to date from the run directories)");
  s.runs_cmd->add_option("--root", s.runs.root, "Folder holding the run directories (default runs)");
  s.runs_cmd->add_flag("--rebuild", s.runs.rebuild, "Drop the index and rebuild it by scanning the run directories");
  s.runs_cmd->add_flag("--json", s.runs.json, "Print JSON");
  s.show_cmd = s.runs_cmd->add_subcommand("show", "Show one run: facts and per-case baseline/best latency");
  s.show_cmd->add_option("id", s.show_id, "Run id (or a unique prefix), or a run directory")->required();
  s.show_cmd->fallthrough();  // `runs show ID --root DIR` as well as `runs --root DIR show ID`

  s.compare_cmd = app.add_subcommand("compare", "Compare two runs: per-case best latency side by side (table; --out for charts)");
  s.compare_cmd->add_option("run_a", s.compare.a, "Run A: id (or unique prefix) under --root, or a run directory")->required();
  s.compare_cmd->add_option("run_b", s.compare.b, "Run B, likewise")->required();
  s.compare_cmd->add_option("--root", s.compare.root, "Folder where ids are looked up (default runs)");
  s.compare_cmd->add_option("--out", s.compare.out, "Also write the comparison page with charts (HTML) here");
  s.compare_cmd->add_flag("--json", s.compare.json, "Print JSON");
}

ReportCommands::~ReportCommands() = default;

bool ReportCommands::Dispatch(int* exit_code) const {
  const State& s = *state_;
  if (*s.report_cmd) {
    *exit_code = ReportCommand(s.report);
  } else if (*s.show_cmd) {
    *exit_code = RunsShowCommand(s.runs, s.show_id);
  } else if (*s.runs_cmd) {
    *exit_code = RunsCommand(s.runs);
  } else if (*s.compare_cmd) {
    *exit_code = CompareCommand(s.compare);
  } else {
    return false;
  }
  return true;
}

}  // namespace accelopt::cli
