#include "plugin/plugin_loader.h"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <sstream>

#include <spdlog/spdlog.h>

#include "accelopt/plugin_api.h"
#include "core/errors.h"
#include "pipeline/param_check.h"
#include "plugin/host_services.h"
#include "python/interpreter.h"

namespace accelopt {
namespace {

struct HostCallbackContext {
  const StageInvocation* invocation;
};

void HostLog(void* ctx, int level, const char* message) {
  auto* c = static_cast<HostCallbackContext*>(ctx);
  if (c->invocation->log) c->invocation->log(level, message ? message : "");
}

char* CopyCString(const std::string& text) {
  char* out = static_cast<char*>(std::malloc(text.size() + 1));
  if (out == nullptr) throw std::bad_alloc();
  std::memcpy(out, text.c_str(), text.size() + 1);
  return out;
}

// JSON text for the plugin; invalid UTF-8 (e.g. in a Python message) becomes U+FFFD.
std::string Dump(const nlohmann::json& value) { return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); }

// Hands `error` to the plugin; never throws (it runs inside catch handlers).
void SetError(char** error_json, const nlohmann::json& error) noexcept {
  if (error_json == nullptr) return;
  try {
    *error_json = CopyCString(Dump(error));
  } catch (...) {
    *error_json = nullptr;
  }
}

char* HostPythonCall(void* ctx, const char* module, const char* function, const char* json_arg, char** error_json) {
  try {
    auto arg = nlohmann::json::parse(json_arg ? json_arg : "null");
    return CopyCString(Dump(python::CallJson(module, function, arg)));
  } catch (const python::PythonError& error) {
    SetError(error_json, error.ToJson());
  } catch (const std::exception& error) {
    SetError(error_json, {{"kind", "python_error"}, {"message", error.what()}, {"traceback", ""}});
  }
  return nullptr;
}

char* HostPythonCallArgs(void* ctx, const char* module, const char* function, const char* args_json,
                         const char* kwargs_json, char** error_json) {
  try {
    auto args = nlohmann::json::parse(args_json ? args_json : "[]");
    auto kwargs = nlohmann::json::parse(kwargs_json ? kwargs_json : "{}");
    return CopyCString(Dump(python::CallJsonArgs(module, function, args, kwargs)));
  } catch (const python::PythonError& error) {
    SetError(error_json, error.ToJson());
  } catch (const std::exception& error) {
    SetError(error_json, {{"kind", "python_error"}, {"message", error.what()}, {"traceback", ""}});
  }
  return nullptr;
}

void HostProgress(void* ctx, int64_t done, int64_t total, const char* label) {
  auto* c = static_cast<HostCallbackContext*>(ctx);
  if (c->invocation->progress) c->invocation->progress(done, total, label ? label : "");
}

int HostCancelled(void* ctx) { return static_cast<HostCallbackContext*>(ctx)->invocation->cancelled->load() ? 1 : 0; }

void HostFree(char* text) { std::free(text); }

// Runs a host service, turning StageError into the ABI's error JSON.
template <typename Fn>
char* CallService(char** error_json, Fn&& fn) {
  try {
    return CopyCString(Dump(fn()));
  } catch (const StageError& error) {
    SetError(error_json, error.ToJson());
  } catch (const python::PythonError& error) {
    SetError(error_json, error.ToJson());
  } catch (const std::exception& error) {
    SetError(error_json, {{"kind", "host_error"}, {"message", error.what()}});
  }
  return nullptr;
}

char* HostLlmChat(void* ctx, const char* request_json, char** error_json) {
  auto* c = static_cast<HostCallbackContext*>(ctx);
  return CallService(error_json, [&] {
    auto& service = GlobalHostServices().llm_chat;
    if (!service) throw StageError("llm_config", "no LLM endpoint is configured for this run (see docs/llm.md)");
    return service(nlohmann::json::parse(request_json ? request_json : "{}"), c->invocation->stage_id);
  });
}

char* HostIsolatedCall(void* ctx, const char* module, const char* function, const char* json_arg,
                       const char* limits_json, char** error_json) {
  return CallService(error_json, [&] {
    auto arg = nlohmann::json::parse(json_arg ? json_arg : "null");
    auto limits = nlohmann::json::parse(limits_json ? limits_json : "{}");
    auto& service = GlobalHostServices().isolated_call;
    // Without a worker pool (or when asked) the call runs in-process.
    if (!service || limits.value("isolation", "worker") == "inprocess") return python::CallJson(module, function, arg);
    return service(module, function, arg, limits);
  });
}

// AccelStageDescriptor as plugins of API version 1 lay it out (no outputs_json).
struct StageDescriptorV1 {
  const char* name;
  const char* description;
  const char* params_json;
  int (*run)(const AccelHostApi* host, const char* input_json, char** output_json, char** error_json);
  void (*free_string)(char* text);
};

// The fields of one stage table entry, whatever the plugin's API version.
struct StageEntry {
  const char* name;
  const char* description;
  const char* params_json;
  const char* outputs_json;
  int (*run)(const AccelHostApi* host, const char* input_json, char** output_json, char** error_json);
  void (*free_string)(char* text);
};

// Bytes of one stage table entry: the plugin's own sizeof(AccelStageDescriptor)
// from version 3 on (ABI growth), the fixed layouts before.
size_t StageStride(const AccelPluginInfo* info) {
  if (info->api_version == 1) return sizeof(StageDescriptorV1);
  if (info->api_version == 2) return ACCEL_STAGE_DESCRIPTOR_V2_SIZE;
  return info->stage_size;
}

// Field `field` of a stage entry of `stride` bytes, or nullptr when the plugin's
// descriptor ends before it (a plugin built before the field was appended).
#define ACCEL_STAGE_FIELD(entry, stride, field) \
  (offsetof(AccelStageDescriptor, field) + sizeof((entry)->field) <= (stride) ? (entry)->field : nullptr)

StageEntry EntryOf(const AccelPluginInfo* info, size_t i) {
  if (info->api_version == 1) {
    const auto* v1 = reinterpret_cast<const StageDescriptorV1*>(info->stages) + i;
    return {v1->name, v1->description, v1->params_json, nullptr, v1->run, v1->free_string};
  }
  const size_t stride = StageStride(info);
  const auto* d = reinterpret_cast<const AccelStageDescriptor*>(reinterpret_cast<const char*>(info->stages) + i * stride);
  return {d->name, d->description, d->params_json, ACCEL_STAGE_FIELD(d, stride, outputs_json), d->run, d->free_string};
}

// A schema text of a stage: a JSON object; throws ConfigError naming the stage and the problem.
nlohmann::json ParseSchema(const char* text, const std::string& stage, const std::string& what, const SourceLocation& where) {
  auto schema = nlohmann::json::parse(text ? text : "{}", nullptr, false);
  if (!schema.is_object()) {
    throw ConfigError(where, "stage '" + stage + "' declares " + (what == "params" ? "parameters" : "outputs") +
                                 " that are not a JSON object");
  }
  auto problems = CheckSchema(schema, what);
  if (!problems.empty()) {
    std::vector<Diagnostic> diagnostics;
    for (const auto& problem : problems) diagnostics.push_back({where, "stage '" + stage + "': " + problem});
    throw ConfigError(diagnostics);
  }
  return schema;
}

class NativeStage : public Stage {
 public:
  NativeStage(StageEntry descriptor, std::filesystem::path origin, nlohmann::json params, nlohmann::json outputs)
      : entry_(descriptor), origin_(std::move(origin)), params_(std::move(params)),
        outputs_(std::move(outputs)) {}

