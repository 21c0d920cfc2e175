#include "llm/retry_policy.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <ctime>
#include <iomanip>
#include <locale>
#include <sstream>

namespace accelopt::llm {

namespace {

std::optional<std::string> Header(const HeaderMap& headers, const std::string& name) {
  auto it = headers.find(name);
  if (it == headers.end()) return std::nullopt;
  return it->second;
}

std::string Trim(const std::string& text) {
  size_t begin = 0, end = text.size();
  while (begin < end && std::isspace(static_cast<unsigned char>(text[begin]))) ++begin;
  while (end > begin && std::isspace(static_cast<unsigned char>(text[end - 1]))) --end;
  return text.substr(begin, end - begin);
}

std::optional<double> ParseNumber(const std::string& text) {
  const std::string trimmed = Trim(text);
  if (trimmed.empty()) return std::nullopt;
  std::istringstream in(trimmed);
  in.imbue(std::locale::classic());
  double value = 0;
  in >> value;
  if (in.fail() || !in.eof() || !std::isfinite(value)) return std::nullopt;
  return value;
}

// RFC 7231 IMF-fixdate, e.g. "Wed, 21 Oct 2015 07:28:00 GMT".
std::optional<std::chrono::system_clock::time_point> ParseHttpDate(const std::string& text) {
  std::tm tm{};
  std::istringstream in(Trim(text));
  in.imbue(std::locale::classic());
  in >> std::get_time(&tm, "%a, %d %b %Y %H:%M:%S");
  if (in.fail()) return std::nullopt;
  std::string zone;
  in >> zone;
  if (!zone.empty() && zone != "GMT" && zone != "UTC") return std::nullopt;
  const time_t seconds = timegm(&tm);
  if (seconds == static_cast<time_t>(-1)) return std::nullopt;
  return std::chrono::system_clock::from_time_t(seconds);
}

}  // namespace

ErrorKind ClassifyHttpStatus(int status) {
  if (status == 429) return ErrorKind::kRateLimit;
  if (status == 408) return ErrorKind::kTimeout;
  if (status == 409 || status >= 500) return ErrorKind::kServer;
  return ErrorKind::kClient;
}

bool IsRetryable(const AttemptFailure& failure, int attempt) {
  switch (failure.kind) {
    case ErrorKind::kTimeout:
    case ErrorKind::kConnection:
    case ErrorKind::kRateLimit:
    case ErrorKind::kServer:
      return true;
    case ErrorKind::kBadOutput:
      return attempt == 1;  // usually deterministic for a prompt: one more try only
    default:
      return false;
  }
}

std::optional<int64_t> ServerRequestedDelayMs(const HeaderMap& headers, std::chrono::system_clock::time_point now) {
  if (auto ms = Header(headers, "retry-after-ms")) {
    if (auto value = ParseNumber(*ms)) return static_cast<int64_t>(std::llround(*value));
  }
  if (auto after = Header(headers, "retry-after")) {
    if (auto seconds = ParseNumber(*after)) return static_cast<int64_t>(std::llround(*seconds * 1000.0));
    if (auto date = ParseHttpDate(*after)) {
      return std::chrono::duration_cast<std::chrono::milliseconds>(*date - now).count();
    }
  }
  return std::nullopt;
}

int64_t BackoffDelayMs(const RetryPolicy& policy, int retry, double jitter) {
  const int exponent = std::clamp(retry - 1, 0, 62);
  double base = static_cast<double>(policy.initial_delay_ms) * std::pow(2.0, exponent);
  base = std::min(base, static_cast<double>(policy.max_delay_ms));
  jitter = std::clamp(jitter, 0.0, 1.0);
  const double scaled = base * (1.0 - policy.jitter_fraction * jitter);
  return std::max<int64_t>(0, static_cast<int64_t>(std::llround(scaled)));
}

RetryDecision DecideRetry(const RetryPolicy& policy, int attempt, const AttemptFailure& failure, double jitter,
                          std::chrono::system_clock::time_point now) {
  RetryDecision decision;
  if (attempt > policy.max_retries) {
    decision.reason = "retries exhausted";
    return decision;
  }
  bool retryable = IsRetryable(failure, attempt);
  if (auto should = Header(failure.headers, "x-should-retry")) {
    const std::string value = Trim(*should);
    if (value == "true") retryable = true;
    if (value == "false") retryable = false;
  }
  if (!retryable) {
    decision.reason = "not retryable";
    return decision;
  }
  decision.retry = true;
  if (auto requested = ServerRequestedDelayMs(failure.headers, now);
      requested && *requested > 0 && *requested <= policy.max_server_delay_ms) {
    decision.delay_ms = *requested;
    decision.reason = "server-requested delay";
    return decision;
  }
  decision.delay_ms = BackoffDelayMs(policy, attempt, jitter);
  decision.reason = "backoff";
  return decision;
}

}  // namespace accelopt::llm
