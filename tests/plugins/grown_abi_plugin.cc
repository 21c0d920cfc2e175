// Test-only plugin built against a FUTURE header in which AccelStageDescriptor
// has grown a field (appended, as plugin_api.h's "Growing the ABI" asks): the
// host must load it by its stage_size and read the fields it knows.
#include <cstdlib>
#include <cstring>
#include <string>

#include "accelopt/plugin_api.h"

namespace {

// Today's descriptor plus one appended field the host does not know.
struct FutureStageDescriptor {
  AccelStageDescriptor known;
  const char* future_field;
};

char* Copy(const std::string& text) {
  char* out = static_cast<char*>(std::malloc(text.size() + 1));
  std::memcpy(out, text.c_str(), text.size() + 1);
  return out;
}

// Reports what the host lent: its table size and whether python_call_args is there.
int Report(const AccelHostApi* host, const char*, char** output_json, char**) {
  *output_json = Copy("{\"struct_size\": " + std::to_string(host->struct_size) +
                      ", \"has_python_call_args\": " + (ACCEL_HOST_API_HAS(host, python_call_args) ? "true" : "false") +
                      "}");
  return 0;
}

void Free(char* text) { std::free(text); }

const FutureStageDescriptor kStages[] = {
    {{"test_grown_first", "A stage of a grown descriptor.", "{}", Report, Free,
      R"({"struct_size": {"type": "integer"}, "has_python_call_args": {"type": "boolean"}})"},
     "something only a future host reads"},
    {{"test_grown_second", "Another one.", R"({"x": {"type": "integer"}})", Report, Free, nullptr}, nullptr},
};

}  // namespace

extern "C" __attribute__((visibility("default"))) const AccelPluginInfo* accelopt_plugin_info(void) {
  static const AccelPluginInfo info = {ACCELOPT_PLUGIN_API_VERSION, sizeof(FutureStageDescriptor), "grown_abi",
                                       "1.0.0", 2, reinterpret_cast<const AccelStageDescriptor*>(kStages)};
  return &info;
}
