// The `search` plugin: the Monte-Carlo graph search's stages (mcgs_*),
// composed in pipelines/nkibench-mcgs.yaml, and the reflexion agent loop's
// (agent_*), composed in pipelines/nkibench-agent.yaml, each with native:plan,
// native:execute, native:profile and native:score (docs/search.md).
#include <string>

#include "agent_stages.h"
#include "search_stages.h"

namespace {

const std::string kGraphParam =
    R"JSON("graph": {"type": "object", "required": true, "doc": "the search state (carried: mcgs_init, then each mcgs_* stage's `graph` output)"})JSON";

const std::string kSearchParams = R"JSON(
  "budget": {"type": "integer", "default": 40, "minimum": 0, "doc": "candidate evaluations (profiled kernels) per problem"},
  "workers": {"type": "integer", "default": 2, "doc": "selections per problem and round = evaluations in flight (kept apart by virtual loss)"},
  "c_puct": {"type": "number", "default": 1.0, "doc": "PUCT exploration weight: Q + c_puct * P * sqrt(N(s)) / (1 + N(s,a))"},
  "widen_k": {"type": "number", "default": 1.0, "doc": "progressive widening: a node may have ceil(widen_k * N^widen_alpha) children"},
  "widen_alpha": {"type": "number", "default": 0.5, "doc": "progressive widening exponent"},
  "dirichlet_alpha": {"type": "number", "default": 0.3, "doc": "concentration of the Dirichlet noise on the root's priors"},
  "noise_eps": {"type": "number", "default": 0.25, "doc": "weight of the root noise: (1 - eps) P + eps * Dir (0 = no noise)"},
  "virtual_loss": {"type": "number", "default": 1.0, "doc": "value charged per in-flight visit while a round selects"},
  "fail_value": {"type": "number", "default": -0.5, "doc": "value of a failed candidate (log-speedup units: -0.5 = as bad as a 1.65x slowdown)"})JSON";

const std::string kInitParams = R"JSON({
  "beam": {"type": "any", "required": true, "doc": "optimize_init's beam (or its outputs): one baseline kernel per problem"},
  "tactics": {"type": "string", "default": "", "doc": "tactics.json of an earlier search whose statistics weight the priors ('' = none)"}
})JSON";

const std::string kPriorsParams = "{" + kGraphParam + R"JSON(,
  "plans": {"type": "any", "required": true, "doc": "native:plan's outputs (or list) for the frontier nodes"},
  "frontier": {"type": "any", "required": true, "doc": "the nodes that need moves (mcgs_init / mcgs_backprop `frontier`)"},
  "prior": {"type": "string", "default": "profile", "enum": ["profile", "rank", "uniform"], "doc": "base prior of a plan without its own `prior`: the per-engine bottleneck model's weight of what the move relieves (accelopt.search.bottleneck; rank where the profile has no busy figures), 1/(1+rank), or uniform"},
  "tactic_weight": {"type": "number", "default": 1.0, "doc": "exponent of the tactic-statistics factor 2(improved+1)/(n+2) (0 = ignore the statistics)"},
  "min_pred_gain": {"type": "number", "default": 0.02, "doc": "moves predicted to gain less (fraction: 0.02 = 2%) are pruned"},
  "tactic_min_count": {"type": "integer", "default": 3, "doc": "evaluations a (rule, bottleneck) needs before its mean gain predicts (0 = never)"},
  "prune_predicted": {"type": "boolean", "default": false, "doc": "let the proposer's own predicted_gain (an estimate, no measurement) prune too"},
  "prune_scope": {"type": "string", "enum": ["problem", "all"], "default": "problem", "doc": "whose tactic statistics may prune a move: the node's own problem's, or every problem's"}
})JSON";

const std::string kSelectParams = "{" + kGraphParam + R"JSON(,
  "iteration": {"type": "integer", "default": 0, "doc": "the round (loop.iteration): seeds the root noise, names the plans"},
  "seed": {"type": "integer", "default": 0, "doc": "base seed of the root noise"},
  "revive_pruned": {"type": "boolean", "default": true, "doc": "when a problem has no live move left but budget to spend, its pruned moves become untried (priors by their weight) instead of the problem ending as exhausted"},
  "llm": {"type": "string", "default": "default", "doc": "LLM endpoint whose spend caps are checked: a problem at its cap is done (done_reason spend_cap, stop_reason the cap; docs/llm.md, Spend caps)"},)JSON" + kSearchParams + "}";

const std::string kMergeStatesParams = "{" + kGraphParam + R"JSON(,
  "execute": {"type": "any", "required": true, "doc": "native:execute's outputs (candidates and failures of the selected moves)"}
})JSON";

