// moves_command.h - `accelopt-host moves KERNEL.py`: the rule moves that apply to a kernel (docs/cli.md).
#pragma once

#include <string>
#include <vector>

#include "cli/commands.h"

namespace accelopt::cli {

struct MovesOptions {
  std::string kernel;     // kernel file (parsed by accelopt.rules, never executed for the listing)
  std::string reference;  // optional: profile the kernel first (sandboxed worker) to rank by its metrics
  std::string target = "trn1";
  double rel_tol = 2e-5;
  int max_moves = 30;     // moves listed
  bool json = false;      // print {"profile": {...} | null, "plans": [...]}
  ProfileOptions profile;  // worker settings of the optional profile (backend emulator by default: auto)
};

/// Lists accelopt.rules.propose's plans for the kernel, best first, with each plan's documented
/// effect and (with --reference) its predicted gain from the profile. Returns kExitOk, kExitUsage
/// for unreadable input, kExitFailed when the profile fails (the moves are still listed, unranked).
int MovesCommand(const MovesOptions& options);

}  // namespace accelopt::cli
