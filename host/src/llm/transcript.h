// llm/transcript.h - the LLM transcript (llm/transcript.jsonl) and replay from it.
//
// One JSON object per line, appended as interactions finish:
//   {"key": sha256 hex of the canonical request,
//    "seq": 0, 1, ... (order of writing),
//    "request": {"endpoint": name, <the POST body: model, messages, temperature, ...>},
//    "response": {"status": 200, "body": <server JSON>}      (or {"status": N} on failure),
//    "error": null | {"kind", "status", "message"},
//    "meta": {"latency_ms", "attempts", "endpoint", "stage", "problem"?, "model", "response_model",
//             "request_id", "prompt_tokens", "completion_tokens", "cost_usd",
//             "recorded_at", "replayed"}}
// No HTTP header is stored; the API key is scrubbed from every line.
//
// The key is sha256(dump of the request without "endpoint" and the volatile body
// fields user, metadata, store, stream_options); nlohmann::json objects dump with
// sorted keys, so the dump is canonical.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "llm/chat_client.h"
#include "llm/endpoint_config.h"
#include "llm/usage_ledger.h"

namespace accelopt::llm {

/// Lower-case hex SHA-256 of `data` (OpenSSL EVP).
std::string Sha256Hex(std::string_view data);

/// The "request" object of a transcript line: BuildRequestBody(...) plus "endpoint".
/// Throws LlmError{llm_config} like BuildRequestBody.
nlohmann::json TranscriptRequest(const ChatRequest& request, const EndpointConfig& endpoint);

/// The transcript request without the fields that do not identify it (endpoint and the
/// volatile body fields), i.e. what the key hashes.
nlohmann::json KeyMaterial(const nlohmann::json& transcript_request);

/// sha256 hex of KeyMaterial(transcript_request).dump().
std::string RequestKey(const nlohmann::json& transcript_request);

/// Human-readable differences between two JSON values, at most `limit` entries, each a
/// path plus what differs: "messages[2].content differs (at character 118)",
/// "messages has 3 items, recorded 4", "seed is missing (recorded 7)",
/// "top_p is not in the recorded request". `actual` is the new request.
std::vector<std::string> DescribeDifferences(const nlohmann::json& actual, const nlohmann::json& recorded,
                                             size_t limit = 5);

/// Appends transcript lines to a file; thread-safe. Creates parent directories.
/// When the file already exists (resume), seq numbers continue after its last line.
/// The file is opened without following a symlink (core/run_dir.h), so a link
/// planted in a run directory cannot redirect the appends.
class TranscriptWriter {
 public:
  /// Opens `path` for appending; its folder is trusted (created if missing),
  /// the file itself must not be a symlink. Throws LlmError{llm_config} when it
  /// cannot be opened.
  explicit TranscriptWriter(std::filesystem::path path);
  /// Opens `base`/`relative` for appending, following no symlink below `base`
  /// (the run directory): `run_dir`, "llm/transcript.jsonl". Throws LlmError{llm_config}.
  TranscriptWriter(const std::filesystem::path& base, const std::filesystem::path& relative);
  ~TranscriptWriter();
  TranscriptWriter(const TranscriptWriter&) = delete;
  TranscriptWriter& operator=(const TranscriptWriter&) = delete;

  /// Assigns the next seq to `record["seq"]`, serialises it on one line with every
  /// occurrence of each registered secret replaced by "[REDACTED]", appends and flushes.
  /// Returns the seq used.
  int64_t Append(nlohmann::json record);

  /// Registers a secret (API key) that must never appear in the file.
  void AddSecret(const std::string& secret);

  /// The file written.
  const std::filesystem::path& path() const { return path_; }

 private:
  void Open(const std::filesystem::path& base, const std::filesystem::path& relative);

  std::filesystem::path path_;
  std::mutex mutex_;
  int fd_ = -1;
  int64_t next_seq_ = 0;
  std::vector<std::string> secrets_;
};

/// Decorator that forwards to an inner client and records every interaction in a
/// transcript (when given) and in a usage ledger (when given). Failed interactions are
/// recorded with their error and rethrown; llm_config and llm_replay_miss errors are not
/// recorded (no request was answered).
class RecordingChatClient : public ChatClient {
 public:
  /// @param inner    the client doing the work (owned).
  /// @param endpoint the endpoint `inner` talks to (model and prices for the records).
  /// @param writer   transcript sink, may be null.
  /// @param ledger   usage sink, may be null.
  RecordingChatClient(std::unique_ptr<ChatClient> inner, EndpointConfig endpoint,
                      std::shared_ptr<TranscriptWriter> writer, std::shared_ptr<UsageLedger> ledger);

  /// Forwards to the inner client, then records. Throws what the inner client throws.
  ChatResponse Complete(const ChatRequest& request) override;
  /// The inner client's concurrency.
  int MaxConcurrency() const override { return inner_->MaxConcurrency(); }
  /// The endpoint given at construction.
  const EndpointConfig* Endpoint() const override { return &endpoint_; }
  /// The wrapped client.
  ChatClient& inner() { return *inner_; }

