// flashinfer/src/model.cc - reading, checking and writing FIB's objects (model.h).
#include "flashinfer/model.h"

#include <openssl/evp.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <set>
#include <sstream>
#include <stdexcept>

namespace accelopt::fib {
namespace {

// Field paths: "inputs.x.shape[1]", prefixed by `where` when given.
std::string Join(const std::string& where, const std::string& field) {
  if (where.empty()) return field;
  if (field.empty()) return where;
  if (where.back() == ' ') return where + field;  // "line 3: " prefixes
  if (field[0] == '[') return where + field;
  return where + "." + field;
}

// One reader of an object's fields with FIB's (pydantic's lax JSON) rules.
class Reader {
 public:
  Reader(const ojson& j, const std::string& file, Problems* problems, const std::string& where)
      : j_(j), file_(file), problems_(problems), where_(where) {}

  bool ok() const { return ok_; }
  void MarkFailed() { ok_ = false; }  // a nested reader reported the details
  void Fail(const std::string& field, const std::string& message) {
    problems_->push_back({file_, Join(where_, field), message, Problem::kError});
    ok_ = false;
  }
  bool IsObject() {
    if (j_.is_object()) return true;
    Fail("", "expected a JSON object, got " + std::string(j_.type_name()));
    return false;
  }
  const ojson* Get(const std::string& key) const {
    auto it = j_.find(key);
    return it == j_.end() ? nullptr : &*it;
  }
  // A required non-null field.
  const ojson* Required(const std::string& key) {
    const ojson* v = Get(key);
    if (v == nullptr) Fail(key, "field required");
    return v;
  }
  std::string Str(const std::string& key, bool required, bool non_empty, bool* present = nullptr) {
    const ojson* v = required ? Required(key) : Get(key);
    if (present) *present = v != nullptr && !v->is_null();
    if (v == nullptr || (!required && v->is_null())) return "";
    if (!v->is_string()) {
      Fail(key, "expected a string, got " + std::string(v->type_name()));
      return "";
    }
    const auto& s = v->get_ref<const std::string&>();
    if (non_empty && s.empty()) Fail(key, "must be a non-empty string");
    return s;
  }
  // A required name that will become a path component (NameProblem).
  std::string Name(const std::string& key) {
    const ojson* v = Get(key);
    std::string s = Str(key, true, true);
    if (v != nullptr && v->is_string() && !s.empty())
      if (auto why = NameProblem(s)) Fail(key, *why);
    return s;
  }
  std::optional<std::string> OptStr(const std::string& key) {
    const ojson* v = Get(key);
    if (v == nullptr || v->is_null()) return std::nullopt;
    if (!v->is_string()) {
      Fail(key, "expected a string or null, got " + std::string(v->type_name()));
      return std::nullopt;
    }
    return v->get<std::string>();
  }
  std::optional<std::vector<std::string>> StrList(const std::string& key, bool required, bool non_empty_items,
                                                  size_t min_items = 0) {
    const ojson* v = required ? Required(key) : Get(key);
    if (v == nullptr) return std::nullopt;
    if (!v->is_array()) {
      Fail(key, "expected a list of strings, got " + std::string(v->type_name()));
      return std::nullopt;
    }
    std::vector<std::string> out;
    for (size_t i = 0; i < v->size(); ++i) {
      const auto& item = (*v)[i];
      std::string at = key + "[" + std::to_string(i) + "]";
      if (!item.is_string()) {
        Fail(at, "expected a string, got " + std::string(item.type_name()));
        continue;
      }
      if (non_empty_items && item.get_ref<const std::string&>().empty()) Fail(at, "must be a non-empty string");
      out.push_back(item.get<std::string>());
    }
    if (out.size() < min_items) Fail(key, "must have at least " + std::to_string(min_items) + " item(s)");
    return out;
  }

  const ojson& json() const { return j_; }
  const std::string& file() const { return file_; }
  Problems* problems() const { return problems_; }
  std::string Where(const std::string& field) const { return Join(where_, field); }

 private:
  const ojson& j_;
  const std::string& file_;
  Problems* problems_;
  std::string where_;
  bool ok_ = true;
};

// pydantic's lax int: an integer, or a float with no fractional part.
std::optional<int64_t> IntFrom(const ojson& v) {
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_number_float()) {
    double d = v.get<double>();
    if (std::isfinite(d) && std::floor(d) == d && std::fabs(d) < 9.2e18) return static_cast<int64_t>(d);
  }
  return std::nullopt;
}

std::optional<bool> BoolFrom(const ojson& v) {
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_number_integer()) {
    auto i = v.get<int64_t>();
    if (i == 0 || i == 1) return i == 1;
  }
  if (v.is_string()) {
    std::string s = v.get<std::string>();
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
    if (s == "true" || s == "1" || s == "yes" || s == "on" || s == "t" || s == "y") return true;
    if (s == "false" || s == "0" || s == "no" || s == "off" || s == "f" || s == "n") return false;
  }
  return std::nullopt;
}

