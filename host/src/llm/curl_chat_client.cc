#include "llm/curl_chat_client.h"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <csignal>
#include <random>

#include <spdlog/spdlog.h>

namespace accelopt::llm {

namespace {

#ifdef ACCELOPT_VERSION
constexpr const char* kUserAgent = "accelopt-host/" ACCELOPT_VERSION;
#else
constexpr const char* kUserAgent = "accelopt-host";
#endif

/// Most response header bytes kept per attempt (names and values together).
constexpr size_t kMaxHeaderBytes = 1u << 20;

struct Transfer {
  std::string body;
  HeaderMap headers;
  size_t max_body = 0;       ///< the endpoint's max_response_bytes
  bool body_too_large = false;
  size_t header_bytes = 0;
};

// A reply over the cap ends the transfer (returning less than given makes
// curl stop with CURLE_WRITE_ERROR) before the host holds it: a server,
// or a gzip bomb (bodies are counted decoded), cannot grow the host's memory.
size_t OnBody(char* data, size_t size, size_t count, void* user) {
  auto* transfer = static_cast<Transfer*>(user);
  const size_t n = size * count;
  if (n > transfer->max_body - std::min(transfer->max_body, transfer->body.size())) {
    transfer->body_too_large = true;
    return 0;
  }
  transfer->body.append(data, n);
  return n;
}

size_t OnHeader(char* data, size_t size, size_t count, void* user) {
  auto* transfer = static_cast<Transfer*>(user);
  transfer->header_bytes += size * count;
  if (transfer->header_bytes > kMaxHeaderBytes) return 0;  // ends the transfer like an oversized body
  std::string line(data, size * count);
  while (!line.empty() && (line.back() == '\r' || line.back() == '\n')) line.pop_back();
  if (line.rfind("HTTP/", 0) == 0) {
    transfer->headers.clear();  // a new response (after 100-continue or a redirect)
    return size * count;
  }
  size_t colon = line.find(':');
  if (colon == std::string::npos) return size * count;
  std::string name = line.substr(0, colon);
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
  size_t value_start = colon + 1;
  while (value_start < line.size() && (line[value_start] == ' ' || line[value_start] == '\t')) ++value_start;
  transfer->headers[name] = line.substr(value_start);
  return size * count;
}

int OnProgress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  return static_cast<const std::atomic<bool>*>(user)->load() ? 1 : 0;
}

ErrorKind ClassifyCurlCode(CURLcode code) {
  switch (code) {
    case CURLE_OPERATION_TIMEDOUT:
      return ErrorKind::kTimeout;
    case CURLE_URL_MALFORMAT:
    case CURLE_UNSUPPORTED_PROTOCOL:
    case CURLE_NOT_BUILT_IN:
      return ErrorKind::kConfig;
    default:
      return ErrorKind::kConnection;
  }
}

double Jitter() {
  thread_local std::mt19937_64 engine{std::random_device{}()};
  return std::uniform_real_distribution<double>(0.0, 1.0)(engine);
}

struct CurlHandleDeleter {
  void operator()(CURL* handle) const { curl_easy_cleanup(handle); }
};

struct HeaderListDeleter {
  void operator()(curl_slist* list) const { curl_slist_free_all(list); }
};

}  // namespace

void GlobalInit() {
  static std::once_flag once;
  std::call_once(once, [] {
    // A multi-threaded program using libcurl/OpenSSL must ignore SIGPIPE itself (curl PR #2904).
    std::signal(SIGPIPE, SIG_IGN);
    curl_global_init(CURL_GLOBAL_DEFAULT);
  });
}

CurlChatClient::CurlChatClient(EndpointConfig config) : config_(std::move(config)) {
  RequireApiKey(config_);
  GlobalInit();
  policy_.max_retries = config_.max_retries;
  policy_.initial_delay_ms = config_.initial_retry_delay_ms;
  policy_.max_delay_ms = config_.max_retry_delay_ms;
}

CurlChatClient::~CurlChatClient() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  stop_wake_.notify_all();
  for (auto& worker : workers_) worker.join();
  // Workers are gone; fail whatever is still queued.
  for (Job* job : queue_) {
    Outcome shut_down;
    shut_down.error = LlmError(ErrorKind::kConnection, 0, "client shut down");
    job->promise.set_value(std::move(shut_down));
  }
  queue_.clear();
}

