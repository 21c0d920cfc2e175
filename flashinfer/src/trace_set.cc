// flashinfer/src/trace_set.cc - loading, validating and writing trace sets (trace_set.h).
#include "flashinfer/trace_set.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>

#include "flashinfer/safetensors.h"

#include <sys/stat.h>
#include <unistd.h>

#include "accelopt/sdk/nofollow.hpp"

namespace accelopt::fib {
namespace fs = std::filesystem;
namespace {

std::string ReadText(const fs::path& path, std::string* error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    *error = "cannot read the file";
    return "";
  }
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// Files under root/sub matching `ext`, sorted, as paths relative to root.
std::vector<std::string> Scan(const fs::path& root, const std::string& sub, const std::string& ext) {
  std::vector<std::string> out;
  std::error_code ec;
  fs::path dir = root / sub;
  if (!fs::is_directory(dir, ec)) return out;
  for (auto it = fs::recursive_directory_iterator(dir, fs::directory_options::skip_permission_denied, ec);
       it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) break;
    if (it->is_regular_file(ec) && it->path().extension() == ext)
      out.push_back(fs::relative(it->path(), root, ec).generic_string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> Parts(const std::string& relative) {
  std::vector<std::string> parts;
  for (const auto& p : fs::path(relative)) parts.push_back(p.string());
  return parts;
}

std::string Stem(const std::string& relative) { return fs::path(relative).stem().string(); }

// A JSON document from text, with the parse error as a problem.
std::optional<ojson> ParseJson(const std::string& text, const std::string& file, const std::string& field,
                               Problems* problems) {
  try {
    return ojson::parse(text);
  } catch (const ojson::parse_error& error) {
    std::string message = error.what();
    if (auto at = message.find("parse error"); at != std::string::npos) message = message.substr(at);
    problems->push_back({file, field, "invalid JSON: " + message, Problem::kError});
    return std::nullopt;
  }
}

void Warn(Problems* problems, const std::string& file, const std::string& field, const std::string& message) {
  problems->push_back({file, field, message, Problem::kWarning});
}

void Error(Problems* problems, const std::string& file, const std::string& field, const std::string& message) {
  problems->push_back({file, field, message, Problem::kError});
}

}  // namespace

const Definition* TraceSet::FindDefinition(const std::string& name) const {
  for (const auto& d : definitions)
    if (d.value.name == name) return &d.value;
  return nullptr;
}

const Solution* TraceSet::FindSolution(const std::string& name) const {
  for (const auto& s : solutions)
    if (s.value.name == name) return &s.value;
  return nullptr;
}

std::vector<const Workload*> TraceSet::WorkloadsOf(const std::string& definition) const {
  std::vector<const Workload*> out;
  for (size_t i = 0; i < workloads.size(); ++i)
    if (workload_definition[i] == definition) out.push_back(&workloads[i].value);
  return out;
}

std::vector<const Solution*> TraceSet::SolutionsOf(const std::string& definition) const {
  std::vector<const Solution*> out;
  for (const auto& s : solutions)
    if (s.value.definition == definition) out.push_back(&s.value);
  return out;
}

std::vector<const Trace*> TraceSet::TracesOf(const std::string& definition) const {
  std::vector<const Trace*> out;
  for (const auto& t : traces)
    if (t.value.definition == definition) out.push_back(&t.value);
  return out;
}

std::string TraceSet::BlobPath(const std::string& path) const {
  fs::path p(path);
  if (p.is_absolute()) return p.lexically_normal().string();
  return (fs::path(root) / p).lexically_normal().string();
}

// Both paths are built from names only after PathComponent accepted each one.
std::string TraceSet::SolutionPath(const Solution& solution) const {
  const Definition* d = FindDefinition(solution.definition);
  const std::string op_type = PathComponent(d ? d->op_type : "unknown", "definition.op_type");
  const std::string& def = PathComponent(solution.definition, "solution.definition");
  const std::string& name = PathComponent(solution.name, "solution.name");
  if (layout == "accelopt") return "solutions/" + op_type + "/" + def + "/" + name + ".json";
  return "solutions/" + PathComponent(solution.author, "solution.author") + "/" + op_type + "/" + def + "/" + name +
         ".json";
}

std::string TraceSet::TracePath(const std::string& author, const Definition& definition) const {
  const std::string& op_type = PathComponent(definition.op_type, "definition.op_type");
  const std::string& name = PathComponent(definition.name, "definition.name");
  if (layout == "accelopt") return "traces/" + op_type + "/" + name + ".jsonl";
  return "traces/" + PathComponent(author, "solution.author") + "/" + op_type + "/" + name + ".jsonl";
}

TraceSet LoadTraceSet(const std::string& root_text, const LoadOptions& options) {
  std::error_code ec;
  fs::path root = fs::absolute(root_text, ec);
  if (!fs::is_directory(root, ec)) throw std::runtime_error(root_text + " is not a directory");
  TraceSet set;
  set.root = root.lexically_normal().string();
  if (!set.root.empty() && set.root.size() > 1 && set.root.back() == '/') set.root.pop_back();
  Problems* problems = &set.problems;
  bool current = false, accelopt = false;

  for (const auto& file : Scan(root, "definitions", ".json")) {
    std::string error;
    std::string text = ReadText(root / file, &error);
    if (!error.empty()) {
      Error(problems, file, "", error);
      continue;
    }
    auto j = ParseJson(text, file, "", problems);
    if (!j) continue;
    size_t before = ErrorCount(*problems);
    auto d = ParseDefinition(*j, file, problems);
    if (!d) continue;
    CheckDefinition(*d, options.python, file, problems);
    if (ErrorCount(*problems) != before) continue;
    if (set.FindDefinition(d->name) != nullptr) {
      Error(problems, file, "name", "duplicate definition name '" + d->name + "'");
      continue;
    }
    set.definitions.push_back({std::move(*d), file, 0});
  }

  // Workload traces and evaluated traces: JSONL (FIB) and single-object .json (AccelOpt).
  auto read_traces = [&](const std::string& sub, auto&& take) {
    std::vector<std::string> files = Scan(root, sub, ".jsonl");
    std::vector<std::string> singles = Scan(root, sub, ".json");
    if (!singles.empty()) accelopt = true;
    files.insert(files.end(), singles.begin(), singles.end());
    for (const auto& file : files) {
      std::string error;
      std::string text = ReadText(root / file, &error);
      if (!error.empty()) {
        Error(problems, file, "", error);
        continue;
      }
      if (fs::path(file).extension() == ".json") {
        auto j = ParseJson(text, file, "", problems);
        if (!j) continue;
        size_t before = ErrorCount(*problems);
        auto t = ParseTrace(*j, file, problems);
        if (t && t->evaluation) CheckEvaluation(*t->evaluation, file, problems);
        if (t && ErrorCount(*problems) == before) take(std::move(*t), file, 0);
        continue;
      }
      std::stringstream in(text);
      std::string line;
      int number = 0;
      while (std::getline(in, line)) {
        ++number;
        if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
        std::string where = "line " + std::to_string(number) + ": ";
        auto j = ParseJson(line, file, "line " + std::to_string(number), problems);
        if (!j) continue;
        size_t before = ErrorCount(*problems);
        auto t = ParseTrace(*j, file, problems, where);
        if (t && t->evaluation) CheckEvaluation(*t->evaluation, file, problems, where + "evaluation");
        if (t && ErrorCount(*problems) == before) take(std::move(*t), file, number);
      }
    }
  };

  read_traces("workloads", [&](Trace t, const std::string& file, int line) {
    std::string field = line ? "line " + std::to_string(line) : "";
    if (!t.is_workload()) {
      Error(problems, file, field,
            "files under workloads/ hold workload traces only (solution and evaluation null)");
      return;
    }
    set.workload_definition.push_back(t.definition);
    set.workloads.push_back({std::move(t.workload), file, line});
  });

  for (const auto& file : Scan(root, "solutions", ".json")) {
    std::string error;
    std::string text = ReadText(root / file, &error);
    if (!error.empty()) {
      Error(problems, file, "", error);
      continue;
    }
    auto j = ParseJson(text, file, "", problems);
    if (!j) continue;
    size_t before = ErrorCount(*problems);
    auto s = ParseSolution(*j, file, problems);
    if (!s) continue;
    CheckSolution(*s, file, problems);
    if (ErrorCount(*problems) != before) continue;
    if (const Solution* other = set.FindSolution(s->name); other != nullptr) {
      Error(problems, file, "name", "duplicate solution name '" + s->name + "' (solution names are unique in a trace set)");
      continue;
    }
    size_t depth = Parts(file).size();  // solutions/<author>/<op>/<def>/<name>.json = 5
    if (depth == 5) current = true;
    if (depth == 4) accelopt = true;
    set.solutions.push_back({std::move(*s), file, 0});
  }

  read_traces("traces", [&](Trace t, const std::string& file, int line) {
    std::string field = line ? "line " + std::to_string(line) : "";
    if (t.is_workload() || !t.solution || !t.evaluation) {
      Error(problems, file, field, "files under traces/ hold evaluated traces (solution and evaluation set)");
      return;
    }
    size_t depth = Parts(file).size();  // traces/<author>/<op>/<def>.jsonl = 4
    if (fs::path(file).extension() == ".jsonl") {
      if (depth == 4) current = true;
      if (depth == 3) accelopt = true;
    }
    set.traces.push_back({std::move(t), file, line});
  });

  set.layout = current && accelopt ? "mixed" : current ? "current" : accelopt ? "accelopt" : "empty";
  return set;
}

namespace {

void CheckBlob(const TraceSet& set, const Definition& d, const Workload& w, const std::string& file,
               const std::string& where, Problems* problems) {
  for (const auto& [name, desc] : w.inputs) {
    if (desc.type != "safetensors") continue;
    const TensorSpec* spec = Find(d.inputs, name);
    if (spec == nullptr || spec->is_scalar()) continue;  // reported by CheckWorkload
    std::string field = where + "inputs." + name;
    std::string path = set.BlobPath(desc.path);
    std::error_code ec;
    if (!fs::is_regular_file(path, ec)) {
      Error(problems, file, field + ".path", "blob missing at " + desc.path);
      continue;
    }
    try {
      SafetensorsFile blob = SafetensorsFile::Open(path);
      auto it = blob.tensors.find(desc.tensor_key);
      if (it == blob.tensors.end()) {
        Error(problems, file, field + ".tensor_key", "tensor key '" + desc.tensor_key + "' not found in " + desc.path);
        continue;
      }
      std::string missing;
      auto expected = d.Shape(*spec, w.axes, &missing);
      if (expected && *expected != it->second.shape) {
        auto text = [](const std::vector<int64_t>& shape) {
          std::string s = "(";
          for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
          return s + (shape.size() == 1 ? ",)" : ")");
        };
        Error(problems, file, field, name + " shape mismatch: expected " + text(*expected) + ", got " +
                                         text(it->second.shape) + " in " + desc.path);
      }
      auto dtype = FibDType(it->second.dtype);
      if (!dtype || *dtype != spec->dtype)
        Error(problems, file, field, name + " dtype mismatch: the definition says " + spec->dtype + ", " + desc.path +
                                         " holds " + it->second.dtype);
    } catch (const std::exception& error) {
      Error(problems, file, field, std::string("blob load failed: ") + error.what());
    }
  }
}

}  // namespace

Problems Validate(const TraceSet& set) {
  Problems problems = set.problems;
  std::set<std::string> known_definitions;
  for (const auto& [d, file, line] : set.definitions) {
    known_definitions.insert(d.name);
    auto parts = Parts(file);  // definitions/<op_type>/<name>.json
    if (parts.size() == 3) {
      if (parts[1] != d.op_type)
        Error(&problems, file, "op_type", "definition op_type mismatch: path says '" + parts[1] + "', JSON says '" + d.op_type + "'");
      if (Stem(file) != d.name)
        Error(&problems, file, "name", "definition name mismatch: path says '" + Stem(file) + "', JSON says '" + d.name + "'");
    } else {
      Warn(&problems, file, "", "not at definitions/<op_type>/<name>.json (FIB's validate skips it; its loader reads it)");
    }
    if (!d.description || d.description->empty()) Warn(&problems, file, "description", "missing description");
    for (const auto& [name, axis] : d.axes)
      if (!axis.description || axis.description->empty()) Warn(&problems, file, "axes." + name, "missing description");
    for (const auto& [name, spec] : d.inputs)
      if (!spec.description || spec.description->empty()) Warn(&problems, file, "inputs." + name, "missing description");
    for (const auto& [name, spec] : d.outputs)
      if (!spec.description || spec.description->empty()) Warn(&problems, file, "outputs." + name, "missing description");
  }

  std::map<std::string, std::set<std::string>> uuids;  // definition -> workload uuids
  std::set<std::string> files_with_mismatch;
  for (size_t i = 0; i < set.workloads.size(); ++i) {
    const auto& [w, file, line] = set.workloads[i];
    const std::string& def_name = set.workload_definition[i];
    std::string where = line ? "line " + std::to_string(line) + ": workload." : "workload.";
    std::string at = line ? "line " + std::to_string(line) : "";
    const Definition* d = set.FindDefinition(def_name);
    if (d == nullptr) {
      Error(&problems, file, at + (at.empty() ? "" : ": ") + "definition",
            "unknown definition '" + def_name + "'");
      continue;
    }
    if (!uuids[def_name].insert(w.uuid).second)
      Error(&problems, file, where + "uuid", "duplicate workload uuid " + w.uuid + " for " + def_name);
    auto parts = Parts(file);  // workloads/<op_type>/<def>.jsonl
    if (fs::path(file).extension() == ".jsonl") {
      if (parts.size() == 3 && !files_with_mismatch.count(file)) {
        if (parts[1] != d->op_type || Stem(file) != def_name) {
          files_with_mismatch.insert(file);
          Error(&problems, file, at, "workload file path says " + parts[1] + "/" + Stem(file) + ", the trace says " +
                                         d->op_type + "/" + def_name);
        }
      } else if (parts.size() != 3 && !files_with_mismatch.count(file)) {
        files_with_mismatch.insert(file);
        Warn(&problems, file, "", "not at workloads/<op_type>/<definition>.jsonl");
      }
    }
    size_t before = problems.size();
    CheckWorkload(w, *d, file, &problems, where.substr(0, where.size() - 1));
    if (problems.size() == before) CheckBlob(set, *d, w, file, where, &problems);
  }
  for (const auto& name : known_definitions)
    if (!uuids.count(name)) {
      const Definition* d = set.FindDefinition(name);
      Warn(&problems, "workloads/" + d->op_type + "/" + name + ".jsonl", "", "no workloads for definition " + name);
    }

  std::map<std::string, int> baseline_solutions;
  for (const auto& [s, file, line] : set.solutions) {
    const Definition* d = set.FindDefinition(s.definition);
    if (d == nullptr) {
      Error(&problems, file, "definition", "unknown definition '" + s.definition + "'");
      continue;
    }
    if (s.author == "baseline") baseline_solutions[s.definition]++;
    auto parts = Parts(file);
    std::string stem = Stem(file);
    if (parts.size() == 5) {  // solutions/<author>/<op_type>/<def>/<name>.json
      if (parts[1] != s.author)
        Error(&problems, file, "author", "author field '" + s.author + "' != path '" + parts[1] + "'");
      if (parts[2] != d->op_type)
        Error(&problems, file, "", "op_type mismatch: expected '" + d->op_type + "', path says '" + parts[2] + "'");
      if (parts[3] != s.definition)
        Error(&problems, file, "definition", "definition field '" + s.definition + "' != path '" + parts[3] + "'");
      if (stem != s.name) Error(&problems, file, "name", "name field '" + s.name + "' != path '" + stem + "'");
    } else if (parts.size() == 4) {  // AccelOpt's solutions/<op_type>/<def>/<name>.json
      if (parts[1] != d->op_type)
        Error(&problems, file, "", "op_type mismatch: expected '" + d->op_type + "', path says '" + parts[1] + "'");
      if (parts[2] != s.definition)
        Error(&problems, file, "definition", "definition field '" + s.definition + "' != path '" + parts[2] + "'");
    } else {
      Warn(&problems, file, "", "not at solutions/<author>/<op_type>/<definition>/<name>.json");
    }
  }
  for (const auto& name : known_definitions) {
    int count = baseline_solutions.count(name) ? baseline_solutions[name] : 0;
    if (count == 0) Warn(&problems, "solutions/baseline", "", "no baseline solution for " + name);
    if (count > 1)
      Warn(&problems, "solutions/baseline", "", std::to_string(count) + " baseline solutions for " + name +
                                                   " (rankings need exactly one)");
  }

  std::map<std::pair<std::string, std::string>, std::set<std::string>> covered;  // (author file, def) -> uuids
  std::set<std::string> reported_files;
  for (const auto& [t, file, line] : set.traces) {
    std::string at = line ? "line " + std::to_string(line) + ": " : "";
    const Definition* d = set.FindDefinition(t.definition);
    if (d == nullptr) {
      Error(&problems, file, at + "definition", "unknown definition '" + t.definition + "'");
      continue;
    }
    const Solution* s = t.solution ? set.FindSolution(*t.solution) : nullptr;
    if (s == nullptr) {
      Error(&problems, file, at + "solution", "trace references unknown solution '" + t.solution.value_or("") + "'");
    } else if (s->definition != t.definition) {
      Error(&problems, file, at + "solution",
            "solution '" + s->name + "' solves " + s->definition + ", the trace says " + t.definition);
    }
    auto parts = Parts(file);
    if (fs::path(file).extension() == ".jsonl" && !reported_files.count(file)) {
      bool ok = (parts.size() == 4 && parts[2] == d->op_type && Stem(file) == t.definition) ||
                (parts.size() == 3 && parts[1] == d->op_type && Stem(file) == t.definition);
      if (!ok) {
        reported_files.insert(file);
        Error(&problems, file, at + "definition",
              "trace file path does not match " + d->op_type + "/" + t.definition +
                  " (traces/<author>/<op_type>/<definition>.jsonl)");
      }
      if (parts.size() == 4 && parts[1] == "baseline" && s != nullptr && s->author != "baseline")
        Error(&problems, file, at + "solution", "a trace under traces/baseline/ names solution '" + s->name +
                                                     "' by author '" + s->author + "'");
    }
    if (parts.size() == 4) covered[{parts[1], t.definition}].insert(t.workload.uuid);
  }
  for (const auto& [key, seen] : covered) {
    const auto& all = uuids[key.second];
    size_t missing = 0;
    for (const auto& u : all) missing += !seen.count(u);
    if (missing)
      Warn(&problems, "traces/" + key.first, "",
           key.first + " missing " + std::to_string(missing) + "/" + std::to_string(all.size()) + " workloads of " + key.second);
  }
  return problems;
}

void AppendTraces(const std::string& root, const std::string& relative, const std::vector<Trace>& traces) {
  // Every folder and the file are opened below `root` without following a link
  // (docs/isolation.md: a trace set or run folder may hold planted links).
  std::error_code ec;
  fs::create_directories(root, ec);  // the trusted root itself (a run's traces/ or the trace set)
  bool needs_newline = false;
  {
    accelopt::sdk::nofollow::Fd in(accelopt::sdk::nofollow::OpenRead(root, relative));
    struct stat st {};
    char last = 0;
    if (in.get() >= 0 && ::fstat(in.get(), &st) == 0 && st.st_size > 0 &&
        ::pread(in.get(), &last, 1, st.st_size - 1) == 1) {
      needs_newline = last != '\n';
    }
  }
  std::string text = needs_newline ? "\n" : "";
  for (const auto& t : traces) text += DumpCompact(ToJson(t)) + "\n";
  accelopt::sdk::nofollow::Append(root, relative, text);
}

void AppendTraces(const std::string& path, const std::vector<Trace>& traces) {
  fs::path p(path);
  AppendTraces(p.parent_path().string(), p.filename().string(), traces);
}

void WriteSolution(const std::string& path, const Solution& solution) {
  fs::path p(path);
  accelopt::sdk::nofollow::WriteAtomic(p.parent_path(), p.filename(), DumpIndented(ToJson(solution)));
}

}  // namespace accelopt::fib
