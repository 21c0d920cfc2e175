// llm/client_registry.h - the chat clients of one run, built from the pipeline's `llm:` block.
//
//   llm:
//     default: {base_url: ..., model: ..., api_key_env: ..., ...}   # any number of endpoints
//     fast:    {...}
//     replay: runs/<id>/llm/transcript.jsonl     # optional: answer from a transcript, no server
//     replay_repeat_last: false                  # optional: reuse the last recording when used up
//
// Every client is wrapped in a RecordingChatClient that appends to
// <run_dir>/llm/transcript.jsonl and feeds the run's UsageLedger, and that in a
// SpendCapChatClient that enforces the endpoint's spend caps (llm/spend_caps.h).
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "llm/chat_client.h"
#include "llm/endpoint_config.h"
#include "llm/spend_caps.h"
#include "llm/transcript.h"
#include "llm/usage_ledger.h"

namespace accelopt::llm {

/// How a ClientRegistry is built.
struct RegistryOptions {
  /// Run directory; the transcript goes to run_dir/llm/transcript.jsonl. Empty: no transcript.
  std::filesystem::path run_dir;
  /// Directory relative `replay:` paths are resolved against (normally the pipeline's). Empty: cwd.
  std::filesystem::path base_dir;
  /// Replay file that overrides the block's `replay:` (e.g. from --llm-replay).
  std::optional<std::filesystem::path> replay_override;
  /// `run --resume`: the interrupted run's transcript. Its successful replies
  /// answer identical requests again; other requests go live. New calls are
  /// appended to the same transcript. Every request in it counts toward the spend caps.
  std::optional<std::filesystem::path> resume_transcript;
  /// Environment lookup for overrides and API keys.
  EnvLookup env = ProcessEnv();
  /// Builds the live client of an endpoint; default: CurlChatClient. Tests inject fakes.
  std::function<std::unique_ptr<ChatClient>(const EndpointConfig&)> live_factory;
};

/// Owns one client per endpoint of an `llm:` block, plus the run's transcript writer and
/// usage ledger. Get() is thread-safe (the map is immutable after construction).
class ClientRegistry {
 public:
  /// Parses `llm_block` (an object; null means "no endpoints") and builds the clients.
  /// Without configured endpoints, a "default" endpoint is made when ACCELOPT_LLM_MODEL and a
  /// base URL (ACCELOPT_LLM_BASE_URL or OPENAI_BASE_URL) are set; in replay mode, endpoints
  /// that appear only in the transcript are served with their recorded model.
  /// Throws LlmError{llm_config} for invalid endpoints (message names the field), an
  /// unreadable replay file, or (live) an unset api_key_env.
  explicit ClientRegistry(const nlohmann::json& llm_block, RegistryOptions options = {});

  /// The client of endpoint `name`. Throws LlmError{llm_config} listing the known names.
  ChatClient& Get(const std::string& name);

  /// The resolved configuration of endpoint `name`. Throws LlmError{llm_config}.
  const EndpointConfig& Config(const std::string& name) const;

  /// Whether endpoint `name` exists.
  bool Has(const std::string& name) const { return clients_.count(name) != 0; }

  /// Endpoint names, sorted.
  std::vector<std::string> Names() const;

  /// True when answering from a transcript instead of servers.
  bool Replaying() const { return replay_store_ != nullptr; }

  /// The run's usage ledger (shared by all endpoints).
  UsageLedger& Ledger() { return *ledger_; }

  /// The spend account of endpoint `name` (its caps and what was spent), or nullptr.
  SpendAccount* Account(const std::string& name) const;

  /// {name: SpendAccount::Status()} of every endpoint - safe to log and store.
  nlohmann::json SpendSummary() const;

  /// The run's LLM spend for the progress line: "LLM 12/2000 req · 14.4k/40M tok · $0.01/$50"
  /// (each endpoint named when there are several); "" before the first request.
  std::string SpendProgress() const;

  /// The transcript being written, if any.
  std::optional<std::filesystem::path> TranscriptPath() const;

  /// {"mode": "live"|"replay", "replay": path|null, "transcript": path|null,
  ///  "endpoints": {name: EndpointConfig::ToRedactedJson()}} - safe to log and store.
  nlohmann::json Describe() const;

 private:
  struct Entry {
    EndpointConfig config;
    std::unique_ptr<ChatClient> client;
    std::shared_ptr<SpendAccount> account;
  };
  [[noreturn]] void ThrowUnknown(const std::string& name) const;

  std::map<std::string, Entry> clients_;
  std::shared_ptr<UsageLedger> ledger_;
  std::shared_ptr<TranscriptWriter> writer_;
  std::shared_ptr<ReplayStore> replay_store_;
  std::optional<std::filesystem::path> replay_path_;
};

/// The transcript location inside a run directory: run_dir/llm/transcript.jsonl.
std::filesystem::path TranscriptPathFor(const std::filesystem::path& run_dir);

}  // namespace accelopt::llm
