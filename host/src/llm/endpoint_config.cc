#include "llm/endpoint_config.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <vector>

#include "core/text.h"
#include "llm/llm_error.h"

namespace accelopt::llm {

namespace {

using nlohmann::json;

const std::vector<std::string>& KnownFields() {
  static const std::vector<std::string> fields = {
      "base_url",         "model",           "api_key_env",       "max_concurrency",   "timeout",
      "connect_timeout",  "max_retries",     "initial_retry_delay", "max_retry_delay", "temperature",
      "max_tokens",       "price_per_mtok_in", "price_per_mtok_out", "extra",           "deadline",
      "max_response_bytes", "caps"};
  return fields;
}

size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// " (did you mean 'x'?)" for the closest of `known` within edit distance 2, else "".
std::string DidYouMean(const std::string& key, const std::vector<std::string>& known) {
  std::string best;
  size_t best_distance = 3;
  for (const auto& candidate : known) {
    size_t d = EditDistance(key, candidate);
    if (d < best_distance) {
      best_distance = d;
      best = candidate;
    }
  }
  return best.empty() ? std::string() : " (did you mean '" + best + "'?)";
}

std::string EnvSuffixName(const std::string& name) {
  std::string out;
  for (char c : name) out += std::isalnum(static_cast<unsigned char>(c)) ? static_cast<char>(std::toupper(c)) : '_';
  return out;
}

std::string FieldPath(const std::string& endpoint, const std::string& field) {
  return "llm." + endpoint + "." + field;
}

std::string TypeName(const json& value) { return value.type_name(); }

std::string GetString(const json& spec, const std::string& endpoint, const std::string& field) {
  const json& value = spec.at(field);
  if (!value.is_string()) {
    ThrowConfigError(FieldPath(endpoint, field) + ": expected a string, got " + TypeName(value));
  }
  return value.get<std::string>();
}

int64_t GetInt(const json& spec, const std::string& endpoint, const std::string& field, int64_t lo, int64_t hi) {
  const json& value = spec.at(field);
  int64_t result = 0;
  if (value.is_number_integer()) {
    result = value.get<int64_t>();
  } else if (value.is_number_float() && std::floor(value.get<double>()) == value.get<double>()) {
    result = static_cast<int64_t>(value.get<double>());
  } else {
    ThrowConfigError(FieldPath(endpoint, field) + ": expected an integer, got " +
                     (value.is_number() ? value.dump() : TypeName(value)));
  }
  if (result < lo || result > hi) {
    ThrowConfigError(FieldPath(endpoint, field) + ": " + std::to_string(result) + " is out of range [" +
                     std::to_string(lo) + ", " + std::to_string(hi) + "]");
  }
  return result;
}

double GetNumber(const json& spec, const std::string& endpoint, const std::string& field, double lo) {
  const json& value = spec.at(field);
  if (!value.is_number()) {
    ThrowConfigError(FieldPath(endpoint, field) + ": expected a number, got " + TypeName(value));
  }
  double result = value.get<double>();
  if (!std::isfinite(result) || result < lo) {
    ThrowConfigError(FieldPath(endpoint, field) + ": " + value.dump() + " must be >= " + json(lo).dump());
  }
  return result;
}

}  // namespace

EnvLookup ProcessEnv() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* value = std::getenv(name.c_str());
    if (value == nullptr || *value == '\0') return std::nullopt;
    return std::string(value);
  };
}

json EndpointConfig::ToRedactedJson() const {
  json out = {{"name", name},
              {"base_url", base_url},
              {"base_url_source", base_url_source},
              {"model", model},
              {"api_key_env", api_key_env},
              {"api_key_set", !api_key.empty()},
              {"api_key_source", api_key_source},
              {"max_concurrency", max_concurrency},
              {"timeout_ms", timeout_ms},
              {"connect_timeout_ms", connect_timeout_ms},
              {"deadline_ms", deadline_ms},
              {"max_retries", max_retries},
              {"initial_retry_delay_ms", initial_retry_delay_ms},
              {"max_retry_delay_ms", max_retry_delay_ms},
              {"price_per_mtok_in", price_per_mtok_in},
              {"price_per_mtok_out", price_per_mtok_out},
              {"extra", extra},
              {"max_response_bytes", max_response_bytes},
              {"caps", caps.ToJson()}};
  out["temperature"] = temperature ? json(*temperature) : json(nullptr);
  out["max_tokens"] = max_tokens ? json(*max_tokens) : json(nullptr);
  return out;
}

