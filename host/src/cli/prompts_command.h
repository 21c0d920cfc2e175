// prompts_command.h - `accelopt-host prompts render`: the LLM stages' prompts for
// one benchmark case, rendered without calling a model (docs/cli.md).
#pragma once

#include <string>
#include <vector>

namespace accelopt::cli {

struct PromptsRenderOptions {
  std::string pipeline;            // a pipeline with vars.nkibench and vars.prompts (nkibench-optimize.yaml)
  std::vector<std::string> sets;   // --set overrides, as for `run`
  std::string case_name;           // e.g. silu_M256_N1024
  std::string stage = "all";       // planner, executor, fixer, summarizer or all
  std::string memory;              // memory.json (or a list of items) shown to the planner
  std::string plan;                // file holding a plan text for the executor prompt
  std::string kernel;              // a second kernel: the fixer's failed kernel or the summarizer's pair
  std::string out_dir;             // write <stage>_system.md / <stage>_user.md here instead of printing
  bool json = false;               // print [{stage, system, user}] as JSON
};

/// Loads the case, profiles its baseline kernel (and `kernel`, in-process: trusted
/// code only) on the pipeline's backend, and renders the prompts through
/// native:render_prompts. Returns 0, 1 when the baseline kernel fails, 2 for a
/// usage or pipeline error.
int PromptsRenderCommand(const PromptsRenderOptions& options);

}  // namespace accelopt::cli
