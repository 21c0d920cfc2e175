#include "pipeline/loader.h"

#include <algorithm>
#include <regex>
#include <set>

#include "core/text.h"
#include "pipeline/yaml_input.h"
#include "pipeline/yaml_json.h"

namespace accelopt {
namespace {

const std::vector<std::string> kTopLevelKeys = {"version", "name", "description", "vars", "backend", "llm", "python_path", "stages"};
const std::vector<std::string> kStageKeys = {"id",         "name",     "uses",  "with",     "if",
                                             "timeout",    "retry",    "on_failure", "for_each", "as",
                                             "max_parallel", "carry", "loop", "stages",
                                             "failed_items"};
const std::vector<std::string> kLoopKeys = {"max_iterations", "until", "carry", "budget"};
const std::vector<std::string> kRetryKeys = {"max_attempts", "backoff", "on"};

class Parser {
 public:
  explicit Parser(std::string file) : file_(std::move(file)) {}

  void Error(const YAML::Node& node, const std::string& message) { diagnostics_.push_back({LocationOf(node, file_), message}); }

  // Unknown keys of a mapping, with did-you-mean.
  void CheckKeys(const YAML::Node& map, const std::vector<std::string>& allowed, const std::string& what) {
    for (auto it = map.begin(); it != map.end(); ++it) {
      const std::string key = it->first.Scalar();
      if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
        Error(it->first, "unknown key '" + key + "' in " + what + DidYouMeanSuffix(key, allowed));
      }
    }
  }

  std::string String(const YAML::Node& node, const std::string& what) {
    if (!node.IsScalar()) {
      Error(node, what + " must be a string");
      return "";
    }
    return node.Scalar();
  }

  nlohmann::json Json(const YAML::Node& node) { return YamlToJson(node, file_, &diagnostics_); }

  int64_t Duration(const YAML::Node& node, const std::string& what) {
    std::string why = "not a scalar";
    auto value = node.IsScalar() ? ParseDuration(node.Scalar(), &why) : std::nullopt;
    if (!value) {
      Error(node, what + " must be a duration such as 30s, 500ms, 5m, 1m30s or a number of seconds (" + why + ")");
      return 0;
    }
    return value->count();
  }

  int Integer(const YAML::Node& node, const std::string& what, int minimum) {
    auto value = node.IsScalar() ? ScalarToJson(node) : nlohmann::json();
    if (!value.is_number_integer() || value.get<int64_t>() < minimum) {
      Error(node, what + " must be an integer >= " + std::to_string(minimum));
      return minimum;
    }
    return static_cast<int>(value.get<int64_t>());
  }

  RetrySpec Retry(const YAML::Node& node) {
    RetrySpec retry;
    if (node.IsScalar()) {
      retry.max_attempts = Integer(node, "retry", 1);
      return retry;
    }
    if (!node.IsMap()) {
      Error(node, "retry must be an integer or a mapping {max_attempts, backoff, on}");
      return retry;
    }
    CheckKeys(node, kRetryKeys, "retry");
    if (node["max_attempts"]) retry.max_attempts = Integer(node["max_attempts"], "retry.max_attempts", 1);
    if (node["backoff"]) retry.backoff_ms = Duration(node["backoff"], "retry.backoff");
    if (auto on = node["on"]) {
      if (on.IsScalar()) {
        retry.on.push_back(on.Scalar());
      } else if (on.IsSequence()) {
        for (const auto& kind : on) retry.on.push_back(String(kind, "retry.on entry"));
      } else {
        Error(on, "retry.on must be an error kind or a list of them");
      }
    }
    return retry;
  }