const std::string kBackpropParams = "{" + kGraphParam + R"JSON(,
  "records": {"type": "any", "required": true, "doc": "native:score's outputs for the new states"},
  "best": {"type": "any", "default": {}, "doc": "case_name -> best kernel so far (the loop's carry)"},
  "min_gain": {"type": "number", "default": 0.005, "doc": "a correct kernel becomes the incumbent only when faster than it by more than this fraction (clamped to 0..0.5; smaller differences are within the cost model's error; 0 = any gain)"},
  "confidence": {"type": "number", "default": 0.95, "doc": "timed records (samples_ms or trials_ms: FlashInfer-Bench's CPU and GPU timings) become the incumbent only when faster than it beyond this level's interval (docs/optimize.md, Noise-aware speedups); deterministic estimates (the NKI emulator) are not affected"},)JSON" + kSearchParams + "}";

const std::string kInitOutputs = R"JSON({
  "graph": {"type": "object", "doc": "the search state: one graph per problem, rooted at its baseline"},
  "frontier": {"type": "array", "doc": "the roots, which need moves (feed native:plan)"}
})JSON";
const std::string kPriorsOutputs = R"JSON({
  "graph": {"type": "object", "doc": "the search state, frontier nodes with their moves and priors"},
  "frontier": {"type": "array", "doc": "empty (the frontier is served)"},
  "moves": {"type": "integer", "doc": "moves attached"},
  "pruned": {"type": "integer", "doc": "moves pruned below min_pred_gain"}
})JSON";
const std::string kSelectOutputs = R"JSON({
  "graph": {"type": "object", "doc": "the search state, selected moves pending"},
  "plans": {"type": "array", "doc": "one plan per selection, in native:plan's shape (feed native:execute)"},
  "selected": {"type": "integer", "doc": "selections this round"},
  "done": {"type": "boolean", "doc": "every problem is done (budget used or nothing left to expand)"},
  "budget_left": {"type": "integer", "doc": "evaluations the problems not done may still make (budget - evaluations; 0 for a done one): the progress line's budget (carry it as budget_left)"}
})JSON";
const std::string kMergeStatesOutputs = R"JSON({
  "graph": {"type": "object", "doc": "the search state, executed moves attached"},
  "candidates": {"type": "array", "doc": "kernels of new states (feed native:profile), with search_node"},
  "transpositions": {"type": "integer", "doc": "moves that reached a known state"},
  "invalid": {"type": "integer", "doc": "moves that produced no new kernel"}
})JSON";
const std::string kBackpropOutputs = R"JSON({
  "graph": {"type": "object", "doc": "the search state after backpropagation"},
  "best": {"type": "object", "doc": "case_name -> incumbent kernel (native:optimize_results's `best`)"},
  "frontier": {"type": "array", "doc": "new correct states, which need moves"},
  "evaluated": {"type": "integer", "doc": "evaluations backed up"},
  "done": {"type": "boolean", "doc": "every problem is done"},
  "summary": {"type": "object", "doc": "per problem: evaluations, nodes, incumbent, its speedup, done"}
})JSON";

const std::string kAgentInitParams = R"JSON({
  "beam": {"type": "any", "required": true, "doc": "optimize_init's beam (or its outputs): one baseline kernel per problem"},
  "lessons": {"type": "string", "default": "", "doc": "lessons.json of an earlier agent run to start from ('' = none)"}
})JSON";
const std::string kAgentPickParams = R"JSON({
  "state": {"type": "object", "required": true, "doc": "the agent state (carried)"},
  "plans": {"type": "any", "required": true, "doc": "native:plan's outputs (or list) for the current kernels"},
  "reflexion_window": {"type": "integer", "default": 3, "doc": "lessons rendered into the executor prompt (the newest)"},
  "llm": {"type": "string", "default": "default", "doc": "LLM endpoint whose spend caps are checked: a problem at its cap is done, the cap its done_reason (docs/llm.md, Spend caps)"}
})JSON";
const std::string kAgentStepParams = R"JSON({
  "state": {"type": "object", "required": true, "doc": "the agent state (agent_pick's output)"},
  "records": {"type": "any", "required": true, "doc": "native:score's outputs for this round's candidates"},
  "failures": {"type": "any", "default": [], "doc": "native:execute's outputs (candidates that never reached profiling)"},
  "iteration": {"type": "integer", "default": 0, "doc": "the round (loop.iteration)"},
  "divergence_threshold": {"type": "number", "default": 50.0, "doc": "revert to the best when a correct candidate is slower than it by more than this percent (strictly)"},
  "confidence": {"type": "number", "default": 0.95, "doc": "a timed record (samples_ms or trials_ms) becomes the best only when faster than it beyond this level's interval; within it, it is a no_improvement (docs/optimize.md, Noise-aware speedups)"},
  "no_improve_limit": {"type": "integer", "default": 5, "doc": "stop a problem after this many no_improvement rounds in a row"},
  "budget": {"type": "integer", "default": 40, "minimum": 0, "doc": "candidate evaluations per problem"},
  "reflections": {"type": "any", "default": {}, "doc": "native:reflect's `reflections` (case_name -> {lesson}): the model's lesson replaces the template's for a failed or slower attempt (null or {} = template lessons)"}
})JSON";
const std::string kAgentOutputs = R"JSON({
  "state": {"type": "object", "doc": "the agent state"},
  "beam": {"type": "array", "doc": "current kernels of the problems still running (feed native:plan)"},
  "best": {"type": "object", "doc": "case_name -> best kernel (native:optimize_results's best)"}
})JSON";
const std::string kAgentPickOutputs = R"JSON({
  "state": {"type": "object", "doc": "the agent state, this round's picks recorded"},
  "plans": {"type": "array", "doc": "one plan per active problem, its text with error feedback and reflexion (feed native:execute)"},
  "done": {"type": "boolean", "doc": "no problem has a move left"}
})JSON";
const std::string kAgentStepOutputs = R"JSON({
  "state": {"type": "object", "doc": "the agent state after this round"},
  "beam": {"type": "array", "doc": "current kernels of the problems still running"},
  "best": {"type": "object", "doc": "case_name -> best kernel"},
  "rounds": {"type": "array", "doc": "per problem: status and lesson of this round"},
  "done": {"type": "boolean", "doc": "every problem stopped"},
  "budget_left": {"type": "integer", "doc": "evaluations the problems still running may make (budget - evaluations): the progress line's budget (carry it as budget_left)"}
})JSON";

