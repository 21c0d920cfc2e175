// text.h - small text utilities: did-you-mean, durations, atomic files.
#pragma once

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace accelopt {

/// Levenshtein distance between a and b (insert/delete/substitute cost 1).
size_t EditDistance(std::string_view a, std::string_view b);

/// The candidate closest to `word` if it is close enough to be a likely
/// typo (distance <= max(2, len/3)); otherwise nullopt.
std::optional<std::string> DidYouMean(std::string_view word, const std::vector<std::string>& candidates);

/// " (did you mean 'x'?)" or "".
std::string DidYouMeanSuffix(std::string_view word, const std::vector<std::string>& candidates);

/// Parses a duration: one or more number+unit groups ("250ms", "30s",
/// "5m", "1h", "1m30s", "1h 5m"; units ms, s, m or min, h; fractions allowed)
/// or a plain number of seconds ("30"). This is the one duration parser of
/// the host: stage `timeout:`, `retry.backoff` and the `llm:` block use it.
/// Returns milliseconds, or nullopt for anything else (negative values
/// included); then `*error` (if given) says why ("unknown unit 'x'", ...).
std::optional<std::chrono::milliseconds> ParseDuration(std::string_view text, std::string* error = nullptr);

/// Writes `content` to `path` through a temporary file + fsync + rename, so
/// readers never see a half-written file. Creates parent directories.
/// Throws std::runtime_error on I/O failure.
void WriteFileAtomic(const std::filesystem::path& path, std::string_view content);

/// Reads a whole file. Throws std::runtime_error naming the path on failure.
std::string ReadFile(const std::filesystem::path& path);

/// Byte offset of the first byte of `text` that does not start a valid UTF-8
/// sequence (overlong forms, surrogates and code points above U+10FFFF are
/// invalid), or std::string_view::npos if `text` is valid UTF-8.
size_t FindInvalidUtf8(std::string_view text);

}  // namespace accelopt
