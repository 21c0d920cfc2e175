#include "llm/transcript.h"

#include <openssl/evp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <ctime>
#include <sstream>
#include <limits>

#include <spdlog/spdlog.h>

#include "core/run_dir.h"
#include "core/unique_fd.h"

namespace accelopt::llm {

using nlohmann::json;

namespace {

const char* const kVolatileFields[] = {"user", "metadata", "store", "stream_options"};

std::string UtcNow() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t seconds = std::chrono::system_clock::to_time_t(now);
  const auto millis = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  char buffer[40];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%dT%H:%M:%S", &tm);
  char with_ms[48];
  std::snprintf(with_ms, sizeof with_ms, "%s.%03dZ", buffer, static_cast<int>(millis));
  return with_ms;
}

std::string JoinPath(const std::string& path, const std::string& key) { return path.empty() ? key : path + "." + key; }

std::string Short(const json& value) {
  std::string text = value.dump();
  return text.size() > 60 ? text.substr(0, 57) + "..." : text;
}

void Diff(const json& actual, const json& recorded, const std::string& path, std::vector<std::string>& out,
          size_t limit) {
  if (out.size() >= limit) return;
  const std::string where = path.empty() ? "request" : path;
  if (actual.is_object() && recorded.is_object()) {
    for (const auto& [key, value] : actual.items()) {
      if (!recorded.contains(key)) {
        if (out.size() < limit) out.push_back(JoinPath(path, key) + " is not in the recorded request");
      } else {
        Diff(value, recorded.at(key), JoinPath(path, key), out, limit);
      }
    }
    for (const auto& [key, value] : recorded.items()) {
      if (!actual.contains(key) && out.size() < limit) {
        out.push_back(JoinPath(path, key) + " is missing (recorded " + Short(value) + ")");
      }
    }
    return;
  }
  if (actual.is_array() && recorded.is_array()) {
    if (actual.size() != recorded.size()) {
      out.push_back(where + " has " + std::to_string(actual.size()) + " items, recorded " +
                    std::to_string(recorded.size()));
    }
    const size_t common = std::min(actual.size(), recorded.size());
    for (size_t i = 0; i < common && out.size() < limit; ++i) {
      Diff(actual[i], recorded[i], path + "[" + std::to_string(i) + "]", out, limit);
    }
    return;
  }
  if (actual == recorded) return;
  if (actual.is_string() && recorded.is_string()) {
    const auto& a = actual.get_ref<const std::string&>();
    const auto& b = recorded.get_ref<const std::string&>();
    size_t at = 0;
    while (at < a.size() && at < b.size() && a[at] == b[at]) ++at;
    out.push_back(where + " differs (at character " + std::to_string(at) + ")");
    return;
  }
  out.push_back(where + " differs (" + Short(actual) + " vs recorded " + Short(recorded) + ")");
}

std::string ErrorKindOr(const json& error, ErrorKind fallback, ErrorKind* kind) {
  std::string name = error.value("kind", "");
  try {
    *kind = ErrorKindFromName(name);
  } catch (const std::invalid_argument&) {
    *kind = fallback;
  }
  return name;
}

}  // namespace

std::string Sha256Hex(std::string_view data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (EVP_Digest(data.data(), data.size(), digest, &length, EVP_sha256(), nullptr) != 1) {
    throw std::runtime_error("EVP_Digest(sha256) failed");
  }
  static const char* const kHex = "0123456789abcdef";
  std::string hex;
  hex.reserve(length * 2);
  for (unsigned int i = 0; i < length; ++i) {
    hex += kHex[digest[i] >> 4];
    hex += kHex[digest[i] & 0xF];
  }
  return hex;
}

json TranscriptRequest(const ChatRequest& request, const EndpointConfig& endpoint) {
  json out = BuildRequestBody(request, endpoint);
  out["endpoint"] = endpoint.name;
  return out;
}

json KeyMaterial(const json& transcript_request) {
  json material = transcript_request;
  if (material.is_object()) {
    material.erase("endpoint");
    for (const char* field : kVolatileFields) material.erase(field);
  }
  return material;
}

std::string RequestKey(const json& transcript_request) { return Sha256Hex(KeyMaterial(transcript_request).dump()); }

std::vector<std::string> DescribeDifferences(const json& actual, const json& recorded, size_t limit) {
  std::vector<std::string> out;
  Diff(actual, recorded, "", out, limit);
  return out;
}

