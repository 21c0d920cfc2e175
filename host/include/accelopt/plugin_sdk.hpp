// accelopt/plugin_sdk.hpp - C++ convenience layer over plugin_api.h.
//
// A plugin writes each stage as `nlohmann::json Run(accelopt::sdk::StageContext&)`
// and lists them in a table:
//
//   static nlohmann::json RunHello(accelopt::sdk::StageContext& ctx) {
//     return {{"greeting", "hello " + ctx.Param<std::string>("who")}};  // default from the schema
//   }
//   static const AccelStageDescriptor kStages[] = {
//       ACCELOPT_STAGE("hello", "Greets somebody.", R"({"who": {"type": "string", "default": "world"}})", RunHello),
//       ACCELOPT_STAGE_WITH_OUTPUTS("hello2", "Greets somebody.", R"({"who": {"type": "string", "default": "world"}})",
//                                   R"({"greeting": {"type": "string", "doc": "the greeting"}})", RunHello),
//   };
//   ACCELOPT_EXPORT_PLUGIN("hello", "1.0.0", kStages)
//
// Parameters: ctx.Param<T>(name) / ctx.OptionalParam<T>(name) read `with:` and
// fall back to the schema's `default` (accelopt/sdk/params.hpp). Files:
// accelopt::sdk::WriteFile / WriteJsonFile write atomically, AppendFile appends,
// RemoveAll deletes; below the run directory none follows a symlink; all throw
// StageFailure{io_error} on failure (accelopt/sdk/files.hpp). Host functions
// newer than the oldest host a plugin supports are tested with
// ACCEL_HOST_API_HAS (plugin_api.h, "Growing the ABI").
//
// Exceptions never cross the C boundary: a thrown StageFailure becomes the
// stage's error {kind, message, details}; any other exception becomes kind
// "stage_error". The error path itself cannot throw: JSON is dumped with
// invalid UTF-8 replaced by U+FFFD, and allocation failures return a fixed
// text (RunTrampoline is noexcept).
#pragma once

#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "accelopt/api_entries.hpp"
#include "accelopt/plugin_api.h"
#include "accelopt/sdk/failure.hpp"
#include "accelopt/sdk/files.hpp"
#include "accelopt/sdk/numbers.hpp"
#include "accelopt/sdk/parallel.hpp"
#include "accelopt/sdk/params.hpp"
#include "accelopt/sdk/records.hpp"

namespace accelopt::sdk {

/// What a running stage sees: its inputs and the host's services.
class StageContext {
 public:
  /// `input`: the stage input object (plugin_api.h); `params_schema`: the stage's
  /// declared params JSON text (the source of parameter defaults), or nullptr.
  StageContext(const AccelHostApi* host, nlohmann::json input, const char* params_schema = nullptr)
      : host_(host), input_(std::move(input)), params_schema_(params_schema) {}

  /// The resolved `with:` parameters (object).
  const nlohmann::json& With() const { return input_.at("with"); }
  /// Parameter `name` as T: its `with:` value, else the schema's default. Throws
  /// StageFailure{config_error} when it has neither or the value does not convert.
  template <typename T>
  T Param(const std::string& name) const {
    return GetParam<T>(With(), Schema(), name);
  }
  /// Parameter `name` as T, or nullopt when it has neither a value nor a default.
  /// Throws StageFailure{config_error} when the value does not convert.
  template <typename T>
  std::optional<T> OptionalParam(const std::string& name) const {
    return GetOptionalParam<T>(With(), Schema(), name);
  }
  /// The stage's declared params schema (an object; empty when none was given).
  const nlohmann::json& Schema() const {
    if (!schema_) {
      auto parsed = nlohmann::json::parse(params_schema_ ? params_schema_ : "{}", nullptr, false);
      schema_ = std::make_shared<const nlohmann::json>(parsed.is_object() ? parsed : nlohmann::json::object());
    }
    return *schema_;
  }
  /// The pipeline's resolved `vars` (object).
  const nlohmann::json& Vars() const { return input_.at("vars"); }
  std::string StageId() const { return input_.value("stage_id", ""); }
  /// Absolute directory owned by this stage invocation (exists).
  std::string StageDir() const { return input_.value("stage_dir", ""); }
  /// Absolute run directory.
  std::string RunDir() const { return input_.value("run_dir", ""); }

  void Log(int level, const std::string& message) const { host_->log(host_->ctx, level, message.c_str()); }
  void Info(const std::string& message) const { Log(ACCEL_LOG_INFO, message); }
  void Warn(const std::string& message) const { Log(ACCEL_LOG_WARN, message); }
  void Progress(int64_t done, int64_t total, const std::string& label) const {
    host_->progress(host_->ctx, done, total, label.c_str());
  }
  bool Cancelled() const { return host_->cancelled(host_->ctx) != 0; }

  /// One chat completion (see AccelHostApi::llm_chat). Throws
  /// StageFailure with the LLM error kind (llm_rate_limit, llm_timeout, ...).
  nlohmann::json LlmChat(const nlohmann::json& request) const {
    char* error = nullptr;
    char* result = host_->llm_chat(host_->ctx, Dump(request).c_str(), &error);
    return TakeResult(result, error, "llm_error", "LLM call");
  }

