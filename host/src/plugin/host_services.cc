#include "plugin/host_services.h"

namespace accelopt {

HostServices& GlobalHostServices() {
  static HostServices services;
  return services;
}

}  // namespace accelopt