  StageSpec Stage(const YAML::Node& node) {
    StageSpec stage;
    stage.where = LocationOf(node, file_);
    if (!node.IsMap()) {
      Error(node, "a stage must be a mapping with at least 'id' and 'uses'");
      return stage;
    }
    CheckKeys(node, kStageKeys, "stage");
    static const std::regex kId(R"([A-Za-z_][A-Za-z0-9_]*)");
    if (auto id = node["id"]) {
      stage.id = String(id, "id");
      if (!stage.id.empty() && !std::regex_match(stage.id, kId)) {
        Error(id, "stage id '" + stage.id + "' must match [A-Za-z_][A-Za-z0-9_]* (it is used in expressions)");
      }
      if (!stage.id.empty() && !ids_.insert(stage.id).second) Error(id, "duplicate stage id '" + stage.id + "'");
    } else {
      Error(node, "stage has no 'id'");
    }
    if (auto uses = node["uses"]) {
      stage.uses = String(uses, "uses");
      stage.uses_where = LocationOf(uses, file_);
    }
    if (auto with = node["with"]) {
      if (!with.IsMap()) {
        Error(with, "'with' must be a mapping of parameter names to values");
      } else {
        stage.with = Json(with);
        for (auto it = with.begin(); it != with.end(); ++it) stage.with_where[it->first.Scalar()] = LocationOf(it->second, file_);
      }
    }
    if (auto cond = node["if"]) {
      stage.if_expr = String(cond, "if");
      stage.if_where = LocationOf(cond, file_);
    }
    if (auto timeout = node["timeout"]) {
      if (timeout.IsScalar() && timeout.Scalar().find("${{") != std::string::npos) stage.timeout_expr = timeout.Scalar();
      else stage.timeout_ms = Duration(timeout, "timeout");
    }
    if (auto retry = node["retry"]) stage.retry = Retry(retry);
    if (auto on_failure = node["on_failure"]) {
      stage.on_failure = String(on_failure, "on_failure");
      if (stage.on_failure != "fail" && stage.on_failure != "continue") {
        Error(on_failure, "on_failure must be 'fail' or 'continue'");
      }
    }
    if (auto for_each = node["for_each"]) {
      stage.for_each = Json(for_each);
      stage.for_each_where = LocationOf(for_each, file_);
    }
    if (auto as = node["as"]) {
      stage.as = String(as, "as");
      if (!std::regex_match(stage.as, kId)) Error(as, "'as' must be an identifier");
      if (stage.for_each.is_null()) Error(as, "'as' only makes sense with 'for_each'");
    }
    if (auto failed_items = node["failed_items"]) {
      std::string value = String(failed_items, "failed_items");
      if (value != "count" && value != "ignore") Error(failed_items, "failed_items must be 'count' or 'ignore'");
      stage.count_failed_items = value != "ignore";
    }
    if (auto max_parallel = node["max_parallel"]) {
      stage.max_parallel = Json(max_parallel);
      bool literal_ok = stage.max_parallel.is_number_integer() && stage.max_parallel.get<int64_t>() >= 1;
      if (!literal_ok && !stage.max_parallel.is_string()) Error(max_parallel, "max_parallel must be an integer >= 1 or an expression");
    }
    if (auto carry = node["carry"]) {
      if (!carry.IsMap()) Error(carry, "'carry' must be a mapping of loop-state names to values");
      else stage.carry = Json(carry);
    }
    if (auto loop = node["loop"]) {
      LoopSpec spec;
      spec.where = LocationOf(loop, file_);
      if (!loop.IsMap()) {
        Error(loop, "'loop' must be a mapping with max_iterations and optionally until, carry");
      } else {
        CheckKeys(loop, kLoopKeys, "loop");
        if (auto max = loop["max_iterations"]) spec.max_iterations = Json(max);
        else Error(loop, "loop needs 'max_iterations' (loops must be bounded)");
        if (spec.max_iterations.is_number_integer() && spec.max_iterations.get<int64_t>() < 1) {
          Error(loop["max_iterations"], "max_iterations must be >= 1");
        } else if (!spec.max_iterations.is_null() && !spec.max_iterations.is_number_integer() && !spec.max_iterations.is_string()) {
          Error(loop["max_iterations"], "max_iterations must be an integer or an expression");
        }
        if (auto until = loop["until"]) spec.until = String(until, "until");
        if (auto budget = loop["budget"]) {
          spec.budget = Json(budget);
          if ((spec.budget.is_number_integer() && spec.budget.get<int64_t>() < 0) ||
              (!spec.budget.is_number_integer() && !spec.budget.is_string())) {
            Error(budget, "loop budget must be an integer >= 0 or an expression");
          }
        }
        if (auto carry = loop["carry"]) {
          if (!carry.IsMap()) Error(carry, "loop 'carry' must be a mapping");
          else spec.carry = Json(carry);
        }
      }
      stage.loop = spec;
      if (!stage.uses.empty()) Error(node["uses"], "a loop group has nested 'stages' and no 'uses'");
      if (!stage.for_each.is_null()) Error(node["for_each"], "a loop group cannot also be a for_each fan-out");
    }
    if (auto body = node["stages"]) {
      if (!stage.loop) Error(body, "nested 'stages' are only allowed in a loop group (add 'loop:')");
      if (!body.IsSequence() || body.size() == 0) Error(body, "'stages' must be a non-empty list");
      else for (const auto& child : body) stage.body.push_back(Stage(child));
    } else if (stage.loop) {
      Error(node, "loop group '" + stage.id + "' has no 'stages'");
    }
    if (!stage.loop && !node["uses"]) {
      Error(node, "stage '" + stage.id + "' has no 'uses' (native:<name> or lua:<path>)");
    }
    return stage;
  }

