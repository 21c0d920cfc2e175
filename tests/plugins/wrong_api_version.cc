// Test-only plugin built for a future plugin API: the host must refuse it.
#include "accelopt/plugin_api.h"

extern "C" __attribute__((visibility("default"))) const AccelPluginInfo* accelopt_plugin_info(void) {
  static const AccelPluginInfo info = {42u, 0u, "from_the_future", "9.9.9", 0, nullptr};
  return &info;
}