 private:
  std::unique_ptr<ChatClient> inner_;
  EndpointConfig endpoint_;
  std::shared_ptr<TranscriptWriter> writer_;
  std::shared_ptr<UsageLedger> ledger_;
};

/// One parsed transcript line.
struct TranscriptEntry {
  std::string key;           ///< The line's "key" (recomputed from "request" when absent).
  int64_t seq = 0;           ///< The line's "seq".
  nlohmann::json request;    ///< The "request" object.
  nlohmann::json response;   ///< The "response" object (may be null).
  nlohmann::json error;      ///< The "error" object, null on success.
  nlohmann::json meta;       ///< The "meta" object (may be null).
};

/// Reads a transcript file. Blank lines are skipped. Throws LlmError{llm_config} naming
/// "FILE:LINE" when the file cannot be read or a line is not a transcript object.
std::vector<TranscriptEntry> LoadTranscript(const std::filesystem::path& path);

/// Recorded interactions shared by the replay clients of all endpoints; thread-safe.
class ReplayStore {
 public:
  /// @param entries     recorded interactions (any order; replayed in seq order per key).
  /// @param source      where they came from (for messages), e.g. the file path.
  /// @param repeat_last when the recordings of a key are used up, answer with the last
  ///                    one again instead of failing.
  ReplayStore(std::vector<TranscriptEntry> entries, std::string source, bool repeat_last = false);

  /// Loads `path` with LoadTranscript. Throws LlmError{llm_config}.
  static std::shared_ptr<ReplayStore> FromFile(const std::filesystem::path& path, bool repeat_last = false);

  /// Returns the next unused recording for `transcript_request` (a TranscriptRequest).
  /// Throws LlmError{llm_replay_miss} naming the closest recorded request and what differs,
  /// or saying that all recordings of the request were used.
  TranscriptEntry Take(const nlohmann::json& transcript_request, const std::string& stage);

  /// The model of the most recent recording made through endpoint `name` ("" when none);
  /// lets replay work for endpoints the pipeline no longer configures.
  std::string RecordedModel(const std::string& endpoint) const;

  /// Names of the endpoints that appear in the recordings.
  std::vector<std::string> RecordedEndpoints() const;

  /// Number of recordings.
  size_t size() const { return entries_.size(); }

 private:
  std::vector<TranscriptEntry> entries_;       // sorted by seq
  std::map<std::string, std::vector<size_t>> by_key_;
  std::map<std::string, size_t> cursor_;
  std::string source_;
  bool repeat_last_;
  mutable std::mutex mutex_;
};

/// For `run --resume`: answers a request from the interrupted run's
/// transcript when it holds an unused successful recording of it, and asks
/// the live client otherwise, so replies already paid for are not requested
/// again. Recorded errors are not replayed (they are retried live).
class ResumeChatClient : public ChatClient {
 public:
  /// @param store    the interrupted run's recordings.
  /// @param endpoint the endpoint (shapes the transcript request, as live).
  /// @param live     the client for requests without a recording (owned).
  ResumeChatClient(std::shared_ptr<ReplayStore> store, EndpointConfig endpoint, std::unique_ptr<ChatClient> live);

  /// A recorded response (marked `replayed`), else the live client's answer.
  /// Throws what the live client throws.
  ChatResponse Complete(const ChatRequest& request) override;
  int MaxConcurrency() const override { return live_->MaxConcurrency(); }
  const EndpointConfig* Endpoint() const override { return &endpoint_; }

 private:
  std::shared_ptr<ReplayStore> store_;
  EndpointConfig endpoint_;
  std::unique_ptr<ChatClient> live_;
};

/// A ChatClient answering from a ReplayStore without any network access.
class ReplayChatClient : public ChatClient {
 public:
  /// @param store    the recordings.
  /// @param endpoint the endpoint whose requests are replayed (its model, defaults and
  ///                 extra fields shape the request, exactly as live).
  ReplayChatClient(std::shared_ptr<ReplayStore> store, EndpointConfig endpoint);

  /// Returns the recorded response (replayed = true, latency_ms and attempts as recorded),
  /// or rethrows the recorded LlmError. Throws LlmError{llm_replay_miss} when nothing matches,
  /// LlmError{llm_bad_output} when the recorded body has no usable choice.
  ChatResponse Complete(const ChatRequest& request) override;
  /// The endpoint's max_concurrency.
  int MaxConcurrency() const override { return endpoint_.max_concurrency; }
  /// The endpoint given at construction.
  const EndpointConfig* Endpoint() const override { return &endpoint_; }

 private:
  std::shared_ptr<ReplayStore> store_;
  EndpointConfig endpoint_;
};

}  // namespace accelopt::llm
