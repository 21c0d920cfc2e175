// plugins/flashinfer/common.h - helpers shared by the FlashInfer-Bench stages
// (docs/flashinfer.md).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "accelopt/plugin_sdk.hpp"
#include "flashinfer/model.h"
#include "flashinfer/trace_set.h"

namespace accelopt_fib_plugin {

using nlohmann::json;
namespace fib = accelopt::fib;

/// ordered JSON -> the SDK's JSON (key order is lost: only for objects whose order does not matter).
json ToJson(const fib::ojson& value);
/// The SDK's JSON -> ordered JSON.
fib::ojson ToOrdered(const json& value);

/// FIB's Python checks through the host's interpreter (accelopt.fib.syntax),
/// falling back to the heuristic when Python is unavailable.
fib::PythonSyntax HostPython(const accelopt::sdk::StageContext& ctx);

/// The definition of a select_traces item (its `definition_text`, which keeps
/// the inputs' call order). Throws StageFailure(config_error).
fib::Definition ItemDefinition(const json& item);
/// Parses a Solution given as JSON (throws StageFailure(config_error) with the problems).
fib::Solution ParseSolutionJson(const json& value);
fib::Workload ParseWorkloadJson(const json& value);

/// The local time as FIB writes it (datetime.now().isoformat(): no zone, microseconds).
std::string IsoNow();

/// A list parameter of strings (a missing or null one is empty).
std::vector<std::string> StringList(const json& value);

/// Problems as "file: field: message" lines.
std::vector<std::string> ProblemLines(const fib::Problems& problems, bool errors_only);

/// The source of a Solution's entry point file (main.py of main.py::run); the first source
/// when no file matches.
std::string EntrySource(const json& solution);

/// The solution's entry source written as <stage dir>/kernels/<name>.py (.cu for cuda), the
/// file the search stages hash into a state (accelopt.search.canon); returns its path.
/// Throws StageFailure(config_error) for a name that is no path component.
std::string WriteKernelSource(const accelopt::sdk::StageContext& ctx, const json& solution);

}  // namespace accelopt_fib_plugin
