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

/// Parses "250ms", "30s", "5m", "1h" or a plain number of seconds.
/// Returns nullopt for anything else or a negative value.
std::optional<std::chrono::milliseconds> ParseDuration(std::string_view text);

/// Writes `content` to `path` through a temporary file + fsync + rename, so
/// readers never see a half-written file. Creates parent directories.
/// Throws std::runtime_error on I/O failure.
void WriteFileAtomic(const std::filesystem::path& path, std::string_view content);

/// Reads a whole file. Throws std::runtime_error naming the path on failure.
std::string ReadFile(const std::filesystem::path& path);

}  // namespace accelopt
