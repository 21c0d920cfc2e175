// flashinfer/model.h - FlashInfer-Bench's data model in C++: Definition,
// Workload, Solution, Trace (docs/flashinfer.md; the facts behind every rule
// are in docs/flashinfer-facts.md §1).
//
// Reading follows FIB's pydantic models: unknown keys are ignored, a missing
// required field or a value of the wrong type is a Problem (file, field path,
// message), and fields left out take FIB's defaults (tags/constraints [],
// dependencies [], destination_passing_style true, binding null, log "",
// correctness and performance fields 0.0). The cross-field rules of FIB's
// model validators run after the fields parsed (Check* functions). Objects
// remember which optional fields were present, so writing a parsed object
// gives the same keys back (FIB writes single objects with exclude_unset).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace accelopt::fib {

/// JSON with its keys in file order (a definition's input order is the call order).
using ojson = nlohmann::ordered_json;

/// One problem found while reading or validating an object.
struct Problem {
  enum Level { kError, kWarning };
  std::string file;   ///< the file it is in ("" for objects not read from a file)
  std::string field;  ///< where in it: "inputs.x.shape[1]", "line 3: workload.axes.M" ("" for the whole file)
  std::string message;
  Level level = kError;
};
using Problems = std::vector<Problem>;

/// Number of kError problems in `problems`.
size_t ErrorCount(const Problems& problems);

// --- Names that become path components ----------------------------------------
// A definition's name and op_type, a solution's name, definition and author
// become folder and file names (traces/<author>/<op_type>/<definition>.jsonl).
// FIB's validate accepts only sets whose fields equal their path components;
// here such a name must be a plain identifier before it is joined to a path:
// 1 to 128 ASCII letters, digits, '_', '-', '.', '+', starting with a letter,
// a digit or '_', without "..". The Python twin is accelopt.fib.names.

/// Why `name` may not be a path component; nullopt when it may.
std::optional<std::string> NameProblem(const std::string& name);
/// `name` when it may be a path component; else throws std::invalid_argument
/// "<field>: <why>". Every path built from a name goes through it.
const std::string& PathComponent(const std::string& name, const std::string& field);

/// An ordered map (the order of a JSON object's keys).
template <class T>
using Named = std::vector<std::pair<std::string, T>>;

template <class T>
const T* Find(const Named<T>& items, const std::string& name) {
  for (const auto& [key, value] : items)
    if (key == name) return &value;
  return nullptr;
}

/// FIB's dtypes: float32, float16, bfloat16, float8_e4m3fn, float8_e5m2,
/// float4_e2m1, int64, int32, int16, int8, bool.
const std::vector<std::string>& DTypes();
bool IsDType(const std::string& name);
/// Bytes per element (float4_e2m1: 1, two values packed per byte as torch's float4_e2m1fn_x2).
size_t DTypeSize(const std::string& dtype);

struct Axis {
  bool is_const = false;             ///< {"type": "const", "value"} or {"type": "var"}
  int64_t value = 0;                 ///< const axes only
  bool type_set = false;             ///< "type" was written (always written back)
  std::optional<std::string> description;
  std::optional<std::string> parent;  ///< older definitions' var axes may name a parent axis (kept, unused)
};

struct TensorSpec {
  std::optional<std::vector<std::string>> shape;  ///< nullopt: a Python scalar (shape null)
  std::string dtype;
  std::optional<std::string> description;
  bool is_scalar() const { return !shape.has_value(); }
};

struct Definition {
  std::string name, op_type;
  Named<Axis> axes;
  Named<TensorSpec> inputs, outputs;
  std::string reference;
  std::optional<std::vector<std::string>> tags;         ///< unset: []
  std::optional<std::string> description;
  std::optional<std::vector<std::string>> constraints;  ///< unset: []

  std::vector<std::string> Tags() const { return tags.value_or(std::vector<std::string>{}); }
  std::vector<std::string> Constraints() const { return constraints.value_or(std::vector<std::string>{}); }
  std::vector<std::string> VarAxes() const;
  /// Concrete shape of `spec` for the var-axis values `var` (name -> value);
  /// nullopt and *missing = the first var axis without a value.
  std::optional<std::vector<int64_t>> Shape(const TensorSpec& spec, const Named<int64_t>& var,
                                            std::string* missing = nullptr) const;
};

/// A workload input: {"type": "random"}, {"type": "scalar", "value"},
/// {"type": "safetensors", "path", "tensor_key"}.
struct InputDesc {
  std::string type = "random";
  bool type_set = false;
  ojson value;  ///< scalar: int, float or bool
  std::string path, tensor_key;
};

struct Workload {
  std::string uuid;
  Named<int64_t> axes;  ///< var axes only
  Named<InputDesc> inputs;
};

struct SourceFile {
  std::string path, content;
};

struct BuildSpec {
  std::string language;  ///< python | triton | cpp | cuda | tilelang
  std::vector<std::string> target_hardware;
  std::string entry_point;  ///< "<file>::<symbol>"
  std::optional<std::vector<std::string>> dependencies;  ///< unset: []
  std::optional<bool> destination_passing_style;         ///< unset: true in FIB (legacy solutions: see docs)
  bool binding_set = false;                              ///< "binding" was written (possibly null)
  std::optional<std::string> binding;                    ///< tvm-ffi | torch | null (= tvm-ffi)

  std::string EntryFile() const;    ///< the part before "::"
  std::string EntrySymbol() const;  ///< the part after "::"
};

