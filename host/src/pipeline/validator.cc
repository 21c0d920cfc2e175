#include "pipeline/validator.h"

#include <algorithm>
#include <optional>
#include <set>

#include "core/text.h"
#include "llm/client_registry.h"
#include "llm/llm_error.h"
#include "llm/scripted_chat_client.h"
#include "pipeline/expression_names.h"
#include "pipeline/expressions.h"

namespace accelopt {
namespace {

using nlohmann::json;

// Globals every expression sees besides the context (lua/expression.cc): the
// `accel` table, its short forms, and Lua's safe base functions and libraries.
const std::set<std::string>& Builtins() {
  static const std::set<std::string> names = {
      "accel",
      "len",    "contains", "join",    "keys",   "tojson", "fromjson", "always", "success", "failure", "cancelled",
      "null",   "tostring", "tonumber", "type",  "pairs",  "ipairs",   "select", "string",  "math",    "table",
      "utf8"};
  return names;
}

// Roots whose values are known before the run starts.
const std::set<std::string> kStaticRoots = {"vars", "backend", "pipeline"};

// The fields of a stage record in `stages.<id>` / `iter.<id>`.
const std::vector<std::string> kRecordFields = {"status", "outputs", "error"};

// The outputs of a loop group.
const std::vector<std::string> kLoopOutputs = {"iterations", "carry", "last"};

std::string Joined(const std::vector<std::string>& names) {
  std::string text;
  for (const auto& name : names) text += (text.empty() ? "" : ", ") + name;
  return text;
}

// The code of each expression in a value, or of a condition (bare or wrapped).
std::vector<std::string> CodesOf(const json& value) {
  std::vector<std::string> codes;
  if (value.is_structured()) {
    for (const auto& child : value) {
      auto more = CodesOf(child);
      codes.insert(codes.end(), more.begin(), more.end());
    }
  } else if (value.is_string()) {
    for (const auto& span : FindExpressions(value.get<std::string>())) {
      if (span.end != std::string::npos) codes.push_back(span.code);
    }
  }
  return codes;
}

std::vector<std::string> ConditionCodes(const std::string& text) {
  if (text.find("${{") != std::string::npos) return CodesOf(json(text));
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) return {};
  return {text};
}

// What validate knows about a stage defined earlier.
struct KnownStage {
  std::string kind;  // "stage", "for_each" or "loop"
  std::string uses;
  json outputs = json::object();  // declared outputs (empty: not declared)
};

// The names an expression may read at one place of the pipeline (the
// executor's context there; docs/pipelines.md, "Expressions").
struct Scope {
  bool in_loop = false;      // `iter`, `loop`, `carry`
  std::string item;          // the for_each item name ("" if none), with `index`
  bool stage_carry = false;  // `this` and `outputs` (a stage's carry)

  std::vector<std::string> Names() const {
    std::vector<std::string> names = {"vars", "backend", "pipeline", "run", "stages"};
    if (in_loop) names.insert(names.end(), {"iter", "loop", "carry"});
    if (!item.empty()) names.insert(names.end(), {item, "index"});
    if (stage_carry) names.insert(names.end(), {"this", "outputs"});
    std::sort(names.begin(), names.end());
    return names;
  }
};

class Validator {
 public:
  Validator(const Pipeline& pipeline, StageRegistry& registry) : pipeline_(pipeline), registry_(registry) {}

  ResolvedStages Run() {
    ResolveVars();
    CheckLlm();
    Scope top;
    for (const auto& stage : pipeline_.stages) Stage(stage, top);
    if (!diagnostics_.empty()) throw ConfigError(diagnostics_);
    return resolved_;
  }

 private:
  void Error(const SourceLocation& where, const std::string& message) { diagnostics_.push_back({where, message}); }

  // Message of an expression error without the location prefix ResolveValue adds.
  void ExpressionError(const SourceLocation& where, const StageError& error) {
    std::string message = error.what();
    const std::string prefix = where.ToString() + ": ";
    if (message.rfind(prefix, 0) == 0) message = message.substr(prefix.size());
    Error(where, message);
  }

  // ---- vars -----------------------------------------------------------------

  json StaticContext() const {
    return {{"vars", static_vars_},
            {"backend", pipeline_.backend},
            {"pipeline",
             {{"name", pipeline_.name}, {"file", pipeline_.file.string()}, {"dir", pipeline_.file.parent_path().string()}}},
            {"__status", "success"}};
  }