  std::string Uses() const override { return std::string("native:") + entry_.name; }
  std::string Description() const override { return entry_.description ? entry_.description : ""; }
  nlohmann::json Params() const override { return params_; }
  nlohmann::json Outputs() const override { return outputs_; }
  std::string Origin() const override { return origin_.string(); }

  nlohmann::json Run(const StageInvocation& invocation) const override {
    HostCallbackContext ctx{&invocation};
    AccelHostApi api{};
    api.api_version = ACCELOPT_PLUGIN_API_VERSION;
    api.struct_size = sizeof(AccelHostApi);
    api.ctx = &ctx;
    api.log = HostLog;
    api.python_call = HostPythonCall;
    api.progress = HostProgress;
    api.cancelled = HostCancelled;
    api.free_string = HostFree;
    api.llm_chat = HostLlmChat;
    api.isolated_call = HostIsolatedCall;
    api.python_call_args = HostPythonCallArgs;
    nlohmann::json input = {{"with", invocation.with},           {"vars", invocation.vars},
                            {"stage_id", invocation.stage_id},   {"stage_dir", invocation.stage_dir.string()},
                            {"run_dir", invocation.run_dir.string()}};
    char* output = nullptr;
    char* error = nullptr;
    int rc = entry_.run(&api, Dump(input).c_str(), &output, &error);
    std::string output_text = output ? output : "";
    std::string error_text = error ? error : "";
    if (output) entry_.free_string(output);
    if (error) entry_.free_string(error);
    if (rc != 0) {
      auto err = nlohmann::json::parse(error_text, nullptr, false);
      if (!err.is_object()) throw StageError("stage_error", Uses() + " failed without an error description");
      throw StageError(err.value("kind", "stage_error"), err.value("message", "stage failed"),
                       err.contains("details") ? err["details"] : nlohmann::json());
    }
    auto out = nlohmann::json::parse(output_text, nullptr, false);
    if (out.is_discarded()) throw StageError("bad_output", Uses() + " returned output that is not JSON");
    return out;
  }

