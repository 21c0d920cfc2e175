#include "llm/client_registry.h"

#include "llm/curl_chat_client.h"

namespace accelopt::llm {

using nlohmann::json;

namespace {

constexpr const char* kReplayKey = "replay";
constexpr const char* kRepeatKey = "replay_repeat_last";
constexpr const char* kReplayPlaceholderUrl = "http://replay.invalid";

}  // namespace

std::filesystem::path TranscriptPathFor(const std::filesystem::path& run_dir) {
  return run_dir / "llm" / "transcript.jsonl";
}

ClientRegistry::ClientRegistry(const json& llm_block, RegistryOptions options)
    : ledger_(std::make_shared<UsageLedger>()) {
  if (!llm_block.is_null() && !llm_block.is_object()) {
    ThrowConfigError(std::string("llm: expected an object of named endpoints, got ") + llm_block.type_name());
  }
  const json block = llm_block.is_null() ? json::object() : llm_block;
  const EnvLookup env = options.env ? options.env : ProcessEnv();

  // Replay source.
  bool repeat_last = false;
  if (block.contains(kRepeatKey)) {
    if (!block.at(kRepeatKey).is_boolean()) ThrowConfigError("llm.replay_repeat_last: expected true or false");
    repeat_last = block.at(kRepeatKey).get<bool>();
  }
  if (options.replay_override) {
    replay_path_ = *options.replay_override;
  } else if (block.contains(kReplayKey) && !block.at(kReplayKey).is_null()) {
    if (!block.at(kReplayKey).is_string() || block.at(kReplayKey).get<std::string>().empty()) {
      ThrowConfigError("llm.replay: expected the path of a transcript file");
    }
    replay_path_ = block.at(kReplayKey).get<std::string>();
  }
  if (replay_path_ && replay_path_->is_relative() && !options.base_dir.empty()) {
    replay_path_ = options.base_dir / *replay_path_;
  }
  if (replay_path_) replay_store_ = ReplayStore::FromFile(*replay_path_, repeat_last);

  // Endpoint specs.
  std::map<std::string, json> specs;
  for (const auto& [name, spec] : block.items()) {
    if (name == kReplayKey || name == kRepeatKey) continue;
    specs[name] = spec;
  }
  // From the environment alone: a model and a server (ACCELOPT_LLM_BASE_URL, or the OpenAI
  // SDKs' OPENAI_BASE_URL). A model name alone does not make a rules run talk to api.openai.com.
  if (specs.empty() && env("ACCELOPT_LLM_MODEL") && (env("ACCELOPT_LLM_BASE_URL") || env("OPENAI_BASE_URL"))) {
    specs["default"] = json::object();
  }
  if (replay_store_) {
    for (const auto& name : replay_store_->RecordedEndpoints()) {
      if (!specs.count(name)) specs[name] = json::object();
    }
    for (auto& [name, spec] : specs) {
      if (!spec.is_object()) continue;  // ParseEndpoint reports it
      if (!spec.contains("base_url")) spec["base_url"] = kReplayPlaceholderUrl;
      if (!spec.contains("model")) {
        std::string recorded = replay_store_->RecordedModel(name);
        if (!recorded.empty()) spec["model"] = recorded;
      }
    }
  }

  // Transcript sink (not when replaying the very file we would append to).
  if (!options.run_dir.empty()) {
    const auto path = TranscriptPathFor(options.run_dir);
    std::error_code ec;
    const bool same_file = replay_path_ && std::filesystem::exists(path) &&
                           std::filesystem::equivalent(path, *replay_path_, ec);
    // Relative to the run directory: no symlink planted below it is followed (llm/, transcript.jsonl).
    // The run directory itself is trusted and made if missing.
    if (!same_file) std::filesystem::create_directories(options.run_dir, ec);
    if (!same_file) writer_ = std::make_shared<TranscriptWriter>(options.run_dir, std::filesystem::path("llm") / "transcript.jsonl");
  }

  std::shared_ptr<ReplayStore> resume_store;
  if (!replay_store_ && options.resume_transcript && std::filesystem::exists(*options.resume_transcript)) {
    resume_store = ReplayStore::FromFile(*options.resume_transcript);
  }
  for (const auto& [name, spec] : specs) {
    EndpointConfig config = ParseEndpoint(name, spec, env);
    std::unique_ptr<ChatClient> inner;
    if (replay_store_) {
      inner = std::make_unique<ReplayChatClient>(replay_store_, config);
    } else if (options.live_factory) {
      inner = options.live_factory(config);
    } else {
      inner = std::make_unique<CurlChatClient>(config);
    }
    std::unique_ptr<ChatClient> client =
        std::make_unique<RecordingChatClient>(std::move(inner), config, writer_, ledger_);
    // The spend caps are checked before a request is recorded or sent: a refused request is
    // neither in the transcript nor in the ledger.
    auto account = std::make_shared<SpendAccount>(name, config.caps);
    client = std::make_unique<SpendCapChatClient>(account, config, std::move(client));
    // On resume, replies already in the transcript are not requested (nor recorded) again;
    // they were counted into the account below.
    if (resume_store) client = std::make_unique<ResumeChatClient>(resume_store, config, std::move(client));
    clients_.emplace(name, Entry{std::move(config), std::move(client), std::move(account)});
  }
  // A resumed run's spend so far: every request of its transcript, at today's prices.
  if (resume_store) {
    for (const TranscriptEntry& entry : LoadTranscript(*options.resume_transcript)) {
      const json meta = entry.meta.is_object() ? entry.meta : json::object();
      std::string endpoint = meta.value("endpoint", std::string());
      if (endpoint.empty() && entry.request.is_object()) endpoint = entry.request.value("endpoint", std::string());
      auto it = clients_.find(endpoint);
      if (it == clients_.end()) continue;
      const int64_t prompt = entry.error.is_null() ? meta.value("prompt_tokens", int64_t{0}) : 0;
      const int64_t completion = entry.error.is_null() ? meta.value("completion_tokens", int64_t{0}) : 0;
      it->second.account->Seed(meta.value("problem", std::string()), prompt, completion,
                               EstimateCostUsd(prompt, completion, it->second.config.price_per_mtok_in,
                                               it->second.config.price_per_mtok_out));
    }
  }
}

SpendAccount* ClientRegistry::Account(const std::string& name) const {
  auto it = clients_.find(name);
  return it == clients_.end() ? nullptr : it->second.account.get();
}

json ClientRegistry::SpendSummary() const {
  json out = json::object();
  for (const auto& [name, entry] : clients_) out[name] = entry.account->Status();
  return out;
}

std::string ClientRegistry::SpendProgress() const {
  std::string text;
  for (const auto& [name, entry] : clients_) {
    const Spend spend = entry.account->RunSpend();
    if (spend.requests == 0 && spend.refused == 0) continue;
    text += (text.empty() ? "LLM " : "; ") + (clients_.size() > 1 ? name + " " : std::string()) + entry.account->ProgressText();
  }
  return text;
}

void ClientRegistry::ThrowUnknown(const std::string& name) const {
  std::string known;
  for (const auto& [key, entry] : clients_) known += (known.empty() ? "" : ", ") + key;
  ThrowConfigError("unknown LLM endpoint '" + name + "' (configured: " + (known.empty() ? "none" : known) + ")");
}

ChatClient& ClientRegistry::Get(const std::string& name) {
  auto it = clients_.find(name);
  if (it == clients_.end()) ThrowUnknown(name);
  return *it->second.client;
}

const EndpointConfig& ClientRegistry::Config(const std::string& name) const {
  auto it = clients_.find(name);
  if (it == clients_.end()) ThrowUnknown(name);
  return it->second.config;
}

std::vector<std::string> ClientRegistry::Names() const {
  std::vector<std::string> names;
  for (const auto& [name, entry] : clients_) names.push_back(name);
  return names;
}

std::optional<std::filesystem::path> ClientRegistry::TranscriptPath() const {
  if (!writer_) return std::nullopt;
  return writer_->path();
}

json ClientRegistry::Describe() const {
  json endpoints = json::object();
  for (const auto& [name, entry] : clients_) endpoints[name] = entry.config.ToRedactedJson();
  return {{"mode", Replaying() ? "replay" : "live"},
          {"replay", replay_path_ ? json(replay_path_->string()) : json(nullptr)},
          {"transcript", writer_ ? json(writer_->path().string()) : json(nullptr)},
          {"endpoints", endpoints}};
}

}  // namespace accelopt::llm