// ---------------------------------------------------------------------------------------------
// TranscriptWriter

TranscriptWriter::TranscriptWriter(std::filesystem::path path) {
  std::error_code ec;
  const std::filesystem::path folder = path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
  std::filesystem::create_directories(folder, ec);
  Open(folder, path.filename());
}

TranscriptWriter::TranscriptWriter(const std::filesystem::path& base, const std::filesystem::path& relative) {
  Open(base, relative);
}

TranscriptWriter::~TranscriptWriter() {
  if (fd_ >= 0) ::close(fd_);
}

void TranscriptWriter::Open(const std::filesystem::path& base, const std::filesystem::path& relative) {
  path_ = base / relative;
  try {
    // Resume: continue after the highest seq already present.
    UniqueFd in(OpenForReadNoFollow(base, relative));
    if (in.get() >= 0) {
      std::string text, line;
      char buffer[1 << 16];
      for (ssize_t n; (n = ::read(in.get(), buffer, sizeof buffer)) != 0;) {
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) throw std::runtime_error(path_.string() + ": cannot read: " + std::strerror(errno));
        text.append(buffer, static_cast<size_t>(n));
      }
      std::istringstream lines(text);
      while (std::getline(lines, line)) {
        json parsed = json::parse(line, nullptr, false);
        if (!parsed.is_discarded() && parsed.is_object() && parsed.contains("seq") && parsed.at("seq").is_number_integer()) {
          next_seq_ = std::max(next_seq_, parsed.at("seq").get<int64_t>() + 1);
        }
      }
    }
    fd_ = OpenForAppendNoFollow(base, relative);
  } catch (const std::runtime_error& error) {
    ThrowConfigError("cannot open LLM transcript " + path_.string() + " for appending: " + error.what());
  }
}

void TranscriptWriter::AddSecret(const std::string& secret) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (secret.size() >= 4 && std::find(secrets_.begin(), secrets_.end(), secret) == secrets_.end()) {
    secrets_.push_back(secret);
  }
}

int64_t TranscriptWriter::Append(json record) {
  std::lock_guard<std::mutex> lock(mutex_);
  const int64_t seq = next_seq_++;
  record["seq"] = seq;
  std::string line = record.dump(-1, ' ', false, json::error_handler_t::replace);
  for (const auto& secret : secrets_) line = RedactSecret(std::move(line), secret);
  line += '\n';
  const char* data = line.data();
  size_t left = line.size();
  while (left > 0) {
    ssize_t n = ::write(fd_, data, left);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      spdlog::warn("llm: cannot append to the transcript {}: {}", path_.string(), std::strerror(errno));
      break;
    }
    data += n;
    left -= static_cast<size_t>(n);
  }
  return seq;
}

// ---------------------------------------------------------------------------------------------
// RecordingChatClient

RecordingChatClient::RecordingChatClient(std::unique_ptr<ChatClient> inner, EndpointConfig endpoint,
                                         std::shared_ptr<TranscriptWriter> writer, std::shared_ptr<UsageLedger> ledger)
    : inner_(std::move(inner)), endpoint_(std::move(endpoint)), writer_(std::move(writer)), ledger_(std::move(ledger)) {
  if (writer_) writer_->AddSecret(endpoint_.api_key);
}

ChatResponse RecordingChatClient::Complete(const ChatRequest& request) {
  const json transcript_request = TranscriptRequest(request, endpoint_);  // throws llm_config first
  const auto started = std::chrono::steady_clock::now();
  json meta = {{"endpoint", endpoint_.name}, {"stage", request.stage}, {"model", endpoint_.model}};
  if (!request.problem.empty()) meta["problem"] = request.problem;  // the spend caps' account on resume
  auto write = [&](json response, json error) {
    if (!writer_) return;
    meta["recorded_at"] = UtcNow();
    writer_->Append({{"key", RequestKey(transcript_request)},
                     {"seq", nullptr},
                     {"request", transcript_request},
                     {"response", std::move(response)},
                     {"error", std::move(error)},
                     {"meta", meta}});
  };
  try {
    ChatResponse response = inner_->Complete(request);
    double cost = EstimateCostUsd(response.prompt_tokens, response.completion_tokens, endpoint_.price_per_mtok_in,
                                  endpoint_.price_per_mtok_out);
    if (ledger_) {
      ledger_->RecordSuccess(request.stage, endpoint_.model, endpoint_.name, response.prompt_tokens,
                             response.completion_tokens, endpoint_.price_per_mtok_in, endpoint_.price_per_mtok_out,
                             response.attempts, response.latency_ms, response.replayed);
    }
    meta.update({{"latency_ms", response.latency_ms},
                 {"attempts", response.attempts},
                 {"response_model", response.model},
                 {"request_id", response.request_id},
                 {"prompt_tokens", response.prompt_tokens},
                 {"completion_tokens", response.completion_tokens},
                 {"cost_usd", cost},
                 {"replayed", response.replayed}});
    write({{"status", 200}, {"body", response.raw}}, nullptr);
    return response;
  } catch (const LlmError& error) {
    if (error.kind == ErrorKind::kConfig || error.kind == ErrorKind::kReplayMiss) throw;
    if (ledger_) ledger_->RecordFailure(request.stage, endpoint_.model, endpoint_.name, error.attempts);
    const auto latency =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started).count();
    meta.update({{"latency_ms", latency}, {"attempts", error.attempts}, {"replayed", false}});
    write({{"status", error.status}},
          {{"kind", error.kind_name()}, {"status", error.status}, {"message", error.message}});
    throw;
  }
}

