// plugins/search/agent_stages.h - the reflexion agent loop's stages
// (pipelines/nkibench-agent.yaml, docs/search.md "Agent"). The carried state:
//   {"cases": {case_name: {current, best, best_latency_ms, evaluations, rounds,
//     no_improve, done, done_reason, lessons: [...], tried: [...], picked}},
//    "experiments": [...], "done": bool}
#pragma once

#include "agent_core.h"
#include "search_common.h"

namespace accelopt_search {

/// native:agent_init - state from the baseline beam (and earlier lessons).
json RunAgentInit(StageContext& ctx);
/// native:agent_pick - one plan per active problem: the first untried proposal, with error feedback and reflexion.
json RunAgentPick(StageContext& ctx);
/// native:agent_step - keep or revert with the divergence guard; attempt history, lessons, stop rules.
json RunAgentStep(StageContext& ctx);

/// The current kernels of the problems still running (native:plan's beam).
json AgentBeam(const json& state);
/// case_name -> best kernel (native:optimize_results's best).
json AgentBest(const json& state);
/// experiments.jsonl and lessons.json of the run, rewritten atomically from the state.
void WriteAgentFiles(const std::filesystem::path& dir, const json& state);

}  // namespace accelopt_search
