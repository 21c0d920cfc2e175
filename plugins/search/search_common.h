// plugins/search/search_common.h - what the `search` plugin's stages share:
// the carried search state ("graph": one case graph per problem, see
// mcgs_core.h), node <-> candidate records, state hashes and small file helpers.
//
// The carried graph:
//   {"version": 1, "round": r, "done": bool, "events": n (lines in events.jsonl),
//    "pending_events": [...], "tactics": {...}, "cases": {case_name: case graph}}
// A case graph adds to mcgs_core.h's fields "case": the case's constant fields
// (problem, values, task, rel_tol, case_id, case_name, baseline_latency_ms).
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "accelopt/plugin_sdk.hpp"
#include "mcgs_core.h"

namespace accelopt_search {

using accelopt::sdk::StageContext;
using accelopt::sdk::StageFailure;

// From the plugin SDK (accelopt/sdk/params.hpp, records.hpp): a list parameter given as a
// list, null or the producing stage's outputs; false for a "screened" record.
using accelopt::sdk::ListParam;
using accelopt::sdk::ValidatedForResult;
// From the plugin SDK (accelopt/sdk/files.hpp, numbers.hpp): the whole file or
// StageFailure{io_error}; a number field or nullopt; "1.234".
using accelopt::sdk::Fixed;
using accelopt::sdk::Number;
using accelopt::sdk::ReadText;

/// Atomic, checked writes (accelopt::sdk::WriteFile).
void WriteText(const std::filesystem::path& path, const std::string& text);
void WriteJson(const std::filesystem::path& path, const json& value);

/// Canonical state hashes of kernel files (accelopt.search.canon.state_hashes); "" when unreadable.
std::vector<std::string> StateHashes(StageContext& ctx, const std::vector<std::string>& paths);

/// The candidate record of node `id` (the fields native:plan and native:execute, or
/// fib_plan and fib_execute, read: id, problem, case_name, values, task, rel_tol, item,
/// kernel, solution, latency_ms, samples_ms, trials_ms, baseline_latency_ms, lineage,
/// history, ...) plus "search_node".
json MemberOf(const json& case_graph, const std::string& id);
/// The node fields kept from a candidate record (id, kernel, solution, repeats, lineage,
/// history, origin, plan title).
json NodeFieldsFrom(const json& record);

/// Dominant resource of profile metrics: metrics.bottleneck, else the busiest engine, else "unknown".
std::string Bottleneck(const json& metrics);

/// Adds an event to graph.pending_events (written to events.jsonl by native:mcgs_backprop).
void AddEvent(json& graph, json event);

/// The graph parameter of a stage (`with.graph`), checked.
json GraphParam(StageContext& ctx);

}  // namespace accelopt_search
