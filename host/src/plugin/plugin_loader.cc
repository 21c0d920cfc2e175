#include "plugin/plugin_loader.h"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <sstream>

#include <spdlog/spdlog.h>

#include "accelopt/plugin_api.h"
#include "core/errors.h"
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
  std::memcpy(out, text.c_str(), text.size() + 1);
  return out;
}

char* HostPythonCall(void* ctx, const char* module, const char* function, const char* json_arg, char** error_json) {
  try {
    auto arg = nlohmann::json::parse(json_arg ? json_arg : "null");
    return CopyCString(python::CallJson(module, function, arg).dump());
  } catch (const python::PythonError& error) {
    if (error_json) *error_json = CopyCString(error.ToJson().dump());
  } catch (const std::exception& error) {
    if (error_json) *error_json = CopyCString(nlohmann::json{{"kind", "python_error"}, {"message", error.what()}, {"traceback", ""}}.dump());
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
    return CopyCString(fn().dump());
  } catch (const StageError& error) {
    if (error_json) *error_json = CopyCString(error.ToJson().dump());
  } catch (const python::PythonError& error) {
    if (error_json) *error_json = CopyCString(error.ToJson().dump());
  } catch (const std::exception& error) {
    if (error_json) *error_json = CopyCString(nlohmann::json{{"kind", "host_error"}, {"message", error.what()}}.dump());
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

class NativeStage : public Stage {
 public:
  NativeStage(const AccelStageDescriptor* descriptor, std::filesystem::path origin, nlohmann::json params)
      : descriptor_(descriptor), origin_(std::move(origin)), params_(std::move(params)) {}

  std::string Uses() const override { return std::string("native:") + descriptor_->name; }
  std::string Description() const override { return descriptor_->description ? descriptor_->description : ""; }
  nlohmann::json Params() const override { return params_; }
  std::string Origin() const override { return origin_.string(); }

  nlohmann::json Run(const StageInvocation& invocation) const override {
    HostCallbackContext ctx{&invocation};
    AccelHostApi api{ACCELOPT_PLUGIN_API_VERSION, &ctx,    HostLog,    HostPythonCall, HostProgress,
                     HostCancelled,               HostFree, HostLlmChat, HostIsolatedCall};
    nlohmann::json input = {{"with", invocation.with},           {"vars", invocation.vars},
                            {"stage_id", invocation.stage_id},   {"stage_dir", invocation.stage_dir.string()},
                            {"run_dir", invocation.run_dir.string()}};
    char* output = nullptr;
    char* error = nullptr;
    int rc = descriptor_->run(&api, input.dump().c_str(), &output, &error);
    std::string output_text = output ? output : "";
    std::string error_text = error ? error : "";
    if (output) descriptor_->free_string(output);
    if (error) descriptor_->free_string(error);
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
  const AccelStageDescriptor* descriptor_;
  std::filesystem::path origin_;
  nlohmann::json params_;
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
  if (info->api_version != ACCELOPT_PLUGIN_API_VERSION) {
    std::ostringstream message;
    message << "plugin '" << (info->plugin_name ? info->plugin_name : "?") << "' was built for plugin API version "
            << info->api_version << ", but this host speaks version " << ACCELOPT_PLUGIN_API_VERSION
            << "; rebuild the plugin against this host's accelopt/plugin_api.h";
    throw ConfigError(where, message.str());
  }
  LoadedPlugin plugin{info->plugin_name ? info->plugin_name : path.stem().string(),
                      info->plugin_version ? info->plugin_version : "", path, {}};
  for (size_t i = 0; i < info->num_stages; ++i) {
    const AccelStageDescriptor* descriptor = &info->stages[i];
    if (!descriptor->name || !descriptor->run || !descriptor->free_string) {
      throw ConfigError(where, "stage #" + std::to_string(i) + " has no name, run or free_string");
    }
    auto params = nlohmann::json::parse(descriptor->params_json ? descriptor->params_json : "{}", nullptr, false);
    if (!params.is_object()) {
      throw ConfigError(where, std::string("stage '") + descriptor->name + "' declares parameters that are not a JSON object");
    }
    plugin.stages.push_back(std::make_shared<NativeStage>(descriptor, path, std::move(params)));
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
