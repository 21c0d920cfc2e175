// Test-only plugin that declares a stage_size smaller than any stage
// descriptor: the host must refuse it instead of reading past its entries.
#include "accelopt/plugin_api.h"

namespace {
const AccelStageDescriptor kStages[1] = {};
}

extern "C" __attribute__((visibility("default"))) const AccelPluginInfo* accelopt_plugin_info(void) {
  static const AccelPluginInfo info = {ACCELOPT_PLUGIN_API_VERSION, 8u, "short_stage_size", "1.0.0", 1, kStages};
  return &info;
}
