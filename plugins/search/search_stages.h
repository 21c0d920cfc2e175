// plugins/search/search_stages.h - the stages of the `search` plugin: the
// Monte-Carlo graph search (mcgs_*) and the reflexion agent loop (agent_*).
// docs/search.md describes the loops and their data.
#pragma once

#include "search_common.h"

namespace accelopt_search {

/// native:mcgs_init - search state from the baseline beam; first frontier.
json RunMcgsInit(StageContext& ctx);
/// native:mcgs_priors - attaches proposed moves (native:plan's plans) to frontier nodes with priors; prunes weak moves.
json RunMcgsPriors(StageContext& ctx);
/// native:mcgs_select - PUCT + progressive widening + root Dirichlet noise + virtual loss -> plans to execute.
json RunMcgsSelect(StageContext& ctx);
/// native:mcgs_merge_states - canonical state hashes of executed moves; known states merged (transpositions); new states to profile.
json RunMcgsMergeStates(StageContext& ctx);
/// native:mcgs_transpose - the former name of mcgs_merge_states: warns, then runs it.
json RunMcgsTransposeDeprecated(StageContext& ctx);
/// native:mcgs_backprop - values of the evaluated states backed up along their paths; incumbent; files.
json RunMcgsBackprop(StageContext& ctx);

/// tactics.json of an earlier run ({"version", "entries"}); empty statistics for "".
json LoadTactics(const std::string& path);

/// Writes search_graph.json, events.jsonl (the first graph.events lines of the
/// existing file, then graph.pending_events) and trace.md into `dir`, and
/// tactics.json; all atomically. Moves the pending events into the count.
void PersistSearch(const std::filesystem::path& dir, json& graph);
/// trace.md from the events.
std::string RenderTrace(const std::vector<json>& events);

}  // namespace accelopt_search