  // Evaluates the vars as the executor does (each against the raw vars), so a
  // broken var fails here; vars that read `run` are known only at run time.
  void ResolveVars() {
    CheckExpressions(pipeline_.vars, {pipeline_.file.string()}, &diagnostics_);
    static_vars_ = pipeline_.vars;
    json context = StaticContext();
    context["run"] = {{"dir", "(run directory)"}};
    context["stages"] = json::object();
    Scope scope;
    for (const auto& [name, value] : pipeline_.vars.items()) {
      SourceLocation where = pipeline_.vars_where.count(name) ? pipeline_.vars_where.at(name) : SourceLocation{pipeline_.file.string()};
      if (!ContainsExpression(value)) continue;
      bool names_ok = true;
      bool reads_run = false;
      for (const auto& code : CodesOf(value)) {
        names_ok = CheckNames(code, where, scope) && names_ok;
        auto uses = GlobalNames(code);
        if (!uses) reads_run = true;  // unknown: treat as run-time only
        else for (const auto& use : *uses) reads_run = reads_run || use.name == "run" || use.name == "stages";
      }
      if (!names_ok) {
        dynamic_vars_.insert(name);
        continue;
      }
      try {
        json resolved = ResolveValue(value, context, where);
        if (reads_run) dynamic_vars_.insert(name);
        else static_vars_[name] = resolved;
      } catch (const StageError& error) {
        ExpressionError(where, error);
        dynamic_vars_.insert(name);
      }
    }
  }

  // ---- llm: -----------------------------------------------------------------

  // Parses the llm: block (and the ACCELOPT_LLM_* overrides) as `run` will,
  // without contacting any endpoint.
  void CheckLlm() {
    llm::RegistryOptions options;
    options.base_dir = pipeline_.file.parent_path();
    options.live_factory = [](const llm::EndpointConfig& config) {
      return std::make_unique<llm::ScriptedChatClient>(config);
    };
    try {
      llm::ClientRegistry registry(pipeline_.llm, options);
    } catch (const llm::LlmError& error) {
      // Messages read "llm_config: llm.<endpoint>.<field>: ..." or "... llm.<endpoint>: ...".
      std::string message = error.what();
      if (message.rfind("llm_config: ", 0) == 0) message = message.substr(12);
      SourceLocation where = pipeline_.llm_block_where.file.empty() ? SourceLocation{pipeline_.file.string()}
                                                                    : pipeline_.llm_block_where;
      if (message.rfind("llm.", 0) == 0) {
        std::string path = message.substr(4, message.find(':') - 4);
        if (pipeline_.llm_where.count(path)) where = pipeline_.llm_where.at(path);
        else if (auto dot = path.find('.'); dot != std::string::npos && pipeline_.llm_where.count(path.substr(0, dot)))
          where = pipeline_.llm_where.at(path.substr(0, dot));
      }
      Error(where, message);
    }
  }

  // ---- expression names -----------------------------------------------------

  // Checks the names `code` reads against `scope` and the stage references
  // against the stages defined so far. Returns false if it reported a problem.
  bool CheckNames(const std::string& code, const SourceLocation& where, const Scope& scope) {
    auto uses = GlobalNames(code);
    if (!uses) return true;
    const std::vector<std::string> names = scope.Names();
    bool ok = true;
    for (const auto& use : *uses) {
      if (Builtins().count(use.name)) continue;
      if (std::find(names.begin(), names.end(), use.name) == names.end()) {
        std::vector<std::string> candidates = names;
        candidates.insert(candidates.end(), Builtins().begin(), Builtins().end());
        Error(where, "unknown name '" + use.name + "' in ${{ " + code + " }}" + DidYouMeanSuffix(use.name, candidates) +
                         "; names here: " + Joined(names));
        ok = false;
        continue;
      }
      if ((use.name == "stages" || use.name == "iter") && !use.fields.empty()) {
        ok = CheckStageReference(use, code, where) && ok;
      }
    }
    return ok;
  }

