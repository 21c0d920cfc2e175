#include "common.h"

#include <kainjow/mustache.hpp>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

namespace fs = std::filesystem;

namespace accelopt_optimize {

std::string ReadText(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw StageFailure("io_error", "cannot read " + path.string());
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

void WriteText(const fs::path& path, const std::string& text) {
  std::error_code ec;
  if (path.has_parent_path()) fs::create_directories(path.parent_path(), ec);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw StageFailure("io_error", "cannot write " + path.string());
  out << text;
  if (!out) throw StageFailure("io_error", "cannot write " + path.string());
}

void WriteJson(const fs::path& path, const json& value) { WriteText(path, value.dump(2) + "\n"); }

void AppendJsonLine(const fs::path& path, const json& value) {
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  std::error_code ec;
  if (path.has_parent_path()) fs::create_directories(path.parent_path(), ec);
  std::ofstream out(path, std::ios::app);
  out << value.dump() << "\n";
}

std::string SafeName(const std::string& text) {
  std::string out;
  for (char c : text) out += (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-') ? c : '_';
  return out;
}

json ListParam(const json& value, const std::string& key) {
  if (value.is_array()) return value;
  if (value.is_object() && value.contains(key) && value[key].is_array()) return value[key];
  return json::array();
}

// ---- code -------------------------------------------------------------------

std::string NormalizeSource(const std::string& source) {
  // Pass 1: drop comments and string-only statements (docstrings), keep other strings.
  std::string kept;
  size_t i = 0;
  const size_t n = source.size();
  bool line_start = true;  // only whitespace since the last newline
  while (i < n) {
    char c = source[i];
    if (c == '#') {
      while (i < n && source[i] != '\n') ++i;
      continue;
    }
    if (c == '"' || c == '\'') {
      bool triple = i + 2 < n && source[i + 1] == c && source[i + 2] == c;
      size_t start = i;
      size_t j = i + (triple ? 3 : 1);
      while (j < n) {
        if (source[j] == '\\') {
          j += 2;
          continue;
        }
        if (triple) {
          if (j + 2 < n && source[j] == c && source[j + 1] == c && source[j + 2] == c) {
            j += 3;
            break;
          }
        } else if (source[j] == c || source[j] == '\n') {
          ++j;
          break;
        }
        ++j;
      }
      j = std::min(j, n);
      bool docstring = false;
      if (triple && line_start) {
        size_t k = j;
        while (k < n && (source[k] == ' ' || source[k] == '\t')) ++k;
        docstring = k >= n || source[k] == '\n' || source[k] == '#';
      }
      if (!docstring) kept.append(source, start, j - start);
      i = j;
      line_start = false;
      continue;
    }
    if (c == '\n') line_start = true;
    else if (c != ' ' && c != '\t' && c != '\r') line_start = false;
    kept += c;
    ++i;
  }
  std::string out;
  for (char ch : kept) {
    if (!std::isspace(static_cast<unsigned char>(ch))) out += ch;
  }
  return out;
}

std::string HashHex(const std::string& text) {
  uint64_t hash = 1469598103934665603ULL;
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 1099511628211ULL;
  }
  char buffer[17];
  std::snprintf(buffer, sizeof(buffer), "%016llx", static_cast<unsigned long long>(hash));
  return buffer;
}

std::string WithImportHeader(const std::string& source) {
  if (source.find("import neuronxcc") != std::string::npos || source.find("from neuronxcc") != std::string::npos ||
      source.find("import nki") != std::string::npos || source.find("from nki") != std::string::npos) {
    return source;
  }
  return "import numpy as np\n"
         "import neuronxcc.nki as nki\n"
         "import neuronxcc.nki.isa as nisa\n"
         "import neuronxcc.nki.language as nl\n"
         "import neuronxcc.nki.typing as nt\n"
         "from neuronxcc.nki.language import par_dim\n\n" +
         source;
}

namespace {

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::string Join(const std::vector<std::string>& lines, size_t begin, size_t end, int max_lines) {
  std::string out;
  size_t count = 0;
  for (size_t i = begin; i < end; ++i) {
    if (static_cast<int>(count) == max_lines) {
      out += "...\n";
      break;
    }
    out += lines[i] + "\n";
    ++count;
  }
  return out;
}

}  // namespace

json ChangedRegion(const std::string& before, const std::string& after, int max_lines) {
  auto a = Lines(before);
  auto b = Lines(after);
  size_t prefix = 0;
  while (prefix < a.size() && prefix < b.size() && a[prefix] == b[prefix]) ++prefix;
  size_t suffix = 0;
  while (suffix < a.size() - prefix && suffix < b.size() - prefix && a[a.size() - 1 - suffix] == b[b.size() - 1 - suffix]) {
    ++suffix;
  }
  return {{"before", Join(a, prefix, a.size() - suffix, max_lines)}, {"after", Join(b, prefix, b.size() - suffix, max_lines)}};
}

// ---- prompts ----------------------------------------------------------------

namespace {

using kainjow::mustache::data;
using kainjow::mustache::mustache;

std::string NumberText(const json& value) {
  if (value.is_number_integer() || value.is_number_unsigned()) return value.dump();
  return Significant(value.get<double>());
}

data ToData(const json& value) {
  switch (value.type()) {
    case json::value_t::object: {
      data out{data::type::object};
      for (const auto& [key, item] : value.items()) out.set(key, ToData(item));
      return out;
    }
    case json::value_t::array: {
      data out{data::type::list};
      for (const auto& item : value) out.push_back(ToData(item));
      return out;
    }
    case json::value_t::string:
      return data{value.get<std::string>()};
    case json::value_t::boolean:
      return value.get<bool>() ? data{data::type::bool_true} : data{data::type::bool_false};
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
    case json::value_t::number_float:
      return data{NumberText(value)};
    default:
      return data{data::type::bool_false};
  }
}

}  // namespace

Prompts::Prompts(fs::path dir) : dir_(std::move(dir)) {
  if (dir_.empty() || !fs::is_directory(dir_)) {
    throw StageFailure("config_error", "prompts directory not found: '" + dir_.string() + "' (parameter `prompts`)");
  }
}

std::string Prompts::Render(const std::string& name, const json& values) const {
  const fs::path file = dir_ / (name + ".mustache");
  std::string text;
  try {
    text = ReadText(file);
  } catch (const StageFailure&) {
    throw StageFailure("prompt_error", "missing prompt template " + file.string());
  }
  mustache tmpl{text};
  if (!tmpl.is_valid()) throw StageFailure("prompt_error", file.string() + ": " + tmpl.error_message());
  tmpl.set_custom_escape([](const std::string& s) { return s; });
  data root = ToData(values.is_object() ? values : json::object());
  // Partials: every other template of the directory, rendered with the same data.
  for (const auto& entry : fs::directory_iterator(dir_)) {
    if (entry.path().extension() != ".mustache" || entry.path() == file) continue;
    const std::string partial_name = entry.path().stem().string();
    const fs::path partial_file = entry.path();
    root.set(partial_name, kainjow::mustache::partial{[partial_file]() { return ReadText(partial_file); }});
  }
  std::string out = tmpl.render(root);
  if (!tmpl.is_valid()) throw StageFailure("prompt_error", file.string() + ": " + tmpl.error_message());
  return out;
}

json Prompts::Data(const std::string& name) const {
  const fs::path file = dir_ / name;
  json value = json::parse(ReadText(file), nullptr, false);
  if (value.is_discarded()) throw StageFailure("prompt_error", file.string() + ": not valid JSON");
  return value;
}

// ---- LLM --------------------------------------------------------------------

json Usage::ToJson() const {
  return {{"requests", requests}, {"failed", failed}, {"prompt_tokens", prompt_tokens},
          {"completion_tokens", completion_tokens}, {"total_tokens", prompt_tokens + completion_tokens}, {"cost_usd", cost_usd}};
}

void Usage::Add(const Usage& other) {
  requests += other.requests;
  failed += other.failed;
  prompt_tokens += other.prompt_tokens;
  completion_tokens += other.completion_tokens;
  cost_usd += other.cost_usd;
}

LlmCaller::LlmCaller(const StageContext& ctx, std::string endpoint, const json& with) : ctx_(ctx), endpoint_(std::move(endpoint)) {
  if (with.contains("temperature") && with["temperature"].is_number()) temperature_ = with["temperature"].get<double>();
  if (with.contains("max_tokens") && with["max_tokens"].is_number_integer() && with["max_tokens"].get<int64_t>() > 0) {
    max_tokens_ = with["max_tokens"].get<int64_t>();
  }
}

json LlmCaller::Chat(const std::string& case_name, const std::string& system, const std::string& user,
                     std::optional<int64_t> seed) const {
  json request = {{"endpoint", endpoint_},
                  {"messages", json::array({{{"role", "system"}, {"content", system}}, {{"role", "user"}, {"content", user}}})}};
  if (temperature_) request["temperature"] = *temperature_;
  if (max_tokens_) request["max_tokens"] = *max_tokens_;
  if (seed) request["seed"] = *seed;
  // A stage past its timeout (or a Ctrl-C'd run) may still have queued calls:
  // they are not sent, so an abandoned stage spends no more tokens.
  if (ctx_.Cancelled()) throw StageFailure("cancelled", "the stage was cancelled (timeout or interrupt); request not sent");
  Usage usage;
  try {
    json response = ctx_.LlmChat(request);
    usage.requests = 1;
    usage.prompt_tokens = response.value("prompt_tokens", int64_t{0});
    usage.completion_tokens = response.value("completion_tokens", int64_t{0});
    usage.cost_usd = response.value("cost_usd", 0.0);
    std::lock_guard<std::mutex> lock(mutex_);
    by_case_[case_name].Add(usage);
    return response;
  } catch (...) {
    usage.failed = 1;
    std::lock_guard<std::mutex> lock(mutex_);
    by_case_[case_name].Add(usage);
    throw;
  }
}

json LlmCaller::UsageJson() const {
  std::lock_guard<std::mutex> lock(mutex_);
  Usage total;
  json by_case = json::object();
  for (const auto& [name, usage] : by_case_) {
    total.Add(usage);
    by_case[name] = usage.ToJson();
  }
  return {{"total", total.ToJson()}, {"by_case", by_case}};
}

void LlmCaller::Save(const StageContext& ctx, const std::string& stage) const {
  json usage = UsageJson();
  if (usage["total"]["requests"].get<int64_t>() == 0 && usage["total"]["failed"].get<int64_t>() == 0) return;
  AppendJsonLine(fs::path(ctx.RunDir()) / "optimize" / "llm_usage.jsonl",
                 {{"key", ctx.StageDir()}, {"stage", stage}, {"usage", usage}});
}

bool UseLlm(const StageContext& ctx, const std::string& mode, const std::string& endpoint, std::string* why) {
  if (mode == "rules") return false;
  if (mode != "llm" && mode != "auto") {
    throw StageFailure("config_error", "mode must be auto, llm or rules, got '" + mode + "'");
  }
  json described;
  try {
    described = ctx.LlmChat({{"describe", true}, {"endpoint", endpoint}});
  } catch (const StageFailure& failure) {
    described = {{"available", false}, {"reason", failure.what()}};
  }
  bool available = described.value("available", false);
  if (why) *why = available ? "LLM endpoint '" + endpoint + "' (model " + described.value("model", "?") + ")" : described.value("reason", "no LLM");
  if (!available && mode == "llm") {
    throw StageFailure("llm_config", "mode llm: " + described.value("reason", std::string("no LLM endpoint")));
  }
  return available;
}

// ---- misc -------------------------------------------------------------------

void ParallelFor(size_t n, int threads, const std::function<void(size_t)>& fn) {
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i; (i = next.fetch_add(1)) < n;) fn(i);
  };
  int count = std::max(1, std::min<int>(threads, static_cast<int>(n)));
  std::vector<std::thread> pool;
  for (int t = 1; t < count; ++t) pool.emplace_back(worker);
  worker();
  for (auto& thread : pool) thread.join();
}