  Pipeline Parse(const YAML::Node& root) {
    Pipeline pipeline;
    if (!root.IsMap()) {
      Error(root, "a pipeline must be a mapping with version, name and stages");
      return pipeline;
    }
    CheckKeys(root, kTopLevelKeys, "pipeline");
    if (auto version = root["version"]) {
      pipeline.version = Integer(version, "version", 1);
      if (pipeline.version != 1) Error(version, "unsupported pipeline version " + std::to_string(pipeline.version) + " (this host reads version 1)");
    } else {
      Error(root, "pipeline has no 'version' (use version: 1)");
    }
    if (auto name = root["name"]) pipeline.name = String(name, "name");
    else Error(root, "pipeline has no 'name'");
    if (auto description = root["description"]) pipeline.description = String(description, "description");
    for (const char* key : {"vars", "backend", "llm"}) {
      if (auto node = root[key]) {
        if (!node.IsMap()) {
          Error(node, std::string("'") + key + "' must be a mapping");
          continue;
        }
        nlohmann::json value = Json(node);
        // Where each entry is, for validate's messages about values and the llm: block.
        for (auto it = node.begin(); it != node.end(); ++it) {
          const std::string name = it->first.Scalar();
          if (std::string(key) == "vars") pipeline.vars_where[name] = LocationOf(it->second, file_);
          if (std::string(key) != "llm") continue;
          pipeline.llm_where[name] = LocationOf(it->second, file_);
          if (!it->second.IsMap()) continue;
          for (auto field = it->second.begin(); field != it->second.end(); ++field) {
            pipeline.llm_where[name + "." + field->first.Scalar()] = LocationOf(field->second, file_);
          }
        }
        if (std::string(key) == "llm") pipeline.llm_block_where = LocationOf(node, file_);
        if (std::string(key) == "vars") pipeline.vars = value;
        else if (std::string(key) == "backend") pipeline.backend = value;
        else pipeline.llm = value;
      }
    }
    if (auto paths = root["python_path"]) {
      // One folder or a list of them, relative to the pipeline file.
      std::vector<YAML::Node> entries;
      if (paths.IsScalar()) entries.push_back(paths);
      else if (paths.IsSequence()) for (const auto& entry : paths) entries.push_back(entry);
      else Error(paths, "python_path must be a folder or a list of folders");
      for (const auto& entry : entries) {
        std::string folder = String(entry, "python_path entry");
        if (folder.empty()) continue;
        auto absolute = (std::filesystem::absolute(file_).parent_path() / folder).lexically_normal();
        if (!std::filesystem::is_directory(absolute)) {
          Error(entry, "python_path folder not found: " + absolute.string() + " (paths are relative to the pipeline file)");
        }
        pipeline.python_path.push_back(absolute.string());
      }
    }
    if (auto stages = root["stages"]; stages && stages.IsSequence() && stages.size() > 0) {
      for (const auto& node : stages) pipeline.stages.push_back(Stage(node));
    } else {
      Error(stages ? stages : root, "pipeline needs a non-empty 'stages' list");
    }
    return pipeline;
  }

  std::vector<Diagnostic>& diagnostics() { return diagnostics_; }