  bool CheckStageReference(const NameUse& use, const std::string& code, const SourceLocation& where) {
    const std::string& id = use.fields[0];
    auto it = known_.find(id);
    if (it == known_.end()) {
      std::vector<std::string> ids;
      for (const auto& [known_id, _] : known_) ids.push_back(known_id);
      Error(where, "expression refers to stage '" + id + "', which is not defined before this point" + DidYouMeanSuffix(id, ids));
      return false;
    }
    if (use.fields.size() < 2) return true;
    const std::string& field = use.fields[1];
    const std::string ref = use.name + "." + id;
    if (std::find(kRecordFields.begin(), kRecordFields.end(), field) == kRecordFields.end()) {
      Error(where, "in ${{ " + code + " }}: " + ref + " has no field '" + field + "'" + DidYouMeanSuffix(field, kRecordFields) +
                       " (a stage record holds " + Joined(kRecordFields) + ")");
      return false;
    }
    if (field != "outputs" || use.fields.size() < 3) return true;
    const std::string& output = use.fields[2];
    const KnownStage& stage = it->second;
    if (stage.kind == "for_each") {
      Error(where, "in ${{ " + code + " }}: " + ref + ".outputs is a list (stage '" + id +
                       "' is a for_each fan-out: one entry per item), so it has no field '" + output + "'");
      return false;
    }
    std::vector<std::string> declared;
    if (stage.kind == "loop") {
      declared = kLoopOutputs;
    } else {
      for (const auto& [name, _] : stage.outputs.items()) declared.push_back(name);
      if (declared.empty()) return true;  // the stage declares no outputs
    }
    if (std::find(declared.begin(), declared.end(), output) != declared.end()) return true;
    Error(where, "in ${{ " + code + " }}: stage '" + id + "' (" + (stage.kind == "loop" ? "a loop" : stage.uses) +
                     ") has no output '" + output + "'" + DidYouMeanSuffix(output, declared) + "; its outputs are " +
                     Joined(declared));
    return false;
  }

  // Name checks for every expression of a value; true if all passed.
  bool CheckValueNames(const json& value, const SourceLocation& where, const Scope& scope) {
    bool ok = true;
    for (const auto& code : CodesOf(value)) ok = CheckNames(code, where, scope) && ok;
    return ok;
  }

  // True if every expression in `value` reads only values known before the run.
  bool IsStatic(const json& value) const {
    for (const auto& code : CodesOf(value)) {
      auto uses = GlobalNames(code);
      if (!uses) return false;
      for (const auto& use : *uses) {
        if (Builtins().count(use.name)) {
          if (use.name == "failure" || use.name == "cancelled") return false;
          continue;
        }
        if (!kStaticRoots.count(use.name)) return false;
        if (use.name == "vars" && !use.fields.empty() && dynamic_vars_.count(use.fields[0])) return false;
        if (use.name == "vars" && use.fields.empty()) return false;
      }
    }
    return true;
  }

  // ---- stages ---------------------------------------------------------------

  std::shared_ptr<accelopt::Stage> Resolve(const StageSpec& spec) {
    const std::string& uses = spec.uses;
    if (uses.rfind("native:", 0) == 0) {
      std::string name = uses.substr(7);
      if (auto at = name.find('@'); at != std::string::npos) name = name.substr(0, at);
      auto stage = registry_.FindNative(name);
      if (!stage) {
        Error(spec.uses_where, "unknown stage 'native:" + name + "'" + DidYouMeanSuffix(name, registry_.NativeNames()) +
                                   "; `accelopt-host stages` lists the registered stages");
      }
      return stage;
    }
    if (uses.rfind("lua:", 0) == 0) {
      auto script = (pipeline_.file.parent_path() / uses.substr(4)).lexically_normal();
      if (!std::filesystem::exists(script)) {
        Error(spec.uses_where, "Lua stage script not found: " + script.string() + " (paths are relative to the pipeline file)");
        return nullptr;
      }
      try {
        return registry_.LuaStage(script, uses);
      } catch (const ConfigError& error) {
        for (const auto& d : error.diagnostics()) diagnostics_.push_back(d);
        return nullptr;
      }
    }
    Error(spec.uses_where, "unknown stage scheme in '" + uses + "': use native:<name> or lua:<path>");
    return nullptr;
  }

  // A value known before the run (a literal, or expressions over vars,
  // backend and pipeline), resolved as the run will; nullopt when it is not
  // known yet or does not resolve (then the error is reported).
  std::optional<json> KnownValue(const json& value, const SourceLocation& where, bool names_ok) {
    if (!ContainsExpression(value)) return value;
    if (!names_ok || !IsStatic(value)) return std::nullopt;
    try {
      return ResolveValue(value, StaticContext(), where);
    } catch (const StageError& error) {
      ExpressionError(where, error);
      return std::nullopt;
    }
  }

