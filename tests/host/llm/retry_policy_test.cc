#include <catch2/catch.hpp>

#include <chrono>
#include <ctime>

#include "llm/retry_policy.h"

using namespace accelopt::llm;

namespace {

std::chrono::system_clock::time_point FixedNow() {
  std::tm tm{};
  tm.tm_year = 2015 - 1900;
  tm.tm_mon = 9;  // October
  tm.tm_mday = 21;
  tm.tm_hour = 7;
  tm.tm_min = 28;
  tm.tm_sec = 0;
  return std::chrono::system_clock::from_time_t(timegm(&tm));
}

AttemptFailure Http(int status, HeaderMap headers = {}) {
  return AttemptFailure{ClassifyHttpStatus(status), status, std::move(headers)};
}

}  // namespace

TEST_CASE("retry_policy: HTTP statuses map to error kinds", "[llm]") {
  CHECK(ClassifyHttpStatus(429) == ErrorKind::kRateLimit);
  CHECK(ClassifyHttpStatus(500) == ErrorKind::kServer);
  CHECK(ClassifyHttpStatus(503) == ErrorKind::kServer);
  CHECK(ClassifyHttpStatus(409) == ErrorKind::kServer);
  CHECK(ClassifyHttpStatus(408) == ErrorKind::kTimeout);
  CHECK(ClassifyHttpStatus(400) == ErrorKind::kClient);
  CHECK(ClassifyHttpStatus(401) == ErrorKind::kClient);
  CHECK(ClassifyHttpStatus(404) == ErrorKind::kClient);
  CHECK(ClassifyHttpStatus(422) == ErrorKind::kClient);
  CHECK(std::string(ErrorKindName(ErrorKind::kBadOutput)) == "llm_bad_output");
  CHECK(ErrorKindFromName("llm_replay_miss") == ErrorKind::kReplayMiss);
  CHECK_THROWS_AS(ErrorKindFromName("nope"), std::invalid_argument);
}

TEST_CASE("retry_policy: which failures are retried", "[llm]") {
  RetryPolicy policy;
  policy.max_retries = 3;
  const auto now = FixedNow();
  for (int status : {408, 409, 429, 500, 502, 503, 504}) {
    INFO("status " << status);
    CHECK(DecideRetry(policy, 1, Http(status), 0.0, now).retry);
  }
  for (int status : {400, 401, 403, 404, 422}) {
    INFO("status " << status);
    auto decision = DecideRetry(policy, 1, Http(status), 0.0, now);
    CHECK_FALSE(decision.retry);
    CHECK(decision.delay_ms == 0);
  }
  CHECK(DecideRetry(policy, 1, AttemptFailure{ErrorKind::kTimeout, 0, {}}, 0.0, now).retry);
  CHECK(DecideRetry(policy, 1, AttemptFailure{ErrorKind::kConnection, 0, {}}, 0.0, now).retry);
  CHECK_FALSE(DecideRetry(policy, 1, AttemptFailure{ErrorKind::kConfig, 0, {}}, 0.0, now).retry);

  SECTION("bad output is retried once only") {
    AttemptFailure bad{ErrorKind::kBadOutput, 200, {}};
    CHECK(DecideRetry(policy, 1, bad, 0.0, now).retry);
    CHECK_FALSE(DecideRetry(policy, 2, bad, 0.0, now).retry);
  }
  SECTION("x-should-retry overrides the default") {
    CHECK_FALSE(DecideRetry(policy, 1, Http(503, {{"x-should-retry", "false"}}), 0.0, now).retry);
    CHECK(DecideRetry(policy, 1, Http(400, {{"x-should-retry", "true"}}), 0.0, now).retry);
  }
  SECTION("no retry once max_retries retries were made") {
    CHECK(DecideRetry(policy, 3, Http(503), 0.0, now).retry);
    auto last = DecideRetry(policy, 4, Http(503), 0.0, now);
    CHECK_FALSE(last.retry);
    CHECK(last.reason == "retries exhausted");
    policy.max_retries = 0;
    CHECK_FALSE(DecideRetry(policy, 1, Http(429), 0.0, now).retry);
  }
}

