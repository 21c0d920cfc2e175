// llm/retry_policy.h - when to retry a failed attempt and how long to wait.
//
// Pure functions (no clock reads, no randomness inside), so every branch is unit
// tested without a network. The policy follows openai-python's: retry timeouts,
// connection errors, 408/409/429/5xx; honour x-should-retry, retry-after-ms and
// Retry-After (seconds or HTTP-date) when 0 < value <= 60 s; otherwise back off
// min(max_delay, initial * 2^(retry-1)) * (1 - 0.25 * jitter).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "llm/llm_error.h"

namespace accelopt::llm {

/// HTTP response headers with lower-cased names (last value wins).
using HeaderMap = std::map<std::string, std::string>;

/// Backoff parameters. Durations in ms.
struct RetryPolicy {
  int max_retries = 2;                 ///< Retries after the first attempt.
  int64_t initial_delay_ms = 500;      ///< Backoff before retry 1.
  int64_t max_delay_ms = 8000;         ///< Cap of the exponential backoff (not of server-requested delays).
  double jitter_fraction = 0.25;       ///< Backoff is scaled by (1 - jitter_fraction * jitter), jitter in [0, 1).
  int64_t max_server_delay_ms = 60000; ///< Largest Retry-After / retry-after-ms honoured; larger values fall back to backoff.
};

/// What went wrong in one attempt, as classified by the transport.
struct AttemptFailure {
  ErrorKind kind = ErrorKind::kServer;  ///< Classification (see ClassifyHttpStatus for HTTP errors).
  int http_status = 0;                  ///< 0 when no HTTP response arrived.
  HeaderMap headers;                    ///< Response headers (lower-case names); empty without a response.
};

/// The decision after a failed attempt.
struct RetryDecision {
  bool retry = false;     ///< Whether to make another attempt.
  int64_t delay_ms = 0;   ///< How long to wait before it (ms; 0 when not retrying).
  std::string reason;     ///< Why (for logs), e.g. "retry-after header", "backoff", "not retryable".
};

/// Maps a non-2xx HTTP status to an error kind: 429 -> rate_limit, >= 500 and 409 ->
/// server, 408 -> timeout, other 4xx (and anything else) -> client.
ErrorKind ClassifyHttpStatus(int status);

/// Whether a failure of this kind/status is retryable by default (before x-should-retry):
/// timeouts, connection errors, 408/409/429/5xx, and bad output (only for the first attempt).
bool IsRetryable(const AttemptFailure& failure, int attempt);

/// Parses the server-requested delay: retry-after-ms (ms, may be fractional), else
/// Retry-After as seconds (may be fractional) or an HTTP-date relative to `now`.
/// Returns std::nullopt when absent or unparsable; may return <= 0 for past dates.
std::optional<int64_t> ServerRequestedDelayMs(const HeaderMap& headers, std::chrono::system_clock::time_point now);

/// The exponential backoff before retry number `retry` (1-based):
/// min(max_delay, initial * 2^(retry-1)) * (1 - jitter_fraction * jitter). `jitter` in [0, 1).
int64_t BackoffDelayMs(const RetryPolicy& policy, int retry, double jitter);

/// Decides whether to retry after attempt number `attempt` (1-based) failed.
/// @param jitter a uniform random number in [0, 1) supplied by the caller.
/// @param now    current wall-clock time (for HTTP-date Retry-After).
RetryDecision DecideRetry(const RetryPolicy& policy, int attempt, const AttemptFailure& failure, double jitter,
                          std::chrono::system_clock::time_point now);

}  // namespace accelopt::llm
