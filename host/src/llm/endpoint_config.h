// llm/endpoint_config.h - one named OpenAI-compatible endpoint of a pipeline's
// `llm:` block, parsed from JSON (the YAML block converted to JSON), with
// environment overrides applied.
//
//   llm:
//     default: {base_url: "http://127.0.0.1:8000/v1", model: "gpt-oss-120b",
//               api_key_env: OPENAI_API_KEY, max_concurrency: 4, timeout: 180s,
//               deadline: 10m, max_retries: 4, temperature: 0.7, max_tokens: 4096,
//               price_per_mtok_in: 0.15, price_per_mtok_out: 0.6, max_response_bytes: 16MiB,
//               caps: {problem: {requests: 500, tokens: 10000000, usd: 10}, run: {...}}}
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace accelopt::llm {

/// Looks up an environment variable; std::nullopt when unset. Injected so tests
/// need not touch the process environment.
using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;

/// An EnvLookup reading the process environment (getenv). Empty values count as unset.
EnvLookup ProcessEnv();

/// The caps of one scope (a problem, or the run). 0 = no cap.
struct CapLimits {
  int64_t requests = 0;  ///< Requests sent (a failed request counts; its retries do not).
  int64_t tokens = 0;    ///< Prompt + completion tokens.
  double usd = 0.0;      ///< Estimated cost at the endpoint's prices (USD).

  /// {"requests": n | null, "tokens": n | null, "usd": x | null}; null = no cap.
  nlohmann::json ToJson() const;
};

/// The caps of an endpoint. The defaults are what `llm.<name>.caps` gives when unset.
struct SpendCaps {
  CapLimits problem{500, 10'000'000, 10.0};
  CapLimits run{5000, 100'000'000, 100.0};

  /// {"problem": CapLimits::ToJson(), "run": ...}.
  nlohmann::json ToJson() const;
};

/// Parses `llm.<endpoint>.caps` (`field`, e.g. "llm.default.caps") over the defaults:
/// an object with `problem` and/or `run`, each an object with `requests`, `tokens`
/// (non-negative integers) and/or `usd` (a non-negative number); a key left out keeps its
/// default, 0 or null is "no cap" (null for a whole scope or for `caps` itself: no cap in it).
/// Throws LlmError{llm_config} naming the field ("llm.default.caps.run.usd: ...") for unknown
/// keys (with a did-you-mean hint), wrong types and negative values.
SpendCaps ParseSpendCaps(const nlohmann::json& value, const std::string& field);

/// A fully resolved endpoint. Durations are milliseconds, prices USD per million tokens.
struct EndpointConfig {
  std::string name;                    ///< Key in the `llm:` block, e.g. "default".
  std::string base_url;                ///< Without trailing '/'; requests go to base_url + "/chat/completions".
  std::string base_url_source;         ///< Where base_url came from: "llm block", an env var's name, or "default".
  std::string model;                   ///< Value of the request's "model" field.
  std::string api_key_env;             ///< Env var the key came from (empty: none configured).
  std::string api_key;                 ///< The resolved secret; never logged or written. Empty: no Authorization header.
  std::string api_key_source;          ///< Which env var supplied api_key (for diagnostics; never the value).
  int max_concurrency = 4;             ///< Worker threads (= simultaneous requests) of the live client.
  int64_t timeout_ms = 180000;         ///< Per-attempt total transfer timeout.
  int64_t connect_timeout_ms = 5000;   ///< Per-attempt connect timeout (capped at timeout_ms).
  int64_t deadline_ms = 0;             ///< Whole-request bound across attempts and backoff (0 = none).
  int max_retries = 2;                 ///< Retries after the first attempt (attempts = max_retries + 1).
  int64_t initial_retry_delay_ms = 500;   ///< Backoff before the first retry (doubles each retry).
  int64_t max_retry_delay_ms = 8000;      ///< Cap of the exponential backoff.
  std::optional<double> temperature;   ///< Default sampling temperature (a request's own value wins).
  std::optional<int> max_tokens;       ///< Default completion budget in tokens (a request's own value wins).
  double price_per_mtok_in = 0.0;      ///< USD per 1e6 prompt tokens (cost estimates).
  double price_per_mtok_out = 0.0;     ///< USD per 1e6 completion tokens (cost estimates).
  nlohmann::json extra = nlohmann::json::object();  ///< Extra body fields sent with every request (e.g. reasoning_effort).
  /// Largest response body read (decoded); a longer reply fails with llm_bad_output
  /// before the host holds it. `max_response_bytes:` in the llm: block (bytes, or "64MiB").
  int64_t max_response_bytes = 16ll << 20;
  /// Spend caps per problem and per run (`caps:`; docs/llm.md, "Spend caps").
  SpendCaps caps;

  /// base_url + "/chat/completions".
  std::string ChatCompletionsUrl() const { return base_url + "/chat/completions"; }

  /// The configuration as JSON for logs and run metadata: every field except the key
  /// (only `api_key_set: bool` and `api_key_source` are reported).
  nlohmann::json ToRedactedJson() const;
};

/// Parses a duration: a JSON number of seconds (may be fractional), or a string of
/// number+unit groups ("500ms", "30s", "2m", "1h", "1m30s"; a bare "30" means seconds).
/// Returns milliseconds. Throws LlmError{llm_config} naming `field` when invalid or <= 0.
int64_t ParseDurationMs(const nlohmann::json& value, const std::string& field);

/// Parses a byte size: a JSON integer of bytes, or a string "<integer><unit>" with
/// unit B, K/KB/KiB, M/MB/MiB or G/GB/GiB (powers of 1024; a bare number is bytes).
/// Throws LlmError{llm_config} naming `field` when invalid or outside [lo, hi].
int64_t ParseByteSize(const nlohmann::json& value, const std::string& field, int64_t lo, int64_t hi);

/// The OpenAI SDKs' default base URL, used when neither the block nor the environment gives one.
inline constexpr const char* kOpenAiDefaultBaseUrl = "https://api.openai.com/v1";

/// Parses one endpoint of the `llm:` block.
///
/// Environment overrides (per-endpoint names win over global ones; NAME is the endpoint
/// name upper-cased with non-alphanumerics as '_'):
///   ACCELOPT_LLM_<NAME>_BASE_URL, ACCELOPT_LLM_BASE_URL  -> base_url
///   ACCELOPT_LLM_<NAME>_MODEL,    ACCELOPT_LLM_MODEL     -> model
///   ACCELOPT_LLM_<NAME>_API_KEY,  ACCELOPT_LLM_API_KEY   -> api_key
/// The OpenAI SDKs' conventions fill what is still missing, as openai-python does (an
/// explicit argument, here the block's field, wins over the environment):
///   base_url: the block's, else $OPENAI_BASE_URL, else https://api.openai.com/v1;
///   api key:  $api_key_env when configured, else $OPENAI_API_KEY (never OPENAI_API_KEY
///             when another api_key_env is configured, so a key is not sent to a server it
///             was not meant for).
///
/// Throws LlmError{llm_config} whose message names the field ("llm.<name>.<field>: ..."),
/// for unknown fields (with a did-you-mean hint), wrong types, out-of-range values, and a
/// missing model (after overrides). A configured api_key_env that is unset is
/// NOT an error here (replay needs no key); see RequireApiKey.
EndpointConfig ParseEndpoint(const std::string& name, const nlohmann::json& spec, const EnvLookup& env);

/// Throws LlmError{llm_config} when the endpoint names an api_key_env that is unset
/// (called before live use; replay skips it).
void RequireApiKey(const EndpointConfig& config);

/// Replaces every occurrence of `secret` in `text` by "[REDACTED]" (no-op for secrets
/// shorter than 4 characters, which would only mangle text).
std::string RedactSecret(std::string text, std::string_view secret);

}  // namespace accelopt::llm