TEST_CASE("retry_policy: exponential backoff is capped and jittered within bounds", "[llm]") {
  RetryPolicy policy;  // 500 ms initial, 8 s cap, 25 % jitter
  CHECK(BackoffDelayMs(policy, 1, 0.0) == 500);
  CHECK(BackoffDelayMs(policy, 2, 0.0) == 1000);
  CHECK(BackoffDelayMs(policy, 3, 0.0) == 2000);
  CHECK(BackoffDelayMs(policy, 4, 0.0) == 4000);
  CHECK(BackoffDelayMs(policy, 5, 0.0) == 8000);
  CHECK(BackoffDelayMs(policy, 6, 0.0) == 8000);   // capped
  CHECK(BackoffDelayMs(policy, 60, 0.0) == 8000);  // no overflow
  CHECK(BackoffDelayMs(policy, 1, 1.0) == 375);    // 500 * (1 - 0.25)
  CHECK(BackoffDelayMs(policy, 9, 0.999999) == 6000);
  for (int retry = 1; retry <= 10; ++retry) {
    const double base = std::min(8000.0, 500.0 * (1 << (retry - 1)));
    for (double jitter : {0.0, 0.1, 0.37, 0.5, 0.81, 0.9999}) {
      const int64_t delay = BackoffDelayMs(policy, retry, jitter);
      INFO("retry " << retry << " jitter " << jitter);
      CHECK(delay <= static_cast<int64_t>(base));
      CHECK(delay >= static_cast<int64_t>(base * 0.75) - 1);
    }
  }
  // Decisions without server hints use the backoff of the retry number.
  auto decision = DecideRetry(policy, 2, Http(500), 0.0, FixedNow());
  CHECK(decision.retry);
  CHECK(decision.delay_ms == 1000);
  CHECK(decision.reason == "backoff");
}

TEST_CASE("retry_policy: Retry-After and retry-after-ms take precedence", "[llm]") {
  RetryPolicy policy;
  policy.max_retries = 5;
  const auto now = FixedNow();
  CHECK(DecideRetry(policy, 1, Http(429, {{"retry-after", "3"}}), 0.5, now).delay_ms == 3000);
  CHECK(DecideRetry(policy, 1, Http(429, {{"retry-after", "1.5"}}), 0.5, now).delay_ms == 1500);
  CHECK(DecideRetry(policy, 1, Http(429, {{"retry-after-ms", "250"}}), 0.5, now).delay_ms == 250);
  // retry-after-ms wins over retry-after.
  CHECK(DecideRetry(policy, 1, Http(503, {{"retry-after-ms", "120"}, {"retry-after", "9"}}), 0.5, now).delay_ms == 120);
  // HTTP-date, 10 s after "now".
  auto dated = DecideRetry(policy, 1, Http(503, {{"retry-after", "Wed, 21 Oct 2015 07:28:10 GMT"}}), 0.5, now);
  CHECK(dated.delay_ms == 10000);
  CHECK(dated.reason == "server-requested delay");
  // Unreasonable values (past, zero, > 60 s, garbage) fall back to the backoff.
  for (const char* value : {"Wed, 21 Oct 2015 07:27:00 GMT", "0", "-4", "120", "soon"}) {
    INFO("Retry-After: " << value);
    auto decision = DecideRetry(policy, 1, Http(429, {{"retry-after", value}}), 0.0, now);
    CHECK(decision.retry);
    CHECK(decision.delay_ms == 500);
  }
  CHECK(ServerRequestedDelayMs({{"retry-after", "Wed, 21 Oct 2015 07:28:02 GMT"}}, now) == 2000);
  CHECK_FALSE(ServerRequestedDelayMs({}, now).has_value());
}