std::optional<TensorSpec> ParseTensorSpec(const ojson& j, Reader& parent, const std::string& field) {
  Reader r(j, parent.file(), parent.problems(), parent.Where(field));
  if (!r.IsObject()) return std::nullopt;
  TensorSpec spec;
  const ojson* shape = r.Required("shape");
  if (shape != nullptr && !shape->is_null()) {
    if (!shape->is_array()) {
      r.Fail("shape", "expected a list of axis names or null, got " + std::string(shape->type_name()));
    } else {
      std::vector<std::string> axes;
      for (size_t i = 0; i < shape->size(); ++i) {
        const auto& a = (*shape)[i];
        if (!a.is_string() || a.get_ref<const std::string&>().empty())
          r.Fail("shape[" + std::to_string(i) + "]", "expected a non-empty axis name");
        else
          axes.push_back(a.get<std::string>());
      }
      spec.shape = axes;
    }
  }
  spec.dtype = r.Str("dtype", true, false);
  if (r.Get("dtype") && r.Get("dtype")->is_string() && !IsDType(spec.dtype))
    r.Fail("dtype", "unknown dtype '" + spec.dtype + "' (one of float32, float16, bfloat16, float8_e4m3fn, "
                    "float8_e5m2, float4_e2m1, int64, int32, int16, int8, bool)");
  spec.description = r.OptStr("description");
  if (!r.ok()) return std::nullopt;
  return spec;
}

std::optional<Axis> ParseAxis(const ojson& j, Reader& parent, const std::string& field) {
  Reader r(j, parent.file(), parent.problems(), parent.Where(field));
  if (!r.IsObject()) return std::nullopt;
  Axis axis;
  const ojson* type = r.Get("type");
  std::string kind;
  if (type != nullptr) {
    axis.type_set = true;
    if (!type->is_string() || (type->get<std::string>() != "const" && type->get<std::string>() != "var")) {
      r.Fail("type", "must be \"const\" or \"var\"");
      return std::nullopt;
    }
    kind = type->get<std::string>();
  } else {
    kind = r.Get("value") != nullptr ? "const" : "var";  // AxisConst needs `value`; else AxisVar
  }
  axis.is_const = kind == "const";
  if (axis.is_const) {
    const ojson* value = r.Required("value");
    if (value != nullptr) {
      auto v = IntFrom(*value);
      if (!v) r.Fail("value", "expected an integer");
      else if (*v < 0) r.Fail("value", "must be >= 0");
      else axis.value = *v;
    }
  }
  axis.description = r.OptStr("description");
  axis.parent = r.OptStr("parent");
  if (!r.ok()) return std::nullopt;
  return axis;
}

template <class T, class F>
std::optional<Named<T>> ParseNamed(Reader& r, const std::string& key, F parse_one) {
  const ojson* v = r.Required(key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_object()) {
    r.Fail(key, "expected an object, got " + std::string(v->type_name()));
    return std::nullopt;
  }
  Named<T> out;
  bool ok = true;
  for (auto it = v->begin(); it != v->end(); ++it) {
    if (it.key().empty()) {
      r.Fail(key, "names must be non-empty");
      ok = false;
      continue;
    }
    auto item = parse_one(it.value(), r, key + "." + it.key());
    if (!item) {
      ok = false;
      continue;
    }
    out.emplace_back(it.key(), std::move(*item));
  }
  if (!ok) {
    // The nested readers reported the details; mark the parent as failed too.
    r.MarkFailed();
    return std::nullopt;
  }
  return out;
}

void Add(Problems* problems, const std::string& file, const std::string& field, const std::string& message,
         Problem::Level level = Problem::kError) {
  problems->push_back({file, field, message, level});
}

bool HasParentRef(const std::string& path) {
  std::stringstream in(path);
  std::string part;
  while (std::getline(in, part, '/'))
    if (part == "..") return true;
  return false;
}

std::string FormatDouble(double v) {
  // Shortest text that reads back to the same double (as Python's repr).
  char buf[40];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof(buf), "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

}  // namespace