  /// The spend caps of LLM endpoint `endpoint` and what was spent (docs/llm.md, "Spend
  /// caps"): {"caps", "run": {..., "stopped"}, "problems": {name: {requests, tokens, usd,
  /// refused, stopped}}} for `problems` (every problem seen when empty); "stopped" is the
  /// reason a next request would be refused ("spend cap: 200 requests per problem reached
  /// (200 spent)") or null. Null when the run has no such endpoint (or no LLM at all).
  nlohmann::json LlmSpend(const std::string& endpoint, const std::vector<std::string>& problems = {}) const {
    try {
      nlohmann::json status = LlmChat({{"spend", true}, {"endpoint", endpoint}, {"problems", problems}});
      return status.value("available", false) ? status : nlohmann::json();
    } catch (const StageFailure&) {
      return nullptr;  // no LLM service: nothing is capped
    }
  }

  /// problem -> reason for each of `problems` that may not send another request to
  /// `endpoint` because its spend cap, or the run's, is reached (LlmSpend); empty without an LLM.
  std::map<std::string, std::string> LlmStopped(const std::string& endpoint, const std::vector<std::string>& problems) const {
    std::map<std::string, std::string> stopped;
    if (problems.empty()) return stopped;
    const nlohmann::json status = LlmSpend(endpoint, problems);
    if (!status.is_object()) return stopped;
    const nlohmann::json problems_spend = status.value("problems", nlohmann::json::object());  // items() must not outlive it
    for (const auto& [name, spend] : problems_spend.items()) {
      if (spend.is_object() && spend.contains("stopped") && spend["stopped"].is_string()) stopped[name] = spend["stopped"];
    }
    return stopped;
  }

  /// module.function(arg) in an isolated worker process (untrusted code).
  /// Throws StageFailure with kind timeout, out_of_memory, crash, ...
  nlohmann::json IsolatedCall(const std::string& module, const std::string& function, const nlohmann::json& arg,
                              const nlohmann::json& limits) const {
    char* error = nullptr;
    char* result = host_->isolated_call(host_->ctx, module.c_str(), function.c_str(), Dump(arg).c_str(),
                                        Dump(limits).c_str(), &error);
    return TakeResult(result, error, "worker_error", module + "." + function);
  }

  /// Calls module.function(*args, **kwargs) in the embedded interpreter
  /// (`args` a JSON array, `kwargs` a JSON object). Needs a host of plugin API
  /// version 2 or later. Throws StageFailure(kind "python_error", ...) with the
  /// traceback in details.
  nlohmann::json PythonCallArgs(const std::string& module, const std::string& function, const nlohmann::json& args,
                                const nlohmann::json& kwargs = nlohmann::json::object()) const {
    if (!ACCEL_HOST_API_HAS(host_, python_call_args)) {
      throw StageFailure("python_error", "python_call_args needs a host of plugin API version 2 or later");
    }
    char* error = nullptr;
    char* result = host_->python_call_args(host_->ctx, module.c_str(), function.c_str(), Dump(args).c_str(),
                                           Dump(kwargs).c_str(), &error);
    return TakeResult(result, error, "python_error", module + "." + function);
  }

  /// The calls above naming an entry of the declared C++/Python boundary
  /// (accelopt/api_entries.hpp): how built-in plugins call the accelopt package.
  nlohmann::json PythonCall(const api::Entry& entry, const nlohmann::json& arg) const {
    return PythonCall(entry.module, entry.function, arg);
  }
  nlohmann::json IsolatedCall(const api::Entry& entry, const nlohmann::json& arg, const nlohmann::json& limits) const {
    return IsolatedCall(entry.module, entry.function, arg, limits);
  }

  /// Calls module.function(arg) in the embedded interpreter.
  /// Throws StageFailure(kind "python_error", ...) with the traceback in details.
  nlohmann::json PythonCall(const std::string& module, const std::string& function,
                            const nlohmann::json& arg) const {
    char* error = nullptr;
    char* result = host_->python_call(host_->ctx, module.c_str(), function.c_str(), Dump(arg).c_str(), &error);
    if (result == nullptr) {
      nlohmann::json err = nlohmann::json::parse(error ? error : "{}", nullptr, false);
      if (error) host_->free_string(error);
      std::string message = err.is_object() ? err.value("message", "python call failed") : "python call failed";
      throw StageFailure("python_error", module + "." + function + ": " + message, err);
    }
    nlohmann::json value = nlohmann::json::parse(result);
    host_->free_string(result);
    return value;
  }

 private:
  static std::string Dump(const nlohmann::json& value) {
    return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }

  nlohmann::json TakeResult(char* result, char* error, const char* default_kind, const std::string& what) const {
    if (result == nullptr) {
      nlohmann::json err = nlohmann::json::parse(error ? error : "{}", nullptr, false);
      if (error) host_->free_string(error);
      if (!err.is_object()) err = nlohmann::json::object();
      throw StageFailure(err.value("kind", default_kind), what + ": " + err.value("message", "failed"), err);
    }
    nlohmann::json value = nlohmann::json::parse(result);
    host_->free_string(result);
    return value;
  }

