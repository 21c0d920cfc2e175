/* accelopt/plugin_api.h - the C entry point of native stage plugins.
 *
 * A native plugin is a shared library that exports one symbol:
 *
 *     const AccelPluginInfo* accelopt_plugin_info(void);
 *
 * The host dlopen()s the library (RTLD_NOW | RTLD_LOCAL), calls that
 * function and refuses the plugin unless `api_version` lies between the host's
 * ACCELOPT_PLUGIN_API_MIN_VERSION and ACCELOPT_PLUGIN_API_VERSION. Everything that crosses the boundary is plain
 * C: stage inputs and outputs are UTF-8 JSON texts, so host and plugin may be
 * built with different compilers or standard libraries.
 *
 * Growing the ABI (since version 3). Both tables carry their own size:
 * AccelHostApi.struct_size (the host's sizeof(AccelHostApi)) and
 * AccelPluginInfo.stage_size (the plugin's sizeof(AccelStageDescriptor)).
 * A new host function or stage field is APPENDED to its struct, and the
 * version stays: a plugin tests ACCEL_HOST_API_HAS(host, field) before it
 * calls a function newer than the oldest host it supports, and the host
 * reads a stage field only when it lies within stage_size (fields a plugin
 * does not have read as NULL). Bump ACCELOPT_PLUGIN_API_VERSION only for a
 * breaking change: a field removed, reordered or retyped, or a changed
 * meaning. C++ plugin authors should use accelopt/plugin_sdk.hpp instead of
 * this file; docs/plugins.md has the rules and a worked example.
 *
 * Versions:
 *   1  the first ABI.
 *   2  AccelStageDescriptor gains `outputs_json` (declared outputs) at its
 *      end; AccelHostApi gains `python_call_args` (positional and keyword
 *      arguments) at its end.
 *   3  the tables carry their sizes (`struct_size`, `stage_size`, both in
 *      what was padding after `api_version`, so the layout of every other
 *      field is unchanged). The host loads plugins of versions 1 to 3; a
 *      plugin built for version 3 needs a host of version 3 or later.
 */
#ifndef ACCELOPT_PLUGIN_API_H
#define ACCELOPT_PLUGIN_API_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ACCELOPT_PLUGIN_API_VERSION 3u
/* The oldest plugin API version this host still loads. */
#define ACCELOPT_PLUGIN_API_MIN_VERSION 1u
#define ACCELOPT_PLUGIN_ENTRY_SYMBOL "accelopt_plugin_info"

/* Log levels accepted by AccelHostApi.log (spdlog's order). */
enum AccelLogLevel {
  ACCEL_LOG_TRACE = 0,
  ACCEL_LOG_DEBUG = 1,
  ACCEL_LOG_INFO = 2,
  ACCEL_LOG_WARN = 3,
  ACCEL_LOG_ERROR = 4
};

/* Services the host lends to a running stage. Valid only during `run`. */
typedef struct AccelHostApi {
  uint32_t api_version; /* the host's ACCELOPT_PLUGIN_API_VERSION */
  uint32_t struct_size; /* since version 3: sizeof(AccelHostApi) as the host was built; use ACCEL_HOST_API_HAS */
  void* ctx;            /* opaque; pass back to every callback */

  /* Log one message on behalf of the stage (prefixed with its id). */
  void (*log)(void* ctx, int level, const char* message);

  /* Call `module.function(arg)` in the host's embedded Python, where `arg`
   * is json.loads(json_arg) and the return value is json.dumps()-able.
   * Returns a malloc'd JSON text (free with free_string), or NULL on error;
   * then *error_json (if non-NULL) receives a malloc'd JSON object
   * {"kind","message","traceback"}. Takes the GIL itself. */
  char* (*python_call)(void* ctx, const char* module, const char* function,
                       const char* json_arg, char** error_json);

  /* Report item progress for the live progress line (done <= total). */
  void (*progress)(void* ctx, int64_t done, int64_t total, const char* label);

  /* Non-zero once the run was cancelled (Ctrl-C) or the stage timed out;
   * long-running stages should poll it and return early. */
  int (*cancelled)(void* ctx);

  /* Free a string returned by python_call, llm_chat or isolated_call. */
  void (*free_string)(char* text);

  /* One chat completion through the pipeline's `llm:` endpoints (retries,
   * transcript and token accounting are the host's). request_json:
   *   {"endpoint": "<name in llm:>", "messages": [{"role","content"}...],
   *    "temperature"?: x, "max_tokens"?: n}
   * Returns {"content", "finish_reason", "prompt_tokens",
   * "completion_tokens", "latency_ms", "model"} or NULL with *error_json =
   * {"kind": "llm_rate_limit|llm_server|llm_client|llm_timeout|
   *           llm_bad_output|llm_replay_miss|llm_config|...", "message"}. */
  char* (*llm_chat)(void* ctx, const char* request_json, char** error_json);

  /* Like python_call, but run in an isolated worker process for untrusted
   * code. limits_json: {"timeout_s"?: x, "memory_bytes"?: n,
   * "isolation"?: "worker"|"inprocess"}. On failure *error_json has
   * {"kind": "timeout|out_of_memory|crash|python_error|...", "message"}. */
  char* (*isolated_call)(void* ctx, const char* module, const char* function,
                         const char* json_arg, const char* limits_json,
                         char** error_json);

  /* Since version 2. Calls `module.function(*args, **kwargs)` in the
   * embedded Python, where args_json is a JSON array (or NULL: no positional
   * arguments) and kwargs_json a JSON object (or NULL: none). Result and
   * errors as python_call. */
  char* (*python_call_args)(void* ctx, const char* module, const char* function,
                            const char* args_json, const char* kwargs_json,
                            char** error_json);

  /* New host functions go here, at the end (see "Growing the ABI" above). */
} AccelHostApi;

