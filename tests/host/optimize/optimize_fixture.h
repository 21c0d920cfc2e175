// tests/host/optimize/optimize_fixture.h - helpers for the optimization-loop
// tests: in-process stage calls through the plugin ABI, a scripted
// OpenAI-compatible server on 127.0.0.1:0, and NKI kernels for silu.
#pragma once

#include <httplib.h>

#include <catch2/catch.hpp>

#include <atomic>
#include <fstream>
#include <sstream>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "plugin/host_services.h"
#include "plugin/registry.h"
#include "support/test_support.h"

namespace accelopt::testing::optimize {

using nlohmann::json;

/// Runs native:<name> of the built plugins in-process with `with`, in `dir`.
inline json RunStage(const std::string& name, const json& with, const std::filesystem::path& dir) {
  static StageRegistry* registry = [] {
    auto* r = new StageRegistry;
    r->LoadPlugins(nullptr);
    return r;
  }();
  auto stage = registry->FindNative(name);
  REQUIRE(stage != nullptr);
  StageInvocation invocation;
  invocation.stage_id = name;
  invocation.with = with;
  invocation.vars = json::object();
  invocation.stage_dir = dir / name;
  invocation.run_dir = dir;
  std::filesystem::create_directories(invocation.stage_dir);
  invocation.log = [](int, const std::string&) {};
  invocation.progress = [](int64_t, int64_t, const std::string&) {};
  return stage->Run(invocation);
}

/// Installs GlobalHostServices().llm_chat for the scope of the object.
class ScopedLlm {
 public:
  using Fn = std::function<json(const json& request)>;
  explicit ScopedLlm(Fn fn) {
    GlobalHostServices().llm_chat = [this, fn](const json& request, const std::string&) {
      if (request.value("describe", false)) return json{{"available", true}, {"endpoint", "default"}, {"model", "scripted"}};
      if (request.value("spend", false)) return json{{"available", false}};  // no spend caps here (docs/llm.md)
      {
        std::lock_guard<std::mutex> lock(mutex_);
        requests_.push_back(request);
      }
      return fn(request);
    };
  }
  ~ScopedLlm() { GlobalHostServices().llm_chat = nullptr; }
  std::vector<json> Requests() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return requests_;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<json> requests_;
};

/// A chat reply in the host's llm_chat response shape.
inline json Reply(const std::string& content) {
  return {{"content", content}, {"finish_reason", "stop"}, {"prompt_tokens", 100}, {"completion_tokens", 50},
          {"cost_usd", 0.001}, {"model", "scripted"}};
}

/// An OpenAI-compatible chat server whose replies come from a function of the
/// request body; records every request.
class ScriptedLlmServer {
 public:
  /// A responder that returns this answers the request with HTTP 503 instead of a reply.
  static constexpr const char* kHttp503 = "\x01http 503";
  using Responder = std::function<std::string(const json& body)>;  // returns the reply content
  explicit ScriptedLlmServer(Responder responder) : responder_(std::move(responder)) {
    server_.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
      json body = json::parse(req.body, nullptr, false);
      {
        std::lock_guard<std::mutex> lock(mutex_);
        requests_.push_back(body);
      }
      std::string content = responder_(body);
      if (content == kHttp503) {  // an overloaded server: the client retries (docs/llm.md)
        res.status = 503;
        res.set_content(R"({"error": {"message": "overloaded", "type": "server_error"}})", "application/json");
        return;
      }
      json reply = {{"id", "chatcmpl-" + std::to_string(++counter_)},
                    {"object", "chat.completion"},
                    {"model", "fake-model"},
                    {"choices", {{{"index", 0}, {"message", {{"role", "assistant"}, {"content", content}}}, {"finish_reason", "stop"}}}},
                    {"usage", {{"prompt_tokens", 1000}, {"completion_tokens", 200}, {"total_tokens", 1200}}}};
      res.status = 200;
      res.set_content(reply.dump(), "application/json");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    for (int i = 0; i < 500 && !server_.is_running(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ~ScriptedLlmServer() {
    server_.stop();
    if (thread_.joinable()) thread_.join();
  }
  std::string BaseUrl() const { return "http://127.0.0.1:" + std::to_string(port_) + "/v1"; }
  std::vector<json> Requests() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return requests_;
  }

 private:
  Responder responder_;
  httplib::Server server_;
  std::thread thread_;
  int port_ = -1;
  std::atomic<int> counter_{0};
  mutable std::mutex mutex_;
  std::vector<json> requests_;
};

/// A silu kernel that does the whole activation in one Scalar Engine
/// instruction per tile: measurably faster than nkibench/kernels/silu_0.py.
inline const char* kFusedSilu = R"PY(import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl

P = 128
TILE_N = 512


@nki.jit
def kernel(x):
    M, N = x.shape
    out = nl.ndarray((M, N), dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(M // P):
        for j in nl.affine_range(N // TILE_N):
            x_tile = nl.load(x[i * P:(i + 1) * P, j * TILE_N:(j + 1) * TILE_N])
            y_tile = nisa.activation(op=nl.silu, data=x_tile)
            nl.store(out[i * P:(i + 1) * P, j * TILE_N:(j + 1) * TILE_N], value=y_tile)
    return out
)PY";

/// A silu kernel that mixes basic and advanced indexing: a compile error.
inline const char* kBrokenSilu = R"PY(import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl

P = 128


@nki.jit
def kernel(x):
    M, N = x.shape
    out = nl.ndarray((M, N), dtype=x.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(P)[:, None]
    for i in nl.affine_range(M // P):
        x_tile = nl.load(x[i * P + i_p, 0:N])
        y_tile = nisa.activation(op=nl.silu, data=x_tile)
        nl.store(out[i * P:(i + 1) * P, 0:N], value=y_tile)
    return out
)PY";

/// kFusedSilu that also reaches the harness through an emulator function's globals (a star
/// import and a class pattern reading __globals__, the static scan's old blind spots) and
/// replaces the emulator backend's timing with 1e-6 ms (issue 34: it won an optimize run at
/// 46,918x when the candidate's process computed its own latency).
inline const char* kFlatteringSilu = R"PY(from operator import *

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl

P = 128
TILE_N = 512


def _flatter():
    function = attrgetter("load")(nl)
    function = getattr(function, "_obj", function)
    function = getattr(function, "__wrapped__", function)
    match function:
        case object(__globals__=namespace):
            modules = namespace["sys"].modules
            backend = modules.get("accelopt.backends.emulator")
            if backend is not None:
                backend.EmulatorBackend.timing_of = lambda self, profile: (1e-6, {"flattered": True})


@nki.jit
def kernel(x):
    _flatter()
    M, N = x.shape
    out = nl.ndarray((M, N), dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(M // P):
        for j in nl.affine_range(N // TILE_N):
            x_tile = nl.load(x[i * P:(i + 1) * P, j * TILE_N:(j + 1) * TILE_N])
            y_tile = nisa.activation(op=nl.silu, data=x_tile)
            nl.store(out[i * P:(i + 1) * P, j * TILE_N:(j + 1) * TILE_N], value=y_tile)
    return out
)PY";

/// A silu that computes its output in NumPy through the emulator's tensor internals and
/// marks it written, issuing no instruction for it (issue 34).
inline const char* kNumpySilu = R"PY(import neuronxcc.nki as nki
import neuronxcc.nki.language as nl


def _tensors():
    function = getattr(nl.load, "_obj", nl.load)
    function = getattr(function, "__wrapped__", function)
    match function:
        case object(__globals__=namespace):
            return namespace["sys"].modules["nki_emu.tensor"]


@nki.jit
def kernel(x):
    M, N = x.shape
    out = nl.ndarray((M, N), dtype=x.dtype, buffer=nl.shared_hbm)
    tensors = _tensors()
    values = tensors.values(getattr(x, "_obj", x))
    tensors.write(getattr(out, "_obj", out), values / (1 + 2.718281828459045 ** -values))
    return out
)PY";

inline std::vector<std::string> TextLines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

/// The kernel a diff-format executor prompt shows (its "Current kernel (kernel.py):" block).
inline std::string ParentKernel(const std::string& user) {
  const std::string open = "Current kernel (kernel.py):\n```python\n";
  const size_t begin = user.find(open);
  if (begin == std::string::npos) return "";
  const size_t start = begin + open.size();
  return user.substr(start, user.find("\n```", start) - start);
}

/// A unified diff that rewrites every line of `parent` into `target` (one hunk: its removed lines
/// must match the parent exactly, which is what a strict applier checks).
inline std::string WholeFileDiff(const std::string& parent, const std::string& target) {
  const auto old_lines = TextLines(parent), new_lines = TextLines(target);
  std::string diff = "--- a/kernel.py\n+++ b/kernel.py\n@@ -1," + std::to_string(old_lines.size()) + " +1," +
                     std::to_string(new_lines.size()) + " @@\n";
  for (const auto& line : old_lines) diff += "-" + line + "\n";
  for (const auto& line : new_lines) diff += "+" + line + "\n";
  return diff;
}

inline std::string Fenced(const std::string& code) { return "Here is the kernel.\n\n```python\n" + code + "```\n"; }

/// The messages' text of a chat request body (system + user).
inline std::string PromptText(const json& body) {
  std::string text;
  for (const auto& m : body.value("messages", json::array())) text += m.value("content", "") + "\n";
  return text;
}

/// The `baselines` parameter of native:optimize_results: one correct silu case at 1 ms.
inline json SiluBaselines(const std::filesystem::path& kernel) {
  return {{"silu_M256_N1024", {{"ok", true}, {"latency_ms", 1.0}, {"problem", "silu"}, {"kernel", kernel.string()},
                               {"values", {{"M", 256}, {"N", 1024}}}}}};
}

inline std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace accelopt::testing::optimize
