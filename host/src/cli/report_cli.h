// report_cli.h - registers `report`, `runs` (`runs show`) and `compare` on the
// command line and runs the one that was given (docs/reports.md).
#pragma once

#include <memory>

namespace CLI {
class App;
}

namespace accelopt::cli {

/// The parsed options of the report commands.
class ReportCommands {
 public:
  /// Adds the subcommands and their options to `app`.
  explicit ReportCommands(CLI::App& app);
  ~ReportCommands();
  /// After parsing: if one of these commands was given, runs it, stores its
  /// exit code in `*exit_code` and returns true; otherwise returns false.
  bool Dispatch(int* exit_code) const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace accelopt::cli