json ErrorJson(const std::exception& error, const std::string& default_kind) {
  if (const auto* failure = dynamic_cast<const StageFailure*>(&error)) {
    return {{"kind", failure->kind}, {"message", failure->what()}};
  }
  return {{"kind", default_kind}, {"message", error.what()}};
}

std::optional<double> Number(const json& object, const std::string& key) {
  if (!object.is_object() || !object.contains(key) || !object[key].is_number()) return std::nullopt;
  return object[key].get<double>();
}

std::string Significant(double value, int digits) {
  if (value == 0.0 || !std::isfinite(value)) return value == 0.0 ? "0" : (std::isnan(value) ? "nan" : (value > 0 ? "inf" : "-inf"));
  const double magnitude = std::fabs(value);
  char buffer[64];
  if (magnitude < 1e-4 || magnitude >= 1e9) {
    std::snprintf(buffer, sizeof(buffer), "%.*g", digits, value);
    return buffer;
  }
  const int exponent = static_cast<int>(std::floor(std::log10(magnitude)));
  const int decimals = std::max(0, digits - 1 - exponent);
  std::snprintf(buffer, sizeof(buffer), "%.*f", decimals, value);
  std::string text = buffer;
  if (text.find('.') != std::string::npos) {
    while (text.back() == '0') text.pop_back();
    if (text.back() == '.') text.pop_back();
  }
  return text;
}

std::string Fixed(double value, int digits) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "%.*f", digits, value);
  return buffer;
}

}  // namespace accelopt_optimize
