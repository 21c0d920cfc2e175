#include "core/text.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace accelopt {

size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::optional<std::string> DidYouMean(std::string_view word, const std::vector<std::string>& candidates) {
  std::optional<std::string> best;
  size_t best_distance = std::max<size_t>(2, word.size() / 3) + 1;  // transpositions cost 2
  for (const auto& candidate : candidates) {
    size_t distance = EditDistance(word, candidate);
    if (distance < best_distance) {
      best_distance = distance;
      best = candidate;
    }
  }
  return best;
}

std::string DidYouMeanSuffix(std::string_view word, const std::vector<std::string>& candidates) {
  auto best = DidYouMean(word, candidates);
  return best ? " (did you mean '" + *best + "'?)" : "";
}

std::optional<std::chrono::milliseconds> ParseDuration(std::string_view text, std::string* error) {
  auto fail = [&](const std::string& why) -> std::optional<std::chrono::milliseconds> {
    if (error) *error = why;
    return std::nullopt;
  };
  double ms = 0;
  bool any = false;
  size_t i = 0;
  auto skip_spaces = [&] {
    while (i < text.size() && text[i] == ' ') ++i;
  };
  while (true) {
    skip_spaces();
    if (i == text.size()) break;
    size_t start = i;
    while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
    if (start == i) return fail(text[i] == '-' ? "must not be negative" : "expected a number");
    double number = 0;
    try {
      size_t used = 0;
      std::string digits(text.substr(start, i - start));
      number = std::stod(digits, &used);
      if (used != digits.size()) return fail("malformed number");
    } catch (const std::logic_error&) {
      return fail("malformed number");
    }
    skip_spaces();
    size_t unit_start = i;
    while (i < text.size() && std::isalpha(static_cast<unsigned char>(text[i]))) ++i;
    std::string_view unit = text.substr(unit_start, i - unit_start);
    double scale = 0;
    if (unit.empty()) {
      skip_spaces();
      if (any || i != text.size()) return fail("missing unit");
      scale = 1000.0;
    } else if (unit == "ms") {
      scale = 1.0;
    } else if (unit == "s") {
      scale = 1000.0;
    } else if (unit == "m" || unit == "min") {
      scale = 60000.0;
    } else if (unit == "h") {
      scale = 3600000.0;
    } else {
      return fail("unknown unit '" + std::string(unit) + "'");
    }
    ms += number * scale;
    any = true;
  }
  if (!any) return fail("empty");
  if (!std::isfinite(ms) || ms > 1e12) return fail("too long");
  return std::chrono::milliseconds(static_cast<int64_t>(std::llround(ms)));
}

void WriteFileAtomic(const std::filesystem::path& path, std::string_view content) {
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path());
  std::string tmp = path.string() + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw std::runtime_error("cannot write " + tmp + ": " + std::strerror(errno));
  const char* data = content.data();
  size_t left = content.size();
  while (left > 0) {
    ssize_t n = ::write(fd, data, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      ::close(fd);
      throw std::runtime_error("cannot write " + tmp + ": " + std::strerror(errno));
    }
    data += n;
    left -= static_cast<size_t>(n);
  }
  ::fsync(fd);
  ::close(fd);
  std::filesystem::rename(tmp, path);
}

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path.string() + ": " + std::strerror(errno));
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

size_t FindInvalidUtf8(std::string_view text) {
  const auto* begin = reinterpret_cast<const unsigned char*>(text.data());
  const auto* end = begin + text.size();
  for (const unsigned char* p = begin; p < end;) {
    unsigned char c = *p;
    if (c < 0x80) {
      ++p;
      continue;
    }
    int extra;
    uint32_t cp;
    if ((c & 0xE0) == 0xC0) {
      extra = 1;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      extra = 2;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      extra = 3;
      cp = c & 0x07;
    } else {
      return static_cast<size_t>(p - begin);
    }
    if (end - p <= extra) return static_cast<size_t>(p - begin);
    for (int i = 1; i <= extra; ++i) {
      if ((p[i] & 0xC0) != 0x80) return static_cast<size_t>(p - begin);
      cp = (cp << 6) | (p[i] & 0x3F);
    }
    static constexpr uint32_t kMin[] = {0, 0x80, 0x800, 0x10000};
    if (cp < kMin[extra] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return static_cast<size_t>(p - begin);
    p += extra + 1;
  }
  return std::string_view::npos;
}

}  // namespace accelopt