using namespace accelopt_search;

const AccelStageDescriptor kStages[] = {
    ACCELOPT_STAGE_WITH_OUTPUTS("mcgs_init", "Monte-Carlo graph search: one graph per problem rooted at its baseline (canonical state hash), tactic statistics of earlier runs loaded.",
                                kInitParams.c_str(), kInitOutputs.c_str(), RunMcgsInit),
    ACCELOPT_STAGE_WITH_OUTPUTS("mcgs_priors", "Attach proposed moves (native:plan's plans) to frontier nodes with priors from rank or uniform and tactic statistics; prune moves below the minimum predicted gain.",
                                kPriorsParams.c_str(), kPriorsOutputs.c_str(), RunMcgsPriors),
    ACCELOPT_STAGE_WITH_OUTPUTS("mcgs_select", "Select leaves by PUCT with progressive widening, Dirichlet noise on the root's priors and virtual loss between the round's selections; plans for native:execute.",
                                kSelectParams.c_str(), kSelectOutputs.c_str(), RunMcgsSelect),
    ACCELOPT_STAGE_WITH_OUTPUTS("mcgs_merge_states", "Canonical AST hash of each executed move's kernel: a known state merges the move into its node (a transposition edge), a new one becomes a pending node to profile.",
                                kMergeStatesParams.c_str(), kMergeStatesOutputs.c_str(), RunMcgsMergeStates),
    ACCELOPT_STAGE_WITH_OUTPUTS("mcgs_transpose", "Former name of mcgs_merge_states (warns, then runs it).",
                                kMergeStatesParams.c_str(), kMergeStatesOutputs.c_str(), RunMcgsTransposeDeprecated),
    ACCELOPT_STAGE_WITH_OUTPUTS("mcgs_backprop", "Values (log speedup over the baseline; failures penalized) backed up along the selection paths; incumbent, tactic statistics; search_graph.json, events.jsonl, trace.md per evaluation.",
                                kBackpropParams.c_str(), kBackpropOutputs.c_str(), RunMcgsBackprop),
    ACCELOPT_STAGE_WITH_OUTPUTS("agent_init", "Reflexion agent loop: per problem the current and best kernel (the baseline), attempt history and lessons (optionally those of an earlier run).",
                                kAgentInitParams.c_str(), kAgentOutputs.c_str(), RunAgentInit),
    ACCELOPT_STAGE_WITH_OUTPUTS("agent_pick", "Agent planner choice: the first untried proposal per problem, its text extended with the last error and the reflexion lessons for the executor.",
                                kAgentPickParams.c_str(), kAgentPickOutputs.c_str(), RunAgentPick),
    ACCELOPT_STAGE_WITH_OUTPUTS("agent_step", "Agent verdict: keep or revert with the divergence guard, experiments.jsonl and lessons.json, stop after N rounds without improvement or at the budget.",
                                kAgentStepParams.c_str(), kAgentStepOutputs.c_str(), RunAgentStep),
};

}  // namespace

ACCELOPT_EXPORT_PLUGIN("search", "0.1.0", kStages)
