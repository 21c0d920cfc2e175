// llm/curl_chat_client.h - live chat completions over libcurl.
//
// A fixed pool of EndpointConfig::max_concurrency worker threads, each owning one
// CURL easy handle (reused, so connections are kept alive), serves a FIFO queue.
// Complete() may be called from any number of threads; at most max_concurrency
// requests are on the wire at once. Retries follow retry_policy.h.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "llm/chat_client.h"
#include "llm/endpoint_config.h"
#include "llm/retry_policy.h"

namespace accelopt::llm {

/// Process-wide libcurl initialisation (curl_global_init) and SIGPIPE ignored.
/// Idempotent and thread-safe; the host calls it at start-up before any thread exists,
/// and CurlChatClient calls it too as a safety net.
void GlobalInit();

/// A ChatClient talking to base_url/chat/completions of one endpoint.
class CurlChatClient : public ChatClient {
 public:
  /// Throws LlmError{llm_config} when the endpoint names an api_key_env that is unset.
  /// Worker threads start lazily on the first request.
  explicit CurlChatClient(EndpointConfig config);

  /// Aborts in-flight transfers (their callers get llm_connection "client shut down"),
  /// fails queued requests the same way, and joins the workers.
  ~CurlChatClient() override;

  CurlChatClient(const CurlChatClient&) = delete;
  CurlChatClient& operator=(const CurlChatClient&) = delete;

  /// POSTs the request, retrying per the endpoint's policy. Blocks until done.
  /// Throws LlmError: llm_rate_limit / llm_server / llm_timeout / llm_connection after the
  /// last retry, llm_client at once for non-retryable 4xx (message = server's error.message),
  /// llm_bad_output for an unusable 200 body (retried once), llm_config for a bad request.
  /// With a `deadline`, each attempt gets at most what is left of it and no retry is made
  /// whose backoff would end past it: the last failure is thrown (message names the
  /// deadline); an attempt cut short by it is llm_timeout.
  ChatResponse Complete(const ChatRequest& request) override;

  /// The endpoint's max_concurrency.
  int MaxConcurrency() const override { return config_.max_concurrency; }

  /// The endpoint this client is bound to.
  const EndpointConfig* Endpoint() const override { return &config_; }

  /// The retry policy derived from the endpoint configuration.
  const RetryPolicy& Policy() const { return policy_; }

 private:
  struct Job {
    const ChatRequest* request;
    std::promise<Outcome> promise;  // errors travel as values, not exception_ptr
  };

  void StartWorkers();
  void WorkerLoop();
  ChatResponse Execute(void* curl, const ChatRequest& request);
  bool SleepUnlessStopping(int64_t delay_ms);

  EndpointConfig config_;
  RetryPolicy policy_;
  std::once_flag started_;
  std::mutex mutex_;
  std::condition_variable wake_;        // a job was queued (or stopping)
  std::condition_variable stop_wake_;   // stopping: interrupts backoff sleeps
  std::deque<Job*> queue_;
  std::vector<std::thread> workers_;
  std::atomic<bool> stopping_{false};
};

}  // namespace accelopt::llm
