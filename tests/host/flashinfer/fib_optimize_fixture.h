// tests/host/flashinfer/fib_optimize_fixture.h - what the flashinfer-optimize end-to-end
// tests share: a slow and a fast python solution of the fixture's rmsnorm_h16, the
// role of a request to the scripted server, and whether Debian's torch is there.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "support/test_support.h"

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

/// A copy of the fixture trace set under `dir`/set with kSlow as the python solution
/// `slow_rmsnorm` of rmsnorm_h16 by author `tests`; returns the set's root.
inline std::filesystem::path TraceSetWithSlowSolution(const std::filesystem::path& dir) {
  namespace fs = std::filesystem;
  const fs::path root = dir / "set";
  fs::copy(SourcePath("tests/fixtures/flashinfer"), root, fs::copy_options::recursive);
  const nlohmann::json slow = {
      {"name", "slow_rmsnorm"}, {"definition", "rmsnorm_h16"}, {"author", "tests"},
      {"spec", {{"language", "python"}, {"target_hardware", {"cpu"}}, {"entry_point", "main.py::run"},
                {"destination_passing_style", false}}},
      {"sources", {{{"path", "main.py"}, {"content", kSlow}}}}};
  fs::create_directories(root / "solutions/tests/rmsnorm/rmsnorm_h16");
  std::ofstream(root / "solutions/tests/rmsnorm/rmsnorm_h16/slow_rmsnorm.json") << slow.dump(2);
  return root;
}

/// A scripted model with one idea: the planner proposes vectorizing the column loop, the
/// executor answers kFast, the summarizer names the rewrite.
inline std::string VectorizingModel(const nlohmann::json& body) {
  const std::string role = Role(body);
  if (role == "planner") return "Replace the Python loop over columns by one vectorized mean of squares.";
  if (role == "executor") return std::string("Here it is:\n```python\n") + kFast + "```\n";
  if (role == "summarizer") return "**Vectorize the column loop**\nOne square().mean() instead of a Python loop.";
  return "?";
}

}  // namespace accelopt::testing::fib_optimize