std::optional<std::string> NameProblem(const std::string& name) {
  constexpr size_t kMaxLength = 128;
  auto quoted = [&name]() { return DumpCompact(ojson(name)); };  // NUL and control bytes escaped
  if (name.empty()) return "must not be empty";
  if (name.size() > kMaxLength)
    return "must be at most " + std::to_string(kMaxLength) + " characters, got " + std::to_string(name.size());
  if (name.find("..") != std::string::npos) return "must not contain '..', got " + quoted();
  auto plain = [](unsigned char c) { return (c < 0x80 && std::isalnum(c)) || c == '_'; };
  bool ok = plain(static_cast<unsigned char>(name[0]));
  for (unsigned char c : name) ok = ok && (plain(c) || c == '-' || c == '.' || c == '+');
  if (!ok)
    return "must be a plain name (ASCII letters, digits, '_', '-', '.', '+'; not starting with '.', '-' or '+'), "
           "got " + quoted();
  return std::nullopt;
}

const std::string& PathComponent(const std::string& name, const std::string& field) {
  if (auto why = NameProblem(name)) throw std::invalid_argument(field + ": " + *why);
  return name;
}

size_t ErrorCount(const Problems& problems) {
  return static_cast<size_t>(
      std::count_if(problems.begin(), problems.end(), [](const Problem& p) { return p.level == Problem::kError; }));
}

const std::vector<std::string>& DTypes() {
  static const std::vector<std::string> kAll = {"float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2",
                                                "float4_e2m1", "int64", "int32", "int16", "int8", "bool"};
  return kAll;
}

bool IsDType(const std::string& name) {
  const auto& all = DTypes();
  return std::find(all.begin(), all.end(), name) != all.end();
}

size_t DTypeSize(const std::string& dtype) {
  if (dtype == "float32" || dtype == "int32") return 4;
  if (dtype == "float16" || dtype == "bfloat16" || dtype == "int16") return 2;
  if (dtype == "int64") return 8;
  return 1;  // fp8, fp4 (packed pairs), int8, bool
}

bool IsStatus(const std::string& status) {
  for (const char* s : kStatuses)
    if (status == s) return true;
  return false;
}

std::vector<std::string> Definition::VarAxes() const {
  std::vector<std::string> out;
  for (const auto& [name, axis] : axes)
    if (!axis.is_const) out.push_back(name);
  return out;
}

std::optional<std::vector<int64_t>> Definition::Shape(const TensorSpec& spec, const Named<int64_t>& var,
                                                      std::string* missing) const {
  std::vector<int64_t> out;
  if (!spec.shape) return out;
  for (const auto& name : *spec.shape) {
    const Axis* axis = Find(axes, name);
    if (axis != nullptr && axis->is_const) {
      out.push_back(axis->value);
      continue;
    }
    const int64_t* value = Find(var, name);
    if (value == nullptr) {
      if (missing) *missing = name;
      return std::nullopt;
    }
    out.push_back(*value);
  }
  return out;
}

std::string BuildSpec::EntryFile() const {
  auto at = entry_point.find("::");
  return at == std::string::npos ? entry_point : entry_point.substr(0, at);
}

std::string BuildSpec::EntrySymbol() const {
  auto at = entry_point.find("::");
  return at == std::string::npos ? "" : entry_point.substr(at + 2);
}

std::string Solution::Hash() const {
  // Fields separated by NUL so that no two different solutions share a text.
  std::string text;
  auto put = [&text](const std::string& s) {
    text += s;
    text.push_back('\0');
  };
  put(definition);
  put(spec.language);
  put(spec.entry_point);
  put(spec.binding.value_or(""));
  for (const auto& d : spec.dependencies.value_or(std::vector<std::string>{})) put(d);
  put("");
  for (const auto& s : sources) {
    put(s.path);
    put(s.content);
  }
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  EVP_Digest(text.data(), text.size(), digest, &size, EVP_sha1(), nullptr);
  static const char* kHex = "0123456789abcdef";
  std::string hex;
  for (unsigned int i = 0; i < size; ++i) {
    hex.push_back(kHex[digest[i] >> 4]);
    hex.push_back(kHex[digest[i] & 15]);
  }
  return hex;
}

PythonSyntax HeuristicPython() {
  PythonSyntax syntax;
  syntax.module = [](const std::string& source) -> std::optional<std::string> {
    std::stringstream in(source);
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind("def run", 0) == 0) {
        size_t at = 7;
        while (at < line.size() && (line[at] == ' ' || line[at] == '\t')) ++at;
        if (at < line.size() && line[at] == '(') return std::nullopt;
      }
    }
    return std::string("must define a top-level function named 'run'");
  };
  syntax.expression = [](const std::string&) -> std::optional<std::string> { return std::nullopt; };
  return syntax;
}

// --- Parsing -----------------------------------------------------------------