/* Bytes of the table a host of `api_version` lends: struct_size from
 * version 3 on; the fixed layouts of versions 1 and 2 before. */
#define ACCEL_HOST_API_V1_SIZE offsetof(AccelHostApi, python_call_args)
#define ACCEL_HOST_API_V2_SIZE (offsetof(AccelHostApi, python_call_args) + sizeof(void*))
#define ACCEL_HOST_API_SIZE(api)                                                  \
  ((api)->api_version >= 3u ? (size_t)(api)->struct_size                          \
   : (api)->api_version == 2u ? (size_t)ACCEL_HOST_API_V2_SIZE : (size_t)ACCEL_HOST_API_V1_SIZE)
/* Non-zero when the host's table has function `field` (and it is set). */
#define ACCEL_HOST_API_HAS(api, field)                                                   \
  (offsetof(AccelHostApi, field) + sizeof((api)->field) <= ACCEL_HOST_API_SIZE(api) && \
   (api)->field != NULL)

/* One stage a plugin provides. */
typedef struct AccelStageDescriptor {
  const char* name;        /* used as `uses: native:<name>` */
  const char* description; /* one line, shown by `accelopt-host stages` */
  /* JSON object describing the `with:` parameters:
   *   {"param": {"type": "string|integer|number|boolean|array|object|any",
   *              "required": true|false, "default": <json>, "doc": "...",
   *              "enum": [<allowed values>], "minimum"/"maximum": <number>,
   *              "path": "dir"|"file", "keys_of": {"param": P, "file": F}}}
   * (docs/pipelines.md, "Parameter schemas"). */
  const char* params_json;

  /* Run the stage. `input_json` is an object:
   *   {"with": {...resolved parameters...}, "stage_id": "...",
   *    "stage_dir": "<absolute dir for this stage's files>",
   *    "run_dir": "<absolute run directory>", "vars": {...}}
   * On success return 0 and set *output_json to a JSON text (the stage's
   * outputs). On failure return non-zero and set *error_json to
   * {"kind": "...", "message": "...", "details": {...}}. Both strings are
   * allocated by the plugin and released through `free_string`. */
  int (*run)(const AccelHostApi* host, const char* input_json,
             char** output_json, char** error_json);
  void (*free_string)(char* text);

  /* Since version 2. JSON object describing the fields of the outputs
   * object: {"field": {"type": "...", "doc": "...", "enum"?: [...]}}, or
   * NULL (none declared). `validate` checks `stages.<id>.outputs.<field>`
   * references against it; `accelopt-host stages` lists it. */
  const char* outputs_json;

  /* New stage fields go here, at the end (see "Growing the ABI" above). */
} AccelStageDescriptor;

/* The smallest stage_size a version-3 plugin may declare (the version-2 descriptor). */
#define ACCEL_STAGE_DESCRIPTOR_V2_SIZE (offsetof(AccelStageDescriptor, outputs_json) + sizeof(const char*))

typedef struct AccelPluginInfo {
  uint32_t api_version; /* ACCELOPT_PLUGIN_API_MIN_VERSION..ACCELOPT_PLUGIN_API_VERSION */
  uint32_t stage_size;  /* since version 3: sizeof(AccelStageDescriptor) as the plugin was built (the stride of `stages`) */
  const char* plugin_name;
  const char* plugin_version;
  size_t num_stages;
  const AccelStageDescriptor* stages;
} AccelPluginInfo;

typedef const AccelPluginInfo* (*AccelPluginInfoFn)(void);

#ifdef __cplusplus
}
#endif

#endif /* ACCELOPT_PLUGIN_API_H */
