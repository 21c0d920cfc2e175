// Test-only plugin laid out as plugin API version 1 (AccelStageDescriptor
// without outputs_json): the host must still load and run it.
#include <cstdlib>
#include <cstring>

#include "accelopt/plugin_api.h"

namespace {

// The version-1 stage descriptor, field for field.
struct StageDescriptorV1 {
  const char* name;
  const char* description;
  const char* params_json;
  int (*run)(const AccelHostApi* host, const char* input_json, char** output_json, char** error_json);
  void (*free_string)(char* text);
};

char* Copy(const char* text) {
  char* out = static_cast<char*>(std::malloc(std::strlen(text) + 1));
  std::strcpy(out, text);
  return out;
}

int RunOld(const AccelHostApi*, const char*, char** output_json, char**) {
  *output_json = Copy(R"({"old": true})");
  return 0;
}

void Free(char* text) { std::free(text); }

const StageDescriptorV1 kStages[] = {
    {"test_v1_first", "A version-1 stage.", R"({"x": {"type": "integer"}})", RunOld, Free},
    {"test_v1_second", "Another version-1 stage.", "{}", RunOld, Free},
};

}  // namespace

extern "C" __attribute__((visibility("default"))) const AccelPluginInfo* accelopt_plugin_info(void) {
  static const AccelPluginInfo info = {1u, 0u, "v1_plugin", "1.0.0", 2,
                                       reinterpret_cast<const AccelStageDescriptor*>(kStages)};
  return &info;
}