void CurlChatClient::StartWorkers() {
  for (int i = 0; i < config_.max_concurrency; ++i) workers_.emplace_back([this] { WorkerLoop(); });
}

ChatResponse CurlChatClient::Complete(const ChatRequest& request) {
  std::call_once(started_, [this] { StartWorkers(); });
  Job job{&request, {}};
  std::future<Outcome> result = job.promise.get_future();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) throw LlmError(ErrorKind::kConnection, 0, "client shut down");
    queue_.push_back(&job);
  }
  wake_.notify_one();
  Outcome outcome = result.get();
  if (outcome.error) throw *outcome.error;
  return std::move(*outcome.response);
}

void CurlChatClient::WorkerLoop() {
  std::unique_ptr<CURL, CurlHandleDeleter> handle(curl_easy_init());
  for (;;) {
    Job* job = nullptr;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      job = queue_.front();
      queue_.pop_front();
    }
    Outcome outcome;
    try {
      if (!handle) throw LlmError(ErrorKind::kConnection, 0, "curl_easy_init failed");
      outcome.response = Execute(handle.get(), *job->request);
    } catch (const LlmError& error) {
      outcome.error = error;
    } catch (const std::exception& error) {
      outcome.error = LlmError(ErrorKind::kConnection, 0, std::string("unexpected client failure: ") + error.what());
    }
    job->promise.set_value(std::move(outcome));
  }
}

bool CurlChatClient::SleepUnlessStopping(int64_t delay_ms) {
  std::unique_lock<std::mutex> lock(mutex_);
  return !stop_wake_.wait_for(lock, std::chrono::milliseconds(delay_ms), [this] { return stopping_.load(); });
}