std::optional<Definition> ParseDefinition(const ojson& j, const std::string& file, Problems* problems,
                                          const std::string& where) {
  Reader r(j, file, problems, where);
  if (!r.IsObject()) return std::nullopt;
  Definition d;
  d.name = r.Name("name");
  d.op_type = r.Name("op_type");
  if (auto axes = ParseNamed<Axis>(r, "axes", ParseAxis)) d.axes = std::move(*axes);
  if (auto inputs = ParseNamed<TensorSpec>(r, "inputs", ParseTensorSpec)) d.inputs = std::move(*inputs);
  if (auto outputs = ParseNamed<TensorSpec>(r, "outputs", ParseTensorSpec)) d.outputs = std::move(*outputs);
  d.reference = r.Str("reference", true, true);
  if (r.Get("tags") && !r.Get("tags")->is_null()) d.tags = r.StrList("tags", false, true);
  d.description = r.OptStr("description");
  if (r.Get("constraints") && !r.Get("constraints")->is_null()) d.constraints = r.StrList("constraints", false, true);
  if (!r.ok()) return std::nullopt;
  return d;
}

std::optional<Workload> ParseWorkload(const ojson& j, const std::string& file, Problems* problems,
                                      const std::string& where) {
  Reader r(j, file, problems, where);
  if (!r.IsObject()) return std::nullopt;
  Workload w;
  w.uuid = r.Str("uuid", true, true);
  if (const ojson* axes = r.Required("axes")) {
    if (!axes->is_object()) {
      r.Fail("axes", "expected an object of integers");
    } else {
      for (auto it = axes->begin(); it != axes->end(); ++it) {
        auto v = IntFrom(it.value());
        if (!v) r.Fail("axes." + it.key(), "expected an integer");
        else if (*v < 0) r.Fail("axes." + it.key(), "must be >= 0");
        else w.axes.emplace_back(it.key(), *v);
      }
    }
  }
  if (const ojson* inputs = r.Required("inputs")) {
    if (!inputs->is_object()) {
      r.Fail("inputs", "expected an object of input descriptors");
    } else {
      for (auto it = inputs->begin(); it != inputs->end(); ++it) {
        std::string field = "inputs." + it.key();
        Reader in(it.value(), file, problems, r.Where(field));
        if (!in.IsObject()) {
          r.MarkFailed();
          continue;
        }
        InputDesc desc;
        const ojson* type = in.Get("type");
        if (type != nullptr) {
          desc.type_set = true;
          if (!type->is_string()) {
            in.Fail("type", "must be \"random\", \"scalar\" or \"safetensors\"");
          } else {
            desc.type = type->get<std::string>();
          }
        } else if (in.Get("path") != nullptr || in.Get("tensor_key") != nullptr) {
          desc.type = "safetensors";  // the union's first member that fits
        } else if (in.Get("value") != nullptr) {
          desc.type = "scalar";
        }
        if (desc.type == "scalar") {
          const ojson* value = in.Required("value");
          if (value != nullptr) {
            if (value->is_boolean() || value->is_number()) desc.value = *value;
            else in.Fail("value", "expected an int, float or bool");
          }
        } else if (desc.type == "safetensors") {
          desc.path = in.Str("path", true, true);
          desc.tensor_key = in.Str("tensor_key", true, true);
        } else if (desc.type != "random" && type != nullptr && type->is_string()) {
          in.Fail("type", "must be \"random\", \"scalar\" or \"safetensors\", got \"" + desc.type + "\"");
        }
        if (!in.ok()) {
          r.MarkFailed();
          continue;
        }
        w.inputs.emplace_back(it.key(), std::move(desc));
      }
    }
  }
  if (!r.ok()) return std::nullopt;
  return w;
}

