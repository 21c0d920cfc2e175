// tests/host/llm/llm_test_env.h - what the LLM configuration tests share: an
// environment to resolve endpoints against (EnvLookup, llm/endpoint_config.h)
// and the message of an expected llm_config error.
#pragma once

#include <catch2/catch.hpp>

#include <functional>
#include <map>
#include <optional>
#include <string>

#include "llm/endpoint_config.h"
#include "llm/llm_error.h"

namespace accelopt::llm::testing {

/// An environment holding exactly `values`.
inline EnvLookup MapEnv(std::map<std::string, std::string> values) {
  return [values = std::move(values)](const std::string& name) -> std::optional<std::string> {
    auto it = values.find(name);
    if (it == values.end()) return std::nullopt;
    return it->second;
  };
}

/// An empty environment.
inline EnvLookup NoEnv() { return MapEnv({}); }

/// The message of the LlmError{llm_config} `fn` throws; fails the test when it throws none.
inline std::string ConfigErrorOf(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const LlmError& error) {
    CHECK(error.kind == ErrorKind::kConfig);
    return error.message;
  }
  FAIL("expected an llm_config error");
  return "";
}

}  // namespace accelopt::llm::testing