 private:
  StageEntry entry_;
  std::filesystem::path origin_;
  nlohmann::json params_;
  nlohmann::json outputs_;
};

}  // namespace

LoadedPlugin LoadPlugin(const std::filesystem::path& path) {
  SourceLocation where{path.string()};
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) throw ConfigError(where, std::string("cannot load plugin: ") + ::dlerror());
  auto info_fn = reinterpret_cast<AccelPluginInfoFn>(::dlsym(handle, ACCELOPT_PLUGIN_ENTRY_SYMBOL));
  if (!info_fn) {
    throw ConfigError(where, "not an accelopt plugin: missing symbol " ACCELOPT_PLUGIN_ENTRY_SYMBOL "()");
  }
  const AccelPluginInfo* info = info_fn();
  if (!info) throw ConfigError(where, ACCELOPT_PLUGIN_ENTRY_SYMBOL "() returned NULL");
  if (info->api_version < ACCELOPT_PLUGIN_API_MIN_VERSION || info->api_version > ACCELOPT_PLUGIN_API_VERSION) {
    std::ostringstream message;
    message << "plugin '" << (info->plugin_name ? info->plugin_name : "?") << "' was built for plugin API version "
            << info->api_version << ", but this host speaks versions " << ACCELOPT_PLUGIN_API_MIN_VERSION << " to "
            << ACCELOPT_PLUGIN_API_VERSION << "; rebuild the plugin against this host's accelopt/plugin_api.h";
    throw ConfigError(where, message.str());
  }
  if (info->api_version >= 3 && info->num_stages > 0 && info->stage_size < ACCEL_STAGE_DESCRIPTOR_V2_SIZE) {
    throw ConfigError(where, "plugin '" + std::string(info->plugin_name ? info->plugin_name : "?") +
                                 "' declares stage_size " + std::to_string(info->stage_size) +
                                 ", smaller than the smallest stage descriptor (" +
                                 std::to_string(ACCEL_STAGE_DESCRIPTOR_V2_SIZE) +
                                 " bytes); set it to sizeof(AccelStageDescriptor)");
  }
  LoadedPlugin plugin{info->plugin_name ? info->plugin_name : path.stem().string(),
                      info->plugin_version ? info->plugin_version : "", path, {}};
  for (size_t i = 0; i < info->num_stages; ++i) {
    StageEntry entry = EntryOf(info, i);
    if (!entry.name || !entry.run || !entry.free_string) {
      throw ConfigError(where, "stage #" + std::to_string(i) + " has no name, run or free_string");
    }
    auto params = ParseSchema(entry.params_json, entry.name, "params", where);
    auto outputs = ParseSchema(entry.outputs_json, entry.name, "outputs", where);
    plugin.stages.push_back(std::make_shared<NativeStage>(entry, path, std::move(params), std::move(outputs)));
  }
  return plugin;
}

std::vector<std::filesystem::path> PluginSearchPath() {
  std::vector<std::filesystem::path> dirs{ACCELOPT_PLUGIN_BUILD_DIR};
  if (const char* env = std::getenv("ACCELOPT_PLUGIN_PATH"); env && *env) {
    std::stringstream parts(env);
    std::string part;
    while (std::getline(parts, part, ':')) {
      if (!part.empty()) dirs.emplace_back(part);
    }
  }
  return dirs;
}

}  // namespace accelopt