  // One `with` value: literal values as written, static expressions resolved here.
  void CheckWithValue(const std::string& name, const json& value, const json& param, const std::string& uses,
                      const SourceLocation& where, bool names_ok) {
    if (!ContainsExpression(value)) {
      if (auto problem = CheckParamValue(value, param)) Error(where, ParamProblemMessage(name, uses, *problem));
      return;
    }
    auto known = KnownValue(value, where, names_ok);
    if (!known) return;
    const json& resolved = *known;
    const std::string text = value.is_string() ? value.get<std::string>() : value.dump();
    if (resolved.is_null() && param.value("required", false)) {
      Error(where, MissingParamMessage(name, uses, text));
    } else if (auto problem = CheckParamValue(resolved, param)) {
      Error(where, ParamProblemMessage(name, uses, *problem, text));
    }
  }

  void CheckWith(const StageSpec& spec, const accelopt::Stage& stage, const std::map<std::string, bool>& names_ok) {
    const json params = stage.Params();
    std::vector<std::string> names;
    for (const auto& [name, _] : params.items()) names.push_back(name);
    for (const auto& [name, value] : spec.with.items()) {
      auto where = spec.with_where.count(name) ? spec.with_where.at(name) : spec.where;
      if (!params.contains(name)) {
        Error(where, "stage " + stage.Uses() + " has no parameter '" + name + "'" + DidYouMeanSuffix(name, names));
        continue;
      }
      CheckWithValue(name, value, params[name], stage.Uses(), where, names_ok.at(name));
    }
    for (const auto& [name, param] : params.items()) {
      if (param.value("required", false) && !spec.with.contains(name)) {
        Error(spec.where, "stage '" + spec.id + "' (" + stage.Uses() + ") is missing required parameter '" + name + "'");
      }
    }
    // keys_of relates two parameters (a problem name and its benchmark's
    // summary.json): checked when both are known before the run.
    json known = json::object();
    for (const auto& [name, param] : params.items()) {
      if (spec.with.contains(name)) {
        auto where = spec.with_where.count(name) ? spec.with_where.at(name) : spec.where;
        if (!ContainsExpression(spec.with[name])) known[name] = spec.with[name];
        else if (names_ok.at(name) && IsStatic(spec.with[name])) {
          try {
            known[name] = ResolveValue(spec.with[name], StaticContext(), where);
          } catch (const StageError&) {
          }  // reported by CheckWithValue
        }
      } else if (param.contains("default")) {
        known[name] = param["default"];
      }
    }
    for (const auto& [name, param] : params.items()) {
      if (!param.contains("keys_of") || !known.contains(name)) continue;
      if (auto problem = CheckParamKeys(known[name], param, known)) {
        auto where = spec.with_where.count(name) ? spec.with_where.at(name) : spec.where;
        const std::string text = spec.with.contains(name) && ContainsExpression(spec.with[name]) && spec.with[name].is_string()
                                     ? spec.with[name].get<std::string>() : "";
        Error(where, ParamProblemMessage(name, stage.Uses(), *problem, text));
      }
    }
  }

  // A `timeout:` expression that can be resolved now must give a duration.
  void CheckTimeout(const StageSpec& spec) {
    if (spec.timeout_expr.is_null()) return;
    auto known = KnownValue(spec.timeout_expr, spec.where, true);
    if (!known) return;
    const json& value = *known;
    bool ok = value.is_number() ? value.get<double>() >= 0 : value.is_string() && ParseDuration(value.get<std::string>());
    if (!ok) {
      Error(spec.where, "timeout " + spec.timeout_expr.get<std::string>() + " resolves to " + value.dump() +
                            "; expected a duration such as 30s, 500ms, 5m, 1m30s or a number of seconds");
    }
  }