std::optional<Solution> ParseSolution(const ojson& j, const std::string& file, Problems* problems,
                                      const std::string& where) {
  Reader r(j, file, problems, where);
  if (!r.IsObject()) return std::nullopt;
  Solution s;
  s.name = r.Name("name");
  s.definition = r.Name("definition");
  s.author = r.Name("author");
  if (const ojson* spec = r.Required("spec")) {
    Reader sr(*spec, file, problems, r.Where("spec"));
    if (sr.IsObject()) {
      BuildSpec& b = s.spec;
      b.language = sr.Str("language", true, false);
      static const std::set<std::string> kLanguages = {"python", "triton", "cpp", "cuda", "tilelang"};
      if (sr.Get("language") && sr.Get("language")->is_string() && !kLanguages.count(b.language))
        sr.Fail("language", "must be one of python, triton, cpp, cuda, tilelang; got \"" + b.language + "\"");
      if (auto hw = sr.StrList("target_hardware", true, false, 1)) b.target_hardware = *hw;
      b.entry_point = sr.Str("entry_point", true, true);
      if (sr.Get("dependencies") && !sr.Get("dependencies")->is_null())
        b.dependencies = sr.StrList("dependencies", false, true);
      if (const ojson* dps = sr.Get("destination_passing_style")) {
        auto v = BoolFrom(*dps);
        if (!v) sr.Fail("destination_passing_style", "expected a boolean");
        else b.destination_passing_style = *v;
      }
      if (const ojson* binding = sr.Get("binding")) {
        b.binding_set = true;
        if (!binding->is_null()) {
          if (!binding->is_string() || (binding->get<std::string>() != "tvm-ffi" && binding->get<std::string>() != "torch"))
            sr.Fail("binding", "must be \"tvm-ffi\", \"torch\" or null");
          else
            b.binding = binding->get<std::string>();
        }
      }
      if (!sr.ok()) {
        r.MarkFailed();
      }
    } else {
      r.MarkFailed();
    }
  }
  if (const ojson* sources = r.Required("sources")) {
    if (!sources->is_array()) {
      r.Fail("sources", "expected a list of {path, content}");
    } else {
      if (sources->empty()) r.Fail("sources", "must have at least 1 item");
      for (size_t i = 0; i < sources->size(); ++i) {
        std::string field = "sources[" + std::to_string(i) + "]";
        Reader sr((*sources)[i], file, problems, r.Where(field));
        if (!sr.IsObject()) {
          r.MarkFailed();
          continue;
        }
        SourceFile f{sr.Str("path", true, true), sr.Str("content", true, true)};
        if (!sr.ok()) {
          r.MarkFailed();
          continue;
        }
        s.sources.push_back(std::move(f));
      }
    }
  }
  s.description = r.OptStr("description");
  if (!r.ok()) return std::nullopt;
  return s;
}

std::optional<Evaluation> ParseEvaluation(const ojson& j, const std::string& file, Problems* problems,
                                          const std::string& where) {
  Reader r(j, file, problems, where);
  if (!r.IsObject()) return std::nullopt;
  Evaluation e;
  e.status = r.Str("status", true, false);
  if (r.Get("status") && r.Get("status")->is_string() && !IsStatus(e.status))
    r.Fail("status", "unknown status \"" + e.status + "\"");
  if (const ojson* env = r.Required("environment")) {
    Reader er(*env, file, problems, r.Where("environment"));
    if (er.IsObject()) {
      e.environment.hardware = er.Str("hardware", true, true);
      if (const ojson* libs = er.Get("libs")) {
        if (!libs->is_object()) {
          er.Fail("libs", "expected an object of strings");
        } else {
          for (auto it = libs->begin(); it != libs->end(); ++it) {
            if (!it.value().is_string()) er.Fail("libs." + it.key(), "expected a string");
            else e.environment.libs.emplace_back(it.key(), it.value().get<std::string>());
          }
        }
      }
    }
    if (!er.ok()) {
      r.MarkFailed();
    }
  }
  e.timestamp = r.Str("timestamp", true, true);
  e.log = r.Str("log", false, false);
  if (const ojson* c = r.Get("correctness"); c != nullptr && !c->is_null()) {
    Reader cr(*c, file, problems, r.Where("correctness"));
    if (cr.IsObject()) {
      Correctness corr;
      for (const char* key : {"max_relative_error", "max_absolute_error"}) {
        if (const ojson* v = cr.Get(key)) {
          auto d = FloatFrom(*v);
          if (!d) cr.Fail(key, "expected a number (or \"Infinity\"/\"NaN\")");
          else (std::string(key) == "max_relative_error" ? corr.max_relative_error : corr.max_absolute_error) = *d;
        }
      }
      if (const ojson* extra = cr.Get("extra"); extra != nullptr && !extra->is_null()) {
        if (!extra->is_object()) cr.Fail("extra", "expected an object or null");
        else corr.extra = *extra;
      }
      if (cr.ok()) e.correctness = corr;
    }
    if (!cr.ok()) {
      r.MarkFailed();
    }
  }
  if (const ojson* p = r.Get("performance"); p != nullptr && !p->is_null()) {
    Reader pr(*p, file, problems, r.Where("performance"));
    if (pr.IsObject()) {
      Performance perf;
      double* slots[] = {&perf.latency_ms, &perf.reference_latency_ms, &perf.speedup_factor};
      const char* keys[] = {"latency_ms", "reference_latency_ms", "speedup_factor"};
      for (int i = 0; i < 3; ++i) {
        if (const ojson* v = pr.Get(keys[i])) {
          auto d = FloatFrom(*v);
          if (!d) pr.Fail(keys[i], "expected a number");
          else if (!(*d >= 0)) pr.Fail(keys[i], "must be >= 0");
          else *slots[i] = *d;
        }
      }
      if (pr.ok()) e.performance = perf;
    }
    if (!pr.ok()) {
      r.MarkFailed();
    }
  }
  if (!r.ok()) return std::nullopt;
  return e;
}