 private:
  std::string file_;
  std::vector<Diagnostic> diagnostics_;
  std::set<std::string> ids_;
};

// Applies one "a.b.c=value" override to the YAML tree.
void ApplyOverride(YAML::Node root, const std::string& text, const std::string& file,
                   std::vector<Diagnostic>* diagnostics) {
  if (size_t bad = FindInvalidUtf8(text); bad != std::string_view::npos) {
    diagnostics->push_back({SourceLocation{"--set", 1, static_cast<int>(bad + 1)}, "invalid UTF-8"});
    return;
  }
  SourceLocation where{"--set " + text};
  auto eq = text.find('=');
  if (eq == std::string::npos || eq == 0) {
    diagnostics->push_back({where, "--set expects KEY=VALUE, e.g. --set vars.cases=small"});
    return;
  }
  std::string key = text.substr(0, eq);
  std::vector<std::string> path;
  for (size_t start = 0, dot; start <= key.size(); start = dot + 1) {
    dot = key.find('.', start);
    if (dot == std::string::npos) dot = key.size();
    path.push_back(key.substr(start, dot - start));
  }
  static const std::vector<std::string> kSettable = {"vars", "backend", "llm", "name"};
  if (std::find(kSettable.begin(), kSettable.end(), path[0]) == kSettable.end()) {
    diagnostics->push_back({where, "--set can change vars.*, backend.*, llm.* or name, not '" + path[0] + "'" +
                                       DidYouMeanSuffix(path[0], kSettable)});
    return;
  }
  // vars.* and backend.* may only set names the file declares: a typo such as
  // vars.case=small must not run the full sizes silently.
  if ((path[0] == "vars" || path[0] == "backend") && path.size() >= 2) {
    YAML::Node block = root[path[0]];
    std::vector<std::string> declared;
    if (block && block.IsMap()) {
      for (auto it = block.begin(); it != block.end(); ++it) declared.push_back(it->first.Scalar());
    }
    if (std::find(declared.begin(), declared.end(), path[1]) == declared.end()) {
      SourceLocation at = block ? LocationOf(block, file) : SourceLocation{file};
      std::string known;
      for (const auto& name : declared) known += (known.empty() ? "" : ", ") + name;
      diagnostics->push_back({at, "--set " + text + ": the pipeline has no " +
                                      (path[0] == "vars" ? "variable '" : "backend setting '") + path[1] + "'" +
                                      DidYouMeanSuffix(path[1], declared) + " (" + path[0] + ": declares " +
                                      (known.empty() ? "nothing" : known) + ")"});
      return;
    }
  }
  YAML::Node value;
  try {
    value = LoadYamlChecked(text.substr(eq + 1), "--set " + key);
  } catch (const ConfigError& error) {
    for (const auto& d : error.diagnostics()) diagnostics->push_back({d.where, "cannot parse value: " + d.message});
    return;
  } catch (const YAML::Exception& error) {
    diagnostics->push_back({where, "cannot parse value: " + error.msg});
    return;
  }
  if (path.size() == 1) {
    root[path[0]] = value;
    return;
  }
  std::vector<YAML::Node> chain{root};
  for (size_t i = 0; i + 1 < path.size(); ++i) {
    YAML::Node next = chain.back()[path[i]];
    if (!next.IsMap()) next = YAML::Node(YAML::NodeType::Map);
    chain.push_back(next);
  }
  chain.back()[path.back()] = value;
  for (size_t i = chain.size() - 1; i > 0; --i) chain[i - 1][path[i - 1]] = chain[i];
}

}  // namespace

Pipeline LoadPipeline(const std::filesystem::path& path, const std::vector<std::string>& overrides) {
  const std::string file = path.string();
  // Bounded reading: regular files only, size cap, UTF-8, alias expansion cap.
  const std::string text = ReadPipelineFile(path);
  YAML::Node root = LoadYamlChecked(text, file);
  std::vector<Diagnostic> diagnostics;
  if (root.IsMap()) {
    // Duplicates are checked on the file as written, before overrides rebuild nodes.
    CheckDuplicateKeys(root, file, &diagnostics);
    for (const auto& item : overrides) ApplyOverride(root, item, file, &diagnostics);
  }
  Parser parser(file);
  Pipeline pipeline = parser.Parse(root);
  diagnostics.insert(diagnostics.end(), parser.diagnostics().begin(), parser.diagnostics().end());
  if (!diagnostics.empty()) throw ConfigError(diagnostics);
  pipeline.file = std::filesystem::absolute(path).lexically_normal();
  YAML::Emitter emitter;
  emitter << root;
  pipeline.resolved_yaml = std::string(emitter.c_str()) + "\n";
  return pipeline;
}

}  // namespace accelopt
