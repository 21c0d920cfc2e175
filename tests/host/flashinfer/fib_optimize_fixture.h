// tests/host/flashinfer/fib_optimize_fixture.h - what the flashinfer-optimize end-to-end
// tests share: a slow and a fast python solution of the fixture's rmsnorm_h16, the
// role of a request to the scripted server, and whether Debian's torch is there.
#pragma once

#include <cstdlib>
#include <string>

#include <nlohmann/json.hpp>

namespace accelopt::testing::fib_optimize {

// rmsnorm_h16 with the sum of squares accumulated column by column in Python.
inline const char* kSlow = R"PY(import torch

def run(hidden_states, weight):
    x = hidden_states.float()
    acc = torch.zeros(x.shape[0], 1)
    for j in range(x.shape[1]):
        col = x[:, j:j + 1]
        acc = acc + col * col
    inv = torch.rsqrt(acc / x.shape[1] + 1e-6)
    return (x * inv * weight.float()).to(hidden_states.dtype)
)PY";

// The same in one vectorised expression.
inline const char* kFast = R"PY(import torch

def run(hidden_states, weight):
    x = hidden_states.float()
    inv = torch.rsqrt(x.square().mean(dim=-1, keepdim=True) + 1e-6)
    return (x * inv * weight.float()).to(hidden_states.dtype)
)PY";

/// "planner", "executor", "summarizer" or "other", from the request's system prompt
/// (prompts/flashinfer/*).
inline std::string Role(const nlohmann::json& body) {
  const std::string system = body["messages"][0]["content"];
  if (system.rfind("You are a performance-optimization expert", 0) == 0) return "planner";
  if (system.rfind("You are an expert", 0) == 0) return "executor";
  if (system.rfind("You are an assistant", 0) == 0) return "summarizer";
  return "other";
}

/// Whether /usr/bin/python3.11 imports torch (Debian's python3-torch).
inline bool HaveTorch() { return std::system("/usr/bin/python3.11 -c 'import torch' >/dev/null 2>&1") == 0; }

}  // namespace accelopt::testing::fib_optimize