// ---------------------------------------------------------------------------------------------
// Loading and replay

std::vector<TranscriptEntry> LoadTranscript(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) ThrowConfigError("cannot read LLM transcript " + path.string());
  std::vector<TranscriptEntry> entries;
  std::string line;
  int line_number = 0;
  while (std::getline(in, line)) {
    ++line_number;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = path.string() + ":" + std::to_string(line_number);
    json parsed = json::parse(line, nullptr, false);
    if (parsed.is_discarded() || !parsed.is_object()) ThrowConfigError(where + ": not a JSON object");
    if (!parsed.contains("request") || !parsed.at("request").is_object()) {
      ThrowConfigError(where + ": transcript line has no \"request\" object");
    }
    TranscriptEntry entry;
    entry.request = parsed.at("request");
    entry.key = parsed.value("key", "");
    if (entry.key.empty()) entry.key = RequestKey(entry.request);
    entry.seq = parsed.contains("seq") && parsed.at("seq").is_number_integer() ? parsed.at("seq").get<int64_t>()
                                                                                : static_cast<int64_t>(entries.size());
    entry.response = parsed.value("response", json());
    entry.error = parsed.value("error", json());
    entry.meta = parsed.value("meta", json());
    if (entry.error.is_null() && !(entry.response.is_object() && entry.response.contains("body"))) {
      ThrowConfigError(where + ": transcript line has neither \"response.body\" nor \"error\"");
    }
    entries.push_back(std::move(entry));
  }
  return entries;
}

ReplayStore::ReplayStore(std::vector<TranscriptEntry> entries, std::string source, bool repeat_last)
    : entries_(std::move(entries)), source_(std::move(source)), repeat_last_(repeat_last) {
  std::stable_sort(entries_.begin(), entries_.end(),
                   [](const TranscriptEntry& a, const TranscriptEntry& b) { return a.seq < b.seq; });
  for (size_t i = 0; i < entries_.size(); ++i) by_key_[entries_[i].key].push_back(i);
}

std::shared_ptr<ReplayStore> ReplayStore::FromFile(const std::filesystem::path& path, bool repeat_last) {
  return std::make_shared<ReplayStore>(LoadTranscript(path), path.string(), repeat_last);
}

