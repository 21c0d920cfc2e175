// flashinfer/trace_set.h - a FIB trace set on disk: loading (recursive, any
// depth, FIB's current layout and AccelOpt's older one), validation as
// `flashinfer-bench validate` does it, and writing traces (flashinfer-facts §1.5).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "flashinfer/model.h"

namespace accelopt::fib {

/// An object and where it was read from.
template <class T>
struct Located {
  T value;
  std::string file;  ///< path relative to the trace set's root
  int line = 0;      ///< 1-based line of a JSONL file; 0 for single-object files
};

struct TraceSet {
  std::string root;  ///< absolute path
  std::vector<Located<Definition>> definitions;
  std::vector<Located<Workload>> workloads;  ///< with their definition's name in `workload_definition`
  std::vector<std::string> workload_definition;
  std::vector<Located<Solution>> solutions;
  std::vector<Located<Trace>> traces;  ///< evaluated traces (files under traces/)
  /// "current" (solutions/<author>/<op_type>/<def>/, traces/<author>/<op_type>/),
  /// "accelopt" (solutions/<op_type>/<def>/, traces/<op_type>/, single-trace .json
  /// files), "mixed", or "empty" (no solution or trace files).
  std::string layout = "empty";
  /// Problems met while reading: unreadable files, bad JSON, fields of the
  /// wrong type, FIB's model-validator rules, duplicate names.
  Problems problems;

  const Definition* FindDefinition(const std::string& name) const;
  const Solution* FindSolution(const std::string& name) const;
  /// The definition's workloads, in file order.
  std::vector<const Workload*> WorkloadsOf(const std::string& definition) const;
  std::vector<const Solution*> SolutionsOf(const std::string& definition) const;
  std::vector<const Trace*> TracesOf(const std::string& definition) const;
  /// Absolute path of a workload's safetensors blob (relative paths are relative to the root).
  std::string BlobPath(const std::string& path) const;
  /// Where `solution` lives in this set's layout, relative to the root
  /// (current: solutions/<author>/<op_type>/<def>/<name>.json; accelopt: solutions/<op_type>/<def>/<name>.json).
  std::string SolutionPath(const Solution& solution) const;
  /// Where traces of `author` for `definition` go (current: traces/<author>/<op_type>/<def>.jsonl;
  /// accelopt: traces/<op_type>/<def>.jsonl). Both throw std::invalid_argument
  /// when a name may not be a path component (PathComponent).
  std::string TracePath(const std::string& author, const Definition& definition) const;
};

struct LoadOptions {
  /// Checks the Python of references and constraints; default: the heuristic.
  PythonSyntax python = HeuristicPython();
};

/// Loads every definitions/**/*.json, workloads/**/*.jsonl (and AccelOpt's
/// single-workload .json files), solutions/**/*.json and traces/**/*.jsonl
/// (and AccelOpt's single-trace .json files) under `root`. Empty JSONL lines
/// are skipped; unknown keys ignored. An object with problems is left out
/// and its problems recorded. Throws std::runtime_error only when `root` is
/// not a directory.
TraceSet LoadTraceSet(const std::string& root, const LoadOptions& options = {});

/// FIB's validate checks (layout, definition, workload, solution, trace,
/// baseline; not the GPU benchmark): the load problems plus path/field
/// agreement, workloads against their definitions (axes, inputs, scalar vs
/// tensor, blobs: present, not an LFS pointer, key, shape and dtype),
/// solutions and traces referring to known definitions and solutions,
/// workload files holding only workload traces and trace files none.
/// Warnings (FIB's): missing descriptions, no workloads, no `baseline`
/// solution or trace, authors whose traces miss workloads.
Problems Validate(const TraceSet& set);

/// Appends traces as JSONL lines (DumpCompact of ToJson) to `path`, creating
/// its folders; adds a missing final newline first, as FIB's appender does.
/// Throws std::runtime_error on an I/O error.
void AppendTraces(const std::string& path, const std::vector<Trace>& traces);
/// The same below a trusted `root`: no folder or file on the way to `relative`
/// may be a link (accelopt/sdk/nofollow.hpp); a link fails with a clear error.
void AppendTraces(const std::string& root, const std::string& relative, const std::vector<Trace>& traces);
/// Writes `solution` as FIB does (2-space indented JSON, unset fields left out),
/// atomically through a fresh temporary file (a link at `path` is replaced, never followed).
void WriteSolution(const std::string& path, const Solution& solution);

}  // namespace accelopt::fib