ChatResponse CurlChatClient::Execute(void* curl_handle, const ChatRequest& request) {
  CURL* curl = static_cast<CURL*>(curl_handle);
  const std::string payload = BuildRequestBody(request, config_).dump();
  const std::string url = config_.ChatCompletionsUrl();

  std::unique_ptr<curl_slist, HeaderListDeleter> header_list;
  auto append_header = [&](const std::string& header) {
    curl_slist* extended = curl_slist_append(header_list.get(), header.c_str());
    if (extended == nullptr) throw LlmError(ErrorKind::kConnection, 0, "curl_slist_append failed");
    header_list.release();
    header_list.reset(extended);
  };
  append_header("Content-Type: application/json");
  append_header("Accept: application/json");
  append_header("Expect:");  // no 100-continue round trip for large prompts
  if (!config_.api_key.empty()) append_header("Authorization: Bearer " + config_.api_key);

  const auto started = std::chrono::steady_clock::now();
  auto elapsed_ms = [&] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started).count();
  };

  // deadline_ms bounds the whole request: each attempt gets at most what is left of it,
  // and a retry whose backoff would end past it is not made.
  const int64_t deadline_ms = config_.deadline_ms;
  auto attempt_timeout_ms = [&] {
    return deadline_ms > 0 ? std::min(config_.timeout_ms, deadline_ms - elapsed_ms()) : config_.timeout_ms;
  };

  for (int attempt = 1;; ++attempt) {
    const int64_t timeout_ms = attempt_timeout_ms();
    if (timeout_ms <= 0) {
      throw LlmError(ErrorKind::kTimeout, 0,
                     "deadline of " + std::to_string(deadline_ms) + " ms reached before attempt " + std::to_string(attempt),
                     attempt - 1);
    }
    Transfer transfer;
    transfer.max_body = static_cast<size_t>(config_.max_response_bytes);
    char error_buffer[CURL_ERROR_SIZE] = {0};
    curl_easy_reset(curl);  // keeps the connection cache of the handle
    curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
    curl_easy_setopt(curl, CURLOPT_POST, 1L);
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, payload.data());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(payload.size()));
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, header_list.get());
    curl_easy_setopt(curl, CURLOPT_USERAGENT, kUserAgent);
    curl_easy_setopt(curl, CURLOPT_ACCEPT_ENCODING, "");
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(std::min(config_.connect_timeout_ms, timeout_ms)));
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, static_cast<long>(timeout_ms));
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, OnBody);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &transfer);
    curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, OnHeader);
    curl_easy_setopt(curl, CURLOPT_HEADERDATA, &transfer);
    curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, OnProgress);
    curl_easy_setopt(curl, CURLOPT_XFERINFODATA, &stopping_);
    curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error_buffer);

    const CURLcode code = curl_easy_perform(curl);
    long status = 0;
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, nullptr);
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, nullptr);

    if (stopping_) throw LlmError(ErrorKind::kConnection, 0, "client shut down", attempt);
    if (transfer.body_too_large || transfer.header_bytes > kMaxHeaderBytes) {
      // Not retried: the same server would send the same reply again.
      std::string what = transfer.body_too_large
                             ? "the response body from " + url + " exceeds llm." + config_.name + ".max_response_bytes (" +
                                   std::to_string(config_.max_response_bytes) +
                                   " bytes); the rest was not read (raise max_response_bytes if such replies are expected)"
                             : "the response headers from " + url + " exceed " + std::to_string(kMaxHeaderBytes) +
                                   " bytes; the rest was not read";
      spdlog::warn("llm[{}]: stage '{}': {}", config_.name, request.stage, what);
      throw LlmError(ErrorKind::kBadOutput, static_cast<int>(status), RedactSecret(what, config_.api_key), attempt);
    }

    AttemptFailure failure;
    std::string message;
    if (code != CURLE_OK) {
      failure.kind = ClassifyCurlCode(code);
      if (failure.kind == ErrorKind::kTimeout) {
        message = "no complete response from " + url + " within " + std::to_string(timeout_ms) + " ms" +
                  (timeout_ms < config_.timeout_ms ? " (what was left of the " + std::to_string(deadline_ms) + " ms deadline)"
                                                   : std::string());
      } else {
        message = std::string(curl_easy_strerror(code)) + (error_buffer[0] ? std::string(" (") + error_buffer + ")" : "") +
                  " [" + url + "]";
      }
      if (failure.kind == ErrorKind::kConfig) throw LlmError(ErrorKind::kConfig, 0, message, attempt);
    } else if (status >= 200 && status < 300) {
      try {
        ChatResponse response = ParseResponseBody(transfer.body);
        if (auto it = transfer.headers.find("x-request-id"); it != transfer.headers.end()) response.request_id = it->second;
        response.attempts = attempt;
        response.latency_ms = elapsed_ms();
        return response;
      } catch (const LlmError& bad) {
        failure.kind = bad.kind;
        failure.http_status = static_cast<int>(status);
        failure.headers = transfer.headers;
        message = bad.message;
      }
    } else {
      failure.kind = ClassifyHttpStatus(static_cast<int>(status));
      failure.http_status = static_cast<int>(status);
      failure.headers = transfer.headers;
      message = ExtractErrorMessage(transfer.body);
    }
    message = RedactSecret(message, config_.api_key);

    RetryDecision decision = DecideRetry(policy_, attempt, failure, Jitter(), std::chrono::system_clock::now());
    if (decision.retry && deadline_ms > 0 && elapsed_ms() + decision.delay_ms >= deadline_ms) {
      decision.retry = false;
      decision.reason = "deadline";
      message += " (deadline of " + std::to_string(deadline_ms) + " ms reached)";
    }
    auto request_id = failure.headers.count("x-request-id") ? failure.headers.at("x-request-id") : std::string("-");
    if (!decision.retry) {
      if (attempt > 1) message += " (after " + std::to_string(attempt) + " attempts)";
      spdlog::debug("llm[{}]: stage '{}' failed: {} ({}, x-request-id {})", config_.name, request.stage, message,
                    decision.reason, request_id);
      throw LlmError(failure.kind, failure.http_status, message, attempt);
    }
    spdlog::warn("llm[{}]: attempt {}/{} failed with {}{}: {}; retrying in {} ms ({}, x-request-id {})", config_.name,
                 attempt, policy_.max_retries + 1, ErrorKindName(failure.kind),
                 failure.http_status ? " HTTP " + std::to_string(failure.http_status) : std::string(), message,
                 decision.delay_ms, decision.reason, request_id);
    if (!SleepUnlessStopping(decision.delay_ms)) {
      throw LlmError(ErrorKind::kConnection, 0, "client shut down", attempt);
    }
  }
}

}  // namespace accelopt::llm
