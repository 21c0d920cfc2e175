// accelopt/plugin_sdk.hpp - C++ convenience layer over plugin_api.h.
//
// A plugin writes each stage as `nlohmann::json Run(accelopt::sdk::StageContext&)`
// and lists them in a table:
//
//   static nlohmann::json RunHello(accelopt::sdk::StageContext& ctx) {
//     return {{"greeting", "hello " + ctx.With().value("who", "world")}};
//   }
//   static const AccelStageDescriptor kStages[] = {
//       ACCELOPT_STAGE("hello", "Greets somebody.", R"({"who": {"type": "string"}})", RunHello),
//   };
//   ACCELOPT_EXPORT_PLUGIN("hello", "1.0.0", kStages)
//
// Exceptions never cross the C boundary: a thrown StageFailure becomes the
// stage's error {kind, message, details}; any other std::exception becomes
// kind "stage_error".
#pragma once

#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "accelopt/plugin_api.h"

namespace accelopt::sdk {

/// A stage failure with a machine-readable kind (e.g. "config_error").
struct StageFailure : std::runtime_error {
  StageFailure(std::string kind_in, const std::string& message, nlohmann::json details_in = nullptr)
      : std::runtime_error(message), kind(std::move(kind_in)), details(std::move(details_in)) {}
  std::string kind;
  nlohmann::json details;
};

/// What a running stage sees: its inputs and the host's services.
class StageContext {
 public:
  StageContext(const AccelHostApi* host, nlohmann::json input) : host_(host), input_(std::move(input)) {}

  /// The resolved `with:` parameters (object).
  const nlohmann::json& With() const { return input_.at("with"); }
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
    char* result = host_->llm_chat(host_->ctx, request.dump().c_str(), &error);
    return TakeResult(result, error, "llm_error", "LLM call");
  }

  /// module.function(arg) in an isolated worker process (untrusted code).
  /// Throws StageFailure with kind timeout, out_of_memory, crash, ...
  nlohmann::json IsolatedCall(const std::string& module, const std::string& function, const nlohmann::json& arg,
                              const nlohmann::json& limits) const {
    char* error = nullptr;
    char* result = host_->isolated_call(host_->ctx, module.c_str(), function.c_str(), arg.dump().c_str(),
                                        limits.dump().c_str(), &error);
    return TakeResult(result, error, "worker_error", module + "." + function);
  }

  /// Calls module.function(arg) in the embedded interpreter.
  /// Throws StageFailure(kind "python_error", ...) with the traceback in details.
  nlohmann::json PythonCall(const std::string& module, const std::string& function,
                            const nlohmann::json& arg) const {
    char* error = nullptr;
    char* result = host_->python_call(host_->ctx, module.c_str(), function.c_str(), arg.dump().c_str(), &error);
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
};

inline char* CopyString(const std::string& text) {
  char* out = static_cast<char*>(std::malloc(text.size() + 1));
  std::memcpy(out, text.c_str(), text.size() + 1);
  return out;
}

inline void FreeString(char* text) { std::free(text); }

/// Adapts `nlohmann::json Fn(StageContext&)` to AccelStageDescriptor::run.
template <nlohmann::json (*Fn)(StageContext&)>
int RunTrampoline(const AccelHostApi* host, const char* input_json, char** output_json, char** error_json) {
  nlohmann::json error;
  try {
    StageContext ctx(host, nlohmann::json::parse(input_json));
    *output_json = CopyString(Fn(ctx).dump());
    return 0;
  } catch (const StageFailure& failure) {
    error = {{"kind", failure.kind}, {"message", failure.what()}, {"details", failure.details}};
  } catch (const std::exception& ex) {
    error = {{"kind", "stage_error"}, {"message", ex.what()}, {"details", nullptr}};
  }
  *error_json = CopyString(error.dump());
  return 1;
}

}  // namespace accelopt::sdk

/// One entry of a plugin's stage table.
#define ACCELOPT_STAGE(name, description, params_json, fn) \
  AccelStageDescriptor { name, description, params_json, &::accelopt::sdk::RunTrampoline<fn>, &::accelopt::sdk::FreeString }

/// Exports accelopt_plugin_info() for a static stage table.
#define ACCELOPT_EXPORT_PLUGIN(plugin_name, plugin_version, stage_table)                               \
  extern "C" __attribute__((visibility("default"))) const AccelPluginInfo* accelopt_plugin_info(void) { \
    static const AccelPluginInfo info = {ACCELOPT_PLUGIN_API_VERSION, plugin_name, plugin_version,     \
                                         sizeof(stage_table) / sizeof(stage_table[0]), stage_table};   \
    return &info;                                                                                      \
  }