  void Stage(const StageSpec& spec, const Scope& outer) {
    Scope scope = outer;
    CheckCondition(spec.if_expr, spec.if_where, &diagnostics_);
    for (const auto& code : ConditionCodes(spec.if_expr)) CheckNames(code, spec.if_where, scope);
    if (spec.loop) {
      size_t before = diagnostics_.size();
      CheckExpressions(spec.loop->max_iterations, spec.loop->where, &diagnostics_);
      bool max_ok = CheckValueNames(spec.loop->max_iterations, spec.loop->where, scope) && diagnostics_.size() == before;
      if (ContainsExpression(spec.loop->max_iterations)) {
        auto max = KnownValue(spec.loop->max_iterations, spec.loop->where, max_ok);
        if (max && !(max->is_number_integer() && max->get<int64_t>() >= 1)) {
          Error(spec.loop->where, "max_iterations " + spec.loop->max_iterations.get<std::string>() +
                                      " resolves to " + max->dump() + "; expected an integer >= 1");
        }
      }
      CheckExpressions(spec.loop->carry, spec.loop->where, &diagnostics_);
      CheckValueNames(spec.loop->carry, spec.loop->where, scope);
      Scope body = scope;
      body.in_loop = true;
      for (const auto& child : spec.body) Stage(child, body);
      CheckCondition(spec.loop->until, spec.loop->where, &diagnostics_);
      for (const auto& code : ConditionCodes(spec.loop->until)) CheckNames(code, spec.loop->where, body);
      known_[spec.id] = {"loop", "", json::object()};
      return;
    }
    size_t before_for_each = diagnostics_.size();
    CheckExpressions(spec.for_each, spec.for_each_where, &diagnostics_);
    bool for_each_ok = CheckValueNames(spec.for_each, spec.for_each_where, scope) && diagnostics_.size() == before_for_each;
    if (!spec.for_each.is_null()) {
      auto items = KnownValue(spec.for_each, spec.for_each_where, for_each_ok);
      if (items && !items->is_array()) {
        Error(spec.for_each_where, "for_each must resolve to a list, got " + std::string(items->type_name()) + " " +
                                       items->dump(-1, ' ', false, json::error_handler_t::replace).substr(0, 200));
      }
    }
    CheckExpressions(spec.max_parallel, spec.where, &diagnostics_);
    CheckValueNames(spec.max_parallel, spec.where, scope);
    Scope item_scope = scope;
    if (!spec.for_each.is_null()) item_scope.item = spec.as;
    CheckExpressions(spec.timeout_expr, spec.where, &diagnostics_);
    if (CheckValueNames(spec.timeout_expr, spec.where, item_scope)) CheckTimeout(spec);
    std::map<std::string, bool> names_ok;
    for (const auto& [name, value] : spec.with.items()) {
      auto where = spec.with_where.count(name) ? spec.with_where.at(name) : spec.where;
      size_t before = diagnostics_.size();
      CheckExpressions(value, where, &diagnostics_);
      bool syntax_ok = diagnostics_.size() == before;
      names_ok[name] = CheckValueNames(value, where, item_scope) && syntax_ok;
    }
    CheckExpressions(spec.carry, spec.where, &diagnostics_);
    std::shared_ptr<accelopt::Stage> stage;
    if (!spec.uses.empty()) {
      stage = Resolve(spec);
      if (stage) {
        CheckWith(spec, *stage, names_ok);
        resolved_[spec.id] = stage;
      }
    }
    known_[spec.id] = {spec.for_each.is_null() ? "stage" : "for_each", stage ? stage->Uses() : spec.uses,
                       stage ? stage->Outputs() : json::object()};
    // A stage's carry runs after it, with its own record as `this`/`outputs`.
    Scope carry_scope = scope;
    carry_scope.stage_carry = true;
    for (const auto& code : CodesOf(spec.carry)) {
      auto uses = GlobalNames(code);
      CheckNames(code, spec.where, carry_scope);
      if (!uses || !stage || spec.for_each.is_null() == false) continue;
      // outputs.<field> in a carry refers to this stage's declared outputs.
      json declared = stage->Outputs();
      if (declared.empty()) continue;
      for (const auto& use : *uses) {
        if (use.name != "outputs" || use.fields.empty() || declared.contains(use.fields[0])) continue;
        std::vector<std::string> names;
        for (const auto& [name, _] : declared.items()) names.push_back(name);
        Error(spec.where, "in ${{ " + code + " }}: stage '" + spec.id + "' (" + stage->Uses() + ") has no output '" +
                              use.fields[0] + "'" + DidYouMeanSuffix(use.fields[0], names) + "; its outputs are " + Joined(names));
      }
    }
  }

  const Pipeline& pipeline_;
  StageRegistry& registry_;
  std::vector<Diagnostic> diagnostics_;
  std::map<std::string, KnownStage> known_;
  json static_vars_ = json::object();
  std::set<std::string> dynamic_vars_;
  ResolvedStages resolved_;
};

}  // namespace

ResolvedStages ValidatePipeline(const Pipeline& pipeline, StageRegistry& registry) {
  return Validator(pipeline, registry).Run();
}

}  // namespace accelopt