struct Solution {
  std::string name, definition, author;
  BuildSpec spec;
  std::vector<SourceFile> sources;
  std::optional<std::string> description;

  /// FIB's content hash: SHA-1 (hex) over definition, language, entry point,
  /// binding, dependencies, then each source's path and content; the name
  /// is not included.
  std::string Hash() const;
};

struct Environment {
  std::string hardware;
  Named<std::string> libs;
};

struct Correctness {
  double max_relative_error = 0.0, max_absolute_error = 0.0;  ///< may be NaN or infinite
  ojson extra;  ///< null or an object
};

struct Performance {
  double latency_ms = 0.0, reference_latency_ms = 0.0, speedup_factor = 0.0;
};

/// The evaluation statuses.
inline constexpr const char* kStatuses[] = {"PASSED",        "INCORRECT_SHAPE", "INCORRECT_NUMERICAL", "INCORRECT_DTYPE",
                                            "RUNTIME_ERROR", "COMPILE_ERROR",   "TIMEOUT"};
bool IsStatus(const std::string& status);

struct Evaluation {
  std::string status;
  Environment environment;
  std::string timestamp;
  std::string log;
  std::optional<Correctness> correctness;
  std::optional<Performance> performance;
};

struct Trace {
  std::string definition;
  Workload workload;
  std::optional<std::string> solution;
  std::optional<Evaluation> evaluation;
  bool is_workload() const { return !solution && !evaluation; }
};

// --- Python syntax ----------------------------------------------------------

/// Checks Python source without running it. `module`: returns an error
/// message when `source` does not parse or defines no top-level `def run`;
/// `expression`: an error when `source` is not one Python expression. The
/// host supplies one backed by `ast` (accelopt.fib.syntax); without one,
/// HeuristicPython only looks for a top-level `def run(` and accepts every
/// expression.
struct PythonSyntax {
  std::function<std::optional<std::string>(const std::string& source)> module;
  std::function<std::optional<std::string>(const std::string& source)> expression;
};
PythonSyntax HeuristicPython();

// --- Reading -----------------------------------------------------------------
// Each returns nullopt when a field is missing or of the wrong type (the
// problems say which); otherwise the object, whose cross-field rules are then
// checked by the matching Check* function (which the Read* functions of
// trace_set.h call for you). `where` prefixes every field path ("line 3: ").

std::optional<Definition> ParseDefinition(const ojson& j, const std::string& file, Problems* problems,
                                          const std::string& where = "");
std::optional<Workload> ParseWorkload(const ojson& j, const std::string& file, Problems* problems,
                                      const std::string& where = "workload");
std::optional<Solution> ParseSolution(const ojson& j, const std::string& file, Problems* problems,
                                      const std::string& where = "");
std::optional<Evaluation> ParseEvaluation(const ojson& j, const std::string& file, Problems* problems,
                                          const std::string& where = "evaluation");
std::optional<Trace> ParseTrace(const ojson& j, const std::string& file, Problems* problems,
                                const std::string& where = "");

/// Reading also refuses (field by field, with NameProblem's reason) a
/// definition's name or op_type, a solution's name, definition or author and
/// a trace's definition that may not be a path component.
///
/// FIB's model validators (§1.1, §1.3, §1.4): reference parses with a
/// top-level run, shape axes exist, outputs do not reuse input names,
/// constraints are expressions; sources are relative, without "..", unique,
/// the entry file among them, entry point "<file>::<symbol>"; status versus
/// correctness/performance presence, errors >= 0 or NaN. Each adds problems.
void CheckDefinition(const Definition& d, const PythonSyntax& python, const std::string& file, Problems* problems,
                     const std::string& where = "");
void CheckSolution(const Solution& s, const std::string& file, Problems* problems, const std::string& where = "");
void CheckEvaluation(const Evaluation& e, const std::string& file, Problems* problems,
                     const std::string& where = "evaluation");
/// The workload against its definition (FIB's validate, [workload]): every
/// var axis given, no other, each > 0; input names equal the definition's;
/// scalar descriptors only for shape-null inputs and tensors for the rest.
void CheckWorkload(const Workload& w, const Definition& d, const std::string& file, Problems* problems,
                   const std::string& where = "workload");

// --- Writing -----------------------------------------------------------------
// Keys in FIB's field order. Single objects (Definition, Solution) omit the
// optional fields that were not set, as FIB's exclude_unset files do; Traces
// are written whole (model_dump_json), with null solution/evaluation and
// non-finite errors as "Infinity", "-Infinity", "NaN".

ojson ToJson(const Definition& d);
ojson ToJson(const Workload& w);
ojson ToJson(const Solution& s);
ojson ToJson(const Evaluation& e);
ojson ToJson(const Trace& t);

/// A double as FIB writes it: a number, or "Infinity" / "-Infinity" / "NaN".
ojson FloatJson(double value);
/// The inverse, for reading: a number, or one of those strings ("inf", "nan"
/// too, as Python's float() accepts). nullopt for anything else.
std::optional<double> FloatFrom(const ojson& value);

/// One compact line (no spaces, UTF-8 kept, no trailing newline), as
/// pydantic's model_dump_json(indent=None).
std::string DumpCompact(const ojson& value);
/// 2-space indented, as FIB's single-object files (model_dump_json(indent=2)).
std::string DumpIndented(const ojson& value);

}  // namespace accelopt::fib