std::optional<Trace> ParseTrace(const ojson& j, const std::string& file, Problems* problems,
                                const std::string& where) {
  Reader r(j, file, problems, where);
  if (!r.IsObject()) return std::nullopt;
  Trace t;
  t.definition = r.Name("definition");
  if (const ojson* w = r.Required("workload")) {
    if (auto workload = ParseWorkload(*w, file, problems, r.Where("workload"))) {
      t.workload = std::move(*workload);
    } else {
      r.MarkFailed();
    }
  }
  t.solution = r.OptStr("solution");
  if (const ojson* e = r.Get("evaluation"); e != nullptr && !e->is_null()) {
    if (auto evaluation = ParseEvaluation(*e, file, problems, r.Where("evaluation"))) {
      t.evaluation = std::move(*evaluation);
    } else {
      r.MarkFailed();
    }
  }
  if (!r.ok()) return std::nullopt;
  return t;
}

// --- Model validators ----------------------------------------------------------

void CheckDefinition(const Definition& d, const PythonSyntax& python, const std::string& file, Problems* problems,
                     const std::string& where) {
  auto check_shapes = [&](const Named<TensorSpec>& specs, const std::string& key) {
    for (const auto& [name, spec] : specs) {
      if (!spec.shape) continue;
      for (size_t i = 0; i < spec.shape->size(); ++i) {
        const auto& axis = (*spec.shape)[i];
        if (Find(d.axes, axis) == nullptr)
          Add(problems, file, Join(where, key + "." + name + ".shape[" + std::to_string(i) + "]"),
              "axis '" + axis + "' is not defined in axes");
      }
    }
  };
  check_shapes(d.inputs, "inputs");
  check_shapes(d.outputs, "outputs");
  for (const auto& [name, spec] : d.outputs)
    if (Find(d.inputs, name) != nullptr)
      Add(problems, file, Join(where, "outputs." + name), "output '" + name + "' has the name of an input");
  if (python.module) {
    if (auto error = python.module(d.reference)) Add(problems, file, Join(where, "reference"), *error);
  }
  const auto constraints = d.Constraints();
  for (size_t i = 0; i < constraints.size(); ++i) {
    if (python.expression) {
      if (auto error = python.expression(constraints[i]))
        Add(problems, file, Join(where, "constraints[" + std::to_string(i) + "]"),
            "not a valid Python expression: " + *error);
    }
  }
}

void CheckSolution(const Solution& s, const std::string& file, Problems* problems, const std::string& where) {
  const std::string& entry = s.spec.entry_point;
  size_t first = entry.find("::");
  if (first == std::string::npos || entry.find("::", first + 2) != std::string::npos || first == 0 ||
      first + 2 == entry.size()) {
    Add(problems, file, Join(where, "spec.entry_point"),
        "must be '<file path>::<function name>' with exactly one '::', got '" + entry + "'");
  }
  std::set<std::string> seen;
  for (size_t i = 0; i < s.sources.size(); ++i) {
    const std::string& path = s.sources[i].path;
    std::string field = Join(where, "sources[" + std::to_string(i) + "].path");
    if (!path.empty() && path[0] == '/') Add(problems, file, field, "must be a relative path, got '" + path + "'");
    if (path.find('\0') != std::string::npos) Add(problems, file, field, "must not contain a NUL byte");
    if (HasParentRef(path)) Add(problems, file, field, "must not contain '..', got '" + path + "'");
    if (!seen.insert(path).second) Add(problems, file, field, "duplicate source path '" + path + "'");
  }
  if (first != std::string::npos && !seen.count(s.spec.EntryFile()))
    Add(problems, file, Join(where, "spec.entry_point"),
        "entry file '" + s.spec.EntryFile() + "' is not among the sources");
}

void CheckEvaluation(const Evaluation& e, const std::string& file, Problems* problems, const std::string& where) {
  if (e.status == "PASSED") {
    if (!e.correctness) Add(problems, file, Join(where, "correctness"), "required when status is PASSED");
    if (!e.performance) Add(problems, file, Join(where, "performance"), "required when status is PASSED");
  } else if (e.status == "INCORRECT_NUMERICAL") {
    if (!e.correctness)
      Add(problems, file, Join(where, "correctness"), "required when status is INCORRECT_NUMERICAL");
    if (e.performance)
      Add(problems, file, Join(where, "performance"), "must be absent when status is INCORRECT_NUMERICAL");
  } else {
    if (e.correctness) Add(problems, file, Join(where, "correctness"), "must be absent when status is " + e.status);
    if (e.performance) Add(problems, file, Join(where, "performance"), "must be absent when status is " + e.status);
  }
  if (e.correctness) {
    if (e.correctness->max_relative_error < 0)
      Add(problems, file, Join(where, "correctness.max_relative_error"), "must be non-negative or NaN");
    if (e.correctness->max_absolute_error < 0)
      Add(problems, file, Join(where, "correctness.max_absolute_error"), "must be non-negative or NaN");
  }
}

