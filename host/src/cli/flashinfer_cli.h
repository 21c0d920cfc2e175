// flashinfer_cli.h - registers `flashinfer validate` on the command line and
// runs it (docs/flashinfer.md).
#pragma once

#include <memory>

namespace CLI {
class App;
}

namespace accelopt::cli {

/// The parsed options of the flashinfer commands.
class FlashinferCommands {
 public:
  /// Adds `flashinfer` and its subcommands to `app`.
  explicit FlashinferCommands(CLI::App& app);
  ~FlashinferCommands();
  /// After parsing: if one of these commands was given, runs it, stores its
  /// exit code in `*exit_code` and returns true; otherwise returns false.
  bool Dispatch(int* exit_code) const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

/// `accelopt-host flashinfer validate DIR`: every problem with its file and
/// field, on stdout (JSON with `json`); exit 2 when any is an error, else 0.
int FlashinferValidateCommand(const std::string& dir, bool json, bool errors_only);

}  // namespace accelopt::cli