TranscriptEntry ReplayStore::Take(const json& transcript_request, const std::string& stage) {
  const std::string key = RequestKey(transcript_request);
  const std::string endpoint = transcript_request.value("endpoint", "");
  const std::string context = "endpoint '" + endpoint + "', stage '" + stage + "', key " + key.substr(0, 12);
  std::lock_guard<std::mutex> lock(mutex_);
  auto found = by_key_.find(key);
  if (found != by_key_.end()) {
    size_t& cursor = cursor_[key];
    const auto& indices = found->second;
    if (cursor < indices.size()) return entries_[indices[cursor++]];
    if (repeat_last_) return entries_[indices.back()];
    throw LlmError(ErrorKind::kReplayMiss, 0,
                   "all " + std::to_string(indices.size()) + " recorded response(s) for this request in " + source_ +
                       " were already used (" + context + "); set llm.replay_repeat_last: true to reuse the last one");
  }
  if (entries_.empty()) {
    throw LlmError(ErrorKind::kReplayMiss, 0, "no recorded response for this request (" + context + "): " + source_ +
                                                  " holds no recordings");
  }
  // Closest recording: fewest differences (identifying fields only), ties to the earliest.
  const json material = KeyMaterial(transcript_request);
  const TranscriptEntry* closest = nullptr;
  std::vector<std::string> closest_diff;
  size_t closest_score = std::numeric_limits<size_t>::max();
  for (const auto& entry : entries_) {
    auto diff = DescribeDifferences(material, KeyMaterial(entry.request), 64);
    // Prefer recordings made through the same endpoint when equally close.
    size_t score = diff.size() * 2 + (entry.request.value("endpoint", "") == endpoint ? 0 : 1);
    if (score < closest_score) {
      closest_score = score;
      closest = &entry;
      closest_diff = std::move(diff);
    }
  }
  if (closest_diff.size() > 5) {
    const size_t more = closest_diff.size() - 5;
    closest_diff.resize(5);
    closest_diff.push_back("... and " + std::to_string(more) + " more");
  }
  std::string detail;
  for (const auto& item : closest_diff) detail += (detail.empty() ? "" : "; ") + item;
  std::string closest_stage = closest->meta.is_object() ? closest->meta.value("stage", "") : "";
  throw LlmError(ErrorKind::kReplayMiss, 0,
                 "no recorded response for this request (" + context + ") in " + source_ +
                     "; closest recorded request (seq " + std::to_string(closest->seq) + ", stage '" + closest_stage +
                     "'): " + detail);
}

std::string ReplayStore::RecordedModel(const std::string& endpoint) const {
  for (auto it = entries_.rbegin(); it != entries_.rend(); ++it) {
    if (it->request.value("endpoint", "") == endpoint && it->request.contains("model") &&
        it->request.at("model").is_string()) {
      return it->request.at("model").get<std::string>();
    }
  }
  return "";
}

std::vector<std::string> ReplayStore::RecordedEndpoints() const {
  std::vector<std::string> names;
  for (const auto& entry : entries_) {
    std::string name = entry.request.value("endpoint", "");
    if (!name.empty() && std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  }
  return names;
}

ReplayChatClient::ReplayChatClient(std::shared_ptr<ReplayStore> store, EndpointConfig endpoint)
    : store_(std::move(store)), endpoint_(std::move(endpoint)) {}

ChatResponse ReplayChatClient::Complete(const ChatRequest& request) {
  const json transcript_request = TranscriptRequest(request, endpoint_);
  TranscriptEntry entry = store_->Take(transcript_request, request.stage);
  const json meta = entry.meta.is_object() ? entry.meta : json::object();
  const int attempts = meta.value("attempts", 1);
  if (!entry.error.is_null()) {
    ErrorKind kind = ErrorKind::kServer;
    ErrorKindOr(entry.error, ErrorKind::kServer, &kind);
    throw LlmError(kind, entry.error.value("status", 0), entry.error.value("message", std::string("(recorded error)")),
                   attempts);
  }
  ChatResponse response = ParseResponseJson(entry.response.at("body"));
  response.latency_ms = meta.value("latency_ms", int64_t{0});
  response.attempts = attempts;
  response.replayed = true;
  if (meta.contains("request_id") && meta.at("request_id").is_string() && !meta.at("request_id").get<std::string>().empty()) {
    response.request_id = meta.at("request_id").get<std::string>();
  }
  return response;
}

ResumeChatClient::ResumeChatClient(std::shared_ptr<ReplayStore> store, EndpointConfig endpoint,
                                   std::unique_ptr<ChatClient> live)
    : store_(std::move(store)), endpoint_(std::move(endpoint)), live_(std::move(live)) {}

ChatResponse ResumeChatClient::Complete(const ChatRequest& request) {
  try {
    TranscriptEntry entry = store_->Take(TranscriptRequest(request, endpoint_), request.stage);
    if (entry.error.is_null() && entry.response.is_object() && entry.response.contains("body")) {
      ChatResponse response = ParseResponseJson(entry.response.at("body"));
      const json meta = entry.meta.is_object() ? entry.meta : json::object();
      response.latency_ms = meta.value("latency_ms", int64_t{0});
      response.attempts = meta.value("attempts", 1);
      response.replayed = true;
      return response;
    }
  } catch (const LlmError& error) {
    if (error.kind != ErrorKind::kReplayMiss) throw;
  }
  return live_->Complete(request);
}

}  // namespace accelopt::llm