void CheckWorkload(const Workload& w, const Definition& d, const std::string& file, Problems* problems,
                   const std::string& where) {
  for (const auto& var : d.VarAxes())
    if (Find(w.axes, var) == nullptr)
      Add(problems, file, Join(where, "axes"), "missing var axis '" + var + "' of definition " + d.name);
  for (const auto& [name, value] : w.axes) {
    const Axis* axis = Find(d.axes, name);
    if (axis == nullptr || axis->is_const)
      Add(problems, file, Join(where, "axes." + name),
          "'" + name + "' is not a var axis of definition " + d.name);
    else if (value <= 0)
      Add(problems, file, Join(where, "axes." + name), "must be > 0, got " + std::to_string(value));
  }
  for (const auto& [name, spec] : d.inputs)
    if (Find(w.inputs, name) == nullptr)
      Add(problems, file, Join(where, "inputs"), "missing input '" + name + "' of definition " + d.name);
  for (const auto& [name, desc] : w.inputs) {
    const TensorSpec* spec = Find(d.inputs, name);
    std::string field = Join(where, "inputs." + name);
    if (spec == nullptr) {
      Add(problems, file, field, "'" + name + "' is not an input of definition " + d.name);
      continue;
    }
    if (desc.type == "scalar" && !spec->is_scalar())
      Add(problems, file, field, "is scalar but the definition expects a tensor");
    if (desc.type != "scalar" && spec->is_scalar())
      Add(problems, file, field, "is " + desc.type + " but the definition expects a scalar (shape null)");
  }
}

// --- Writing -----------------------------------------------------------------

ojson FloatJson(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "Infinity" : "-Infinity";
  return value;
}

std::optional<double> FloatFrom(const ojson& value) {
  if (value.is_number()) return value.get<double>();
  if (!value.is_string()) return std::nullopt;
  std::string s = value.get<std::string>();
  std::string lower = s;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  if (lower == "infinity" || lower == "inf" || lower == "+infinity" || lower == "+inf") return INFINITY;
  if (lower == "-infinity" || lower == "-inf") return -INFINITY;
  if (lower == "nan") return NAN;
  char* end = nullptr;
  double d = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || *end != '\0') return std::nullopt;
  return d;
}

ojson ToJson(const Definition& d) {
  ojson j;
  j["name"] = d.name;
  j["op_type"] = d.op_type;
  if (d.description) j["description"] = *d.description;
  if (d.tags) j["tags"] = *d.tags;
  ojson axes = ojson::object();
  for (const auto& [name, axis] : d.axes) {
    ojson a;
    a["type"] = axis.is_const ? "const" : "var";
    if (axis.is_const) a["value"] = axis.value;
    if (axis.parent) a["parent"] = *axis.parent;
    if (axis.description) a["description"] = *axis.description;
    axes[name] = a;
  }
  j["axes"] = axes;
  auto specs = [](const Named<TensorSpec>& items) {
    ojson out = ojson::object();
    for (const auto& [name, spec] : items) {
      ojson s;
      s["shape"] = spec.shape ? ojson(*spec.shape) : ojson(nullptr);
      s["dtype"] = spec.dtype;
      if (spec.description) s["description"] = *spec.description;
      out[name] = s;
    }
    return out;
  };
  j["inputs"] = specs(d.inputs);
  j["outputs"] = specs(d.outputs);
  if (d.constraints) j["constraints"] = *d.constraints;
  j["reference"] = d.reference;
  return j;
}

ojson ToJson(const Workload& w) {
  ojson j;
  ojson axes = ojson::object();
  for (const auto& [name, value] : w.axes) axes[name] = value;
  j["axes"] = axes;
  ojson inputs = ojson::object();
  for (const auto& [name, desc] : w.inputs) {
    ojson i;
    i["type"] = desc.type;
    if (desc.type == "scalar") i["value"] = desc.value;
    if (desc.type == "safetensors") {
      i["path"] = desc.path;
      i["tensor_key"] = desc.tensor_key;
    }
    inputs[name] = i;
  }
  j["inputs"] = inputs;
  j["uuid"] = w.uuid;
  return j;
}