  const AccelHostApi* host_;
  nlohmann::json input_;
  const char* params_schema_;
  mutable std::shared_ptr<const nlohmann::json> schema_;
};

/// A malloc'd copy of `text` (freed by FreeString), or NULL if out of memory.
inline char* CopyString(const std::string& text) noexcept {
  char* out = static_cast<char*>(std::malloc(text.size() + 1));
  if (out != nullptr) std::memcpy(out, text.c_str(), text.size() + 1);
  return out;
}

inline void FreeString(char* text) noexcept { std::free(text); }

/// The error JSON {kind, message, details} as a malloc'd text. Never throws:
/// invalid UTF-8 becomes U+FFFD, and if even that fails (out of memory) a
/// fixed text of the same shape is returned.
inline char* ErrorText(const std::string& kind, const std::string& message, const nlohmann::json& details) noexcept {
  try {
    nlohmann::json error = {{"kind", kind}, {"message", message}, {"details", details}};
    return CopyString(error.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  } catch (...) {
    return CopyString(R"({"kind": "stage_error", "message": "the stage failed and its error could not be encoded", "details": null})");
  }
}

/// Runs `Fn(StageContext&)` for AccelStageDescriptor::run; `params_schema` is the
/// stage's params JSON (parameter defaults for StageContext::Param). Outputs are
/// dumped strictly: outputs with invalid UTF-8 are a stage error (kind
/// "bad_output"), not silently altered.
template <nlohmann::json (*Fn)(StageContext&)>
int RunStage(const char* params_schema, const AccelHostApi* host, const char* input_json, char** output_json,
             char** error_json) noexcept {
  try {
    StageContext ctx(host, nlohmann::json::parse(input_json), params_schema);
    AddRunRoot(ctx.RunDir());  // files below it are written without following symlinks (files.hpp)
    nlohmann::json outputs = Fn(ctx);
    std::string text;
    try {
      text = outputs.dump();
    } catch (const nlohmann::json::type_error& error) {
      *error_json = ErrorText("bad_output", std::string("the stage's outputs are not valid JSON: ") + error.what(), nullptr);
      return 1;
    }
    *output_json = CopyString(text);
    if (*output_json != nullptr) return 0;
    *error_json = ErrorText("stage_error", "out of memory while returning the outputs", nullptr);
  } catch (const StageFailure& failure) {
    *error_json = ErrorText(failure.kind, failure.what(), failure.details);
  } catch (const std::exception& ex) {
    *error_json = ErrorText("stage_error", ex.what(), nullptr);
  } catch (...) {
    *error_json = ErrorText("stage_error", "the stage threw a non-standard exception", nullptr);
  }
  return 1;
}

/// RunStage without a params schema (StageContext::Param then finds no defaults).
template <nlohmann::json (*Fn)(StageContext&)>
int RunTrampoline(const AccelHostApi* host, const char* input_json, char** output_json, char** error_json) noexcept {
  return RunStage<Fn>(nullptr, host, input_json, output_json, error_json);
}

}  // namespace accelopt::sdk

/// The AccelStageDescriptor::run of stage function `fn` whose params are `params_json`.
#define ACCELOPT_STAGE_RUN(params_json, fn)                                                          \
  [](const AccelHostApi* host, const char* input_json, char** output_json, char** error_json) noexcept { \
    return ::accelopt::sdk::RunStage<fn>(params_json, host, input_json, output_json, error_json);        \
  }

/// One entry of a plugin's stage table.
#define ACCELOPT_STAGE(name, description, params_json, fn)                                                      \
  AccelStageDescriptor {                                                                                         \
    name, description, params_json, ACCELOPT_STAGE_RUN(params_json, fn), &::accelopt::sdk::FreeString, nullptr \
  }

/// One entry of a plugin's stage table that also declares its outputs
/// ({"field": {"type", "doc"}}; shown by `accelopt-host stages`, checked by `validate`).
#define ACCELOPT_STAGE_WITH_OUTPUTS(name, description, params_json, outputs_json, fn)                               \
  AccelStageDescriptor {                                                                                            \
    name, description, params_json, ACCELOPT_STAGE_RUN(params_json, fn), &::accelopt::sdk::FreeString, outputs_json \
  }

/// Exports accelopt_plugin_info() for a static stage table.
#define ACCELOPT_EXPORT_PLUGIN(plugin_name, plugin_version, stage_table)                               \
  extern "C" __attribute__((visibility("default"))) const AccelPluginInfo* accelopt_plugin_info(void) { \
    static const AccelPluginInfo info = {ACCELOPT_PLUGIN_API_VERSION, sizeof(AccelStageDescriptor),    \
                                         plugin_name, plugin_version,                                  \
                                         sizeof(stage_table) / sizeof(stage_table[0]), stage_table};   \
    return &info;                                                                                      \
  }