int64_t ParseDurationMs(const json& value, const std::string& field) {
  double ms = 0;
  if (value.is_number()) {
    ms = value.get<double>() * 1000.0;
  } else if (value.is_string()) {
    // The host's one duration parser (core/text.h); only the message is ours.
    const std::string text = value.get<std::string>();
    std::string why;
    auto parsed = ParseDuration(text, &why);
    if (!parsed) {
      ThrowConfigError(field + ": invalid duration \"" + text + "\" (" + why +
                       "; use e.g. \"500ms\", \"30s\", \"2m\", \"1h\", \"1m30s\" or a number of seconds)");
    }
    ms = static_cast<double>(parsed->count());
  } else {
    ThrowConfigError(field + ": expected a duration string or a number of seconds, got " + value.type_name());
  }
  if (!std::isfinite(ms) || ms < 1.0) ThrowConfigError(field + ": duration must be at least 1ms, got " + value.dump());
  if (ms > 1e12) ThrowConfigError(field + ": duration " + value.dump() + " is too long");
  return static_cast<int64_t>(std::llround(ms));
}

int64_t ParseByteSize(const json& value, const std::string& field, int64_t lo, int64_t hi) {
  auto range = [&](int64_t bytes) {
    if (bytes < lo || bytes > hi) {
      ThrowConfigError(field + ": " + value.dump() + " is out of range [" + std::to_string(lo) + ", " +
                       std::to_string(hi) + "] bytes");
    }
    return bytes;
  };
  if (value.is_number_integer()) return range(value.get<int64_t>());
  if (!value.is_string()) {
    ThrowConfigError(field + ": expected a number of bytes or a size such as \"16MiB\", got " +
                     (value.is_number() ? value.dump() : std::string(value.type_name())));
  }
  const std::string text = value.get<std::string>();
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  std::string unit = text.substr(digits);
  for (auto& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  int shift = -1;
  if (unit.empty() || unit == "B") shift = 0;
  else if (unit == "K" || unit == "KB" || unit == "KIB") shift = 10;
  else if (unit == "M" || unit == "MB" || unit == "MIB") shift = 20;
  else if (unit == "G" || unit == "GB" || unit == "GIB") shift = 30;
  if (digits == 0 || digits > 12 || shift < 0) {
    ThrowConfigError(field + ": invalid size \"" + text + "\" (use a number of bytes or e.g. \"512K\", \"16MiB\", \"1G\")");
  }
  const int64_t number = std::stoll(text.substr(0, digits));
  if (number > (hi >> shift)) range(hi + 1);  // out of range, without overflowing the shift
  return range(number << shift);
}

EndpointConfig ParseEndpoint(const std::string& name, const json& spec, const EnvLookup& env) {
  if (name.empty()) ThrowConfigError("llm: endpoint names must not be empty");
  if (!spec.is_object()) {
    ThrowConfigError("llm." + name + ": expected an object with base_url, model, ..., got " + spec.type_name());
  }
  for (const auto& [key, value] : spec.items()) {
    const auto& known = KnownFields();
    if (std::find(known.begin(), known.end(), key) != known.end()) continue;
    ThrowConfigError(FieldPath(name, key) + ": unknown field" + DidYouMean(key, known));
  }

  EndpointConfig config;
  config.name = name;
  if (spec.contains("base_url") && !spec.at("base_url").is_null()) {
    config.base_url = GetString(spec, name, "base_url");
    if (!config.base_url.empty()) config.base_url_source = "llm block";
  }
  if (spec.contains("model")) config.model = GetString(spec, name, "model");
  if (spec.contains("api_key_env")) {
    config.api_key_env = GetString(spec, name, "api_key_env");
    if (config.api_key_env.empty()) ThrowConfigError(FieldPath(name, "api_key_env") + ": must not be empty");
  }
  if (spec.contains("max_concurrency")) config.max_concurrency = static_cast<int>(GetInt(spec, name, "max_concurrency", 1, 256));
  if (spec.contains("timeout")) config.timeout_ms = ParseDurationMs(spec.at("timeout"), FieldPath(name, "timeout"));
  if (spec.contains("connect_timeout")) {
    config.connect_timeout_ms = ParseDurationMs(spec.at("connect_timeout"), FieldPath(name, "connect_timeout"));
  }
  config.connect_timeout_ms = std::min(config.connect_timeout_ms, config.timeout_ms);
  if (spec.contains("deadline")) config.deadline_ms = ParseDurationMs(spec.at("deadline"), FieldPath(name, "deadline"));
  if (spec.contains("max_retries")) config.max_retries = static_cast<int>(GetInt(spec, name, "max_retries", 0, 100));
  if (spec.contains("initial_retry_delay")) {
    config.initial_retry_delay_ms = ParseDurationMs(spec.at("initial_retry_delay"), FieldPath(name, "initial_retry_delay"));
  }
  if (spec.contains("max_retry_delay")) {
    config.max_retry_delay_ms = ParseDurationMs(spec.at("max_retry_delay"), FieldPath(name, "max_retry_delay"));
  }
  if (config.max_retry_delay_ms < config.initial_retry_delay_ms) {
    ThrowConfigError(FieldPath(name, "max_retry_delay") + ": must not be shorter than initial_retry_delay");
  }
  if (spec.contains("temperature")) config.temperature = GetNumber(spec, name, "temperature", 0.0);
  if (spec.contains("max_tokens")) config.max_tokens = static_cast<int>(GetInt(spec, name, "max_tokens", 1, 100000000));
  if (spec.contains("price_per_mtok_in")) config.price_per_mtok_in = GetNumber(spec, name, "price_per_mtok_in", 0.0);
  if (spec.contains("price_per_mtok_out")) config.price_per_mtok_out = GetNumber(spec, name, "price_per_mtok_out", 0.0);
  if (spec.contains("max_response_bytes")) {
    // At least 1 KiB (an error body); at most 1 GiB (no chat reply is that long).
    config.max_response_bytes =
        ParseByteSize(spec.at("max_response_bytes"), FieldPath(name, "max_response_bytes"), 1ll << 10, 1ll << 30);
  }
  if (spec.contains("caps")) config.caps = ParseSpendCaps(spec.at("caps"), FieldPath(name, "caps"));
  if (spec.contains("extra")) {
    if (!spec.at("extra").is_object()) {
      ThrowConfigError(FieldPath(name, "extra") + ": expected an object, got " + spec.at("extra").type_name());
    }
    config.extra = spec.at("extra");
    for (const char* reserved : {"model", "messages", "stream"}) {
      if (config.extra.contains(reserved)) {
        ThrowConfigError(FieldPath(name, std::string("extra.") + reserved) + ": may not be set through extra");
      }
    }
  }

  // Environment overrides: per-endpoint first, then global.
  const std::string suffix = EnvSuffixName(name);
  auto override_from = [&](const std::string& what) -> std::optional<std::pair<std::string, std::string>> {
    for (const std::string& var : {"ACCELOPT_LLM_" + suffix + "_" + what, "ACCELOPT_LLM_" + what}) {
      if (auto value = env(var)) return std::make_pair(var, *value);
    }
    return std::nullopt;
  };
  if (auto value = override_from("BASE_URL")) {
    config.base_url = value->second;
    config.base_url_source = value->first;
  } else if (config.base_url.empty()) {
    // The OpenAI SDKs' convention (openai-python: base_url defaults to $OPENAI_BASE_URL,
    // else https://api.openai.com/v1); the block's own base_url wins, as an explicit
    // argument does there.
    if (auto openai = env("OPENAI_BASE_URL")) {
      config.base_url = *openai;
      config.base_url_source = "OPENAI_BASE_URL";
    } else {
      config.base_url = kOpenAiDefaultBaseUrl;
      config.base_url_source = "default";
    }
  }
  if (auto value = override_from("MODEL")) config.model = value->second;
  if (auto value = override_from("API_KEY")) {
    config.api_key = value->second;
    config.api_key_source = value->first;
  } else if (!config.api_key_env.empty()) {
    if (auto key = env(config.api_key_env)) {
      config.api_key = *key;
      config.api_key_source = config.api_key_env;
    }
  } else if (auto key = env("OPENAI_API_KEY")) {
    config.api_key = *key;
    config.api_key_source = "OPENAI_API_KEY";
  }

  // Keys pasted from files often end in a newline, which would corrupt the header.
  while (!config.api_key.empty() && std::isspace(static_cast<unsigned char>(config.api_key.back()))) config.api_key.pop_back();
  while (!config.api_key.empty() && std::isspace(static_cast<unsigned char>(config.api_key.front()))) config.api_key.erase(0, 1);
  if (config.api_key.find_first_of("\r\n") != std::string::npos) {
    ThrowConfigError(FieldPath(name, "api_key_env") + ": the key from " + config.api_key_source + " contains a line break");
  }
  while (!config.base_url.empty() && config.base_url.back() == '/') config.base_url.pop_back();
  if (config.base_url.empty()) {
    ThrowConfigError(FieldPath(name, "base_url") + ": empty (from " + config.base_url_source + ")");
  }
  if (config.base_url.rfind("http://", 0) != 0 && config.base_url.rfind("https://", 0) != 0) {
    ThrowConfigError(FieldPath(name, "base_url") + ": \"" + config.base_url + "\" must start with http:// or https://" +
                     (config.base_url_source == "llm block" ? std::string() : " (from " + config.base_url_source + ")"));
  }
  if (config.model.empty()) ThrowConfigError(FieldPath(name, "model") + ": required (or set ACCELOPT_LLM_MODEL)");
  return config;
}

json CapLimits::ToJson() const {
  return {{"requests", requests > 0 ? json(requests) : json(nullptr)},
          {"tokens", tokens > 0 ? json(tokens) : json(nullptr)},
          {"usd", usd > 0 ? json(usd) : json(nullptr)}};
}

json SpendCaps::ToJson() const { return {{"problem", problem.ToJson()}, {"run", run.ToJson()}}; }

namespace {

// One scope of `caps:` over `limits` (the defaults). null: no cap in the scope.
void ParseCapScope(const json& value, const std::string& field, CapLimits& limits) {
  if (value.is_null()) {
    limits = CapLimits{};
    return;
  }
  if (!value.is_object()) {
    ThrowConfigError(field + ": expected an object with requests, tokens and/or usd (0 or null = no cap), got " +
                     value.type_name());
  }
  static const std::vector<std::string> known = {"requests", "tokens", "usd"};
  for (const auto& [key, item] : value.items()) {
    if (std::find(known.begin(), known.end(), key) == known.end()) {
      ThrowConfigError(field + "." + key + ": unknown field" + DidYouMean(key, known) + " (caps are requests, tokens, usd)");
    }
  }
  auto count = [&](const char* key, int64_t& out) {
    if (!value.contains(key)) return;
    const json& item = value.at(key);
    const std::string where = field + "." + key;
    if (item.is_null()) {
      out = 0;
      return;
    }
    const bool integral = item.is_number_integer() ||
                          (item.is_number_float() && std::isfinite(item.get<double>()) &&
                           std::floor(item.get<double>()) == item.get<double>());
    if (!integral) {
      ThrowConfigError(where + ": expected a non-negative integer (0 or null = no cap), got " +
                       (item.is_number() ? item.dump() : std::string(item.type_name())));
    }
    const double number = item.get<double>();
    if (number < 0 || number > 1e15) {
      ThrowConfigError(where + ": " + item.dump() + " is out of range [0, 1e15] (0 or null = no cap)");
    }
    out = static_cast<int64_t>(number);
  };
  count("requests", limits.requests);
  count("tokens", limits.tokens);
  if (value.contains("usd")) {
    const json& item = value.at("usd");
    if (item.is_null()) {
      limits.usd = 0;
    } else if (!item.is_number() || !std::isfinite(item.get<double>()) || item.get<double>() < 0) {
      ThrowConfigError(field + ".usd: expected a non-negative number of USD (0 or null = no cap), got " +
                       (item.is_number() ? item.dump() : std::string(item.type_name())));
    } else {
      limits.usd = item.get<double>();
    }
  }
}

}  // namespace

SpendCaps ParseSpendCaps(const json& value, const std::string& field) {
  SpendCaps caps;
  if (value.is_null()) return SpendCaps{CapLimits{}, CapLimits{}};
  if (!value.is_object()) {
    ThrowConfigError(field + ": expected an object {problem: {requests, tokens, usd}, run: {...}}, got " + value.type_name());
  }
  static const std::vector<std::string> known = {"problem", "run"};
  for (const auto& [key, item] : value.items()) {
    if (std::find(known.begin(), known.end(), key) == known.end()) {
      ThrowConfigError(field + "." + key + ": unknown field" + DidYouMean(key, known) + " (caps has problem and run)");
    }
  }
  if (value.contains("problem")) ParseCapScope(value.at("problem"), field + ".problem", caps.problem);
  if (value.contains("run")) ParseCapScope(value.at("run"), field + ".run", caps.run);
  return caps;
}

void RequireApiKey(const EndpointConfig& config) {
  if (!config.api_key_env.empty() && config.api_key.empty()) {
    ThrowConfigError(FieldPath(config.name, "api_key_env") + ": environment variable " + config.api_key_env +
                     " is not set (or set ACCELOPT_LLM_API_KEY)");
  }
}

std::string RedactSecret(std::string text, std::string_view secret) {
  if (secret.size() < 4) return text;
  size_t pos = 0;
  while ((pos = text.find(secret, pos)) != std::string::npos) {
    text.replace(pos, secret.size(), "[REDACTED]");
    pos += 10;
  }
  return text;
}

}  // namespace accelopt::llm