ojson ToJson(const Solution& s) {
  ojson j;
  j["name"] = s.name;
  j["definition"] = s.definition;
  j["author"] = s.author;
  if (s.description) j["description"] = *s.description;
  ojson spec;
  spec["language"] = s.spec.language;
  spec["target_hardware"] = s.spec.target_hardware;
  spec["entry_point"] = s.spec.entry_point;
  if (s.spec.dependencies) spec["dependencies"] = *s.spec.dependencies;
  if (s.spec.destination_passing_style) spec["destination_passing_style"] = *s.spec.destination_passing_style;
  if (s.spec.binding_set || s.spec.binding) spec["binding"] = s.spec.binding ? ojson(*s.spec.binding) : ojson(nullptr);
  j["spec"] = spec;
  ojson sources = ojson::array();
  for (const auto& f : s.sources) sources.push_back({{"path", f.path}, {"content", f.content}});
  j["sources"] = sources;
  return j;
}

ojson ToJson(const Evaluation& e) {
  ojson j;
  j["status"] = e.status;
  ojson env;
  env["hardware"] = e.environment.hardware;
  ojson libs = ojson::object();
  for (const auto& [name, version] : e.environment.libs) libs[name] = version;
  env["libs"] = libs;
  j["environment"] = env;
  j["timestamp"] = e.timestamp;
  j["log"] = e.log;
  if (e.correctness) {
    ojson c;
    c["max_relative_error"] = FloatJson(e.correctness->max_relative_error);
    c["max_absolute_error"] = FloatJson(e.correctness->max_absolute_error);
    c["extra"] = e.correctness->extra.is_object() ? e.correctness->extra : ojson(nullptr);
    j["correctness"] = c;
  } else {
    j["correctness"] = nullptr;
  }
  if (e.performance) {
    ojson p;
    p["latency_ms"] = e.performance->latency_ms;
    p["reference_latency_ms"] = e.performance->reference_latency_ms;
    p["speedup_factor"] = e.performance->speedup_factor;
    j["performance"] = p;
  } else {
    j["performance"] = nullptr;
  }
  return j;
}

ojson ToJson(const Trace& t) {
  ojson j;
  j["definition"] = t.definition;
  j["workload"] = ToJson(t.workload);
  j["solution"] = t.solution ? ojson(*t.solution) : ojson(nullptr);
  j["evaluation"] = t.evaluation ? ToJson(*t.evaluation) : ojson(nullptr);
  return j;
}

namespace {

void DumpTo(const ojson& value, std::string* out, int indent, int depth) {
  auto newline = [&](int level) {
    if (indent < 0) return;
    out->push_back('\n');
    out->append(static_cast<size_t>(indent * level), ' ');
  };
  switch (value.type()) {
    case ojson::value_t::object: {
      if (value.empty()) {
        *out += "{}";
        return;
      }
      out->push_back('{');
      bool first = true;
      for (auto it = value.begin(); it != value.end(); ++it) {
        if (!first) out->push_back(',');
        first = false;
        newline(depth + 1);
        *out += ojson(it.key()).dump(-1, ' ', false, ojson::error_handler_t::replace);
        *out += indent < 0 ? ":" : ": ";
        DumpTo(it.value(), out, indent, depth + 1);
      }
      newline(depth);
      out->push_back('}');
      return;
    }
    case ojson::value_t::array: {
      if (value.empty()) {
        *out += "[]";
        return;
      }
      out->push_back('[');
      bool first = true;
      for (const auto& item : value) {
        if (!first) out->push_back(',');
        first = false;
        newline(depth + 1);
        DumpTo(item, out, indent, depth + 1);
      }
      newline(depth);
      out->push_back(']');
      return;
    }
    case ojson::value_t::number_float: {
      double d = value.get<double>();
      if (!std::isfinite(d)) {  // never produced by ToJson (FloatJson); JSON has no token for it
        *out += std::isnan(d) ? "\"NaN\"" : (d > 0 ? "\"Infinity\"" : "\"-Infinity\"");
        return;
      }
      std::string text = FormatDouble(d);
      // As Python writes floats: "1.0", "1e-08" -> pydantic writes 1e-8; keep a '.0' on integral values.
      if (text.find_first_of(".eEn") == std::string::npos) text += ".0";
      *out += text;
      return;
    }
    default:
      *out += value.dump(-1, ' ', false, ojson::error_handler_t::replace);
  }
}

}  // namespace

std::string DumpCompact(const ojson& value) {
  std::string out;
  DumpTo(value, &out, -1, 0);
  return out;
}

std::string DumpIndented(const ojson& value) {
  std::string out;
  DumpTo(value, &out, 2, 0);
  return out;
}

}  // namespace accelopt::fib
