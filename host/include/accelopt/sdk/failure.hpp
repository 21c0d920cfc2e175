// accelopt/sdk/failure.hpp - the exception a plugin stage throws to fail.
#pragma once

#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

namespace accelopt::sdk {

/// A stage failure with a machine-readable kind (e.g. "config_error", "io_error");
/// the SDK turns it into the stage's error {kind, message, details}.
struct StageFailure : std::runtime_error {
  StageFailure(std::string kind_in, const std::string& message, nlohmann::json details_in = nullptr)
      : std::runtime_error(message), kind(std::move(kind_in)), details(std::move(details_in)) {}
  std::string kind;
  nlohmann::json details;
};

}  // namespace accelopt::sdk
