#include "common.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

namespace fs = std::filesystem;

namespace accelopt_optimize {

// ---- misc -------------------------------------------------------------------

json ErrorJson(const std::exception& error, const std::string& default_kind) {
  if (const auto* failure = dynamic_cast<const StageFailure*>(&error)) {
    return {{"kind", failure->kind}, {"message", failure->what()}};
  }
  return {{"kind", default_kind}, {"message", error.what()}};
}

}  // namespace accelopt_optimize
