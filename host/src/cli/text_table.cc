#include "cli/text_table.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace accelopt::cli {
namespace {

// Display width: UTF-8 code points (the block characters and '·' are one cell each).
size_t Width(const std::string& text) {
  size_t width = 0;
  for (unsigned char c : text) width += (c & 0xC0) != 0x80;
  return width;
}

}  // namespace

std::string FormatTable(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows,
                        const std::set<size_t>& right) {
  std::vector<size_t> widths(header.size(), 0);
  auto measure = [&](const std::vector<std::string>& row) {
    for (size_t i = 0; i < row.size() && i < widths.size(); ++i) widths[i] = std::max(widths[i], Width(row[i]));
  };
  measure(header);
  for (const auto& row : rows) measure(row);
  auto line = [&](const std::vector<std::string>& row) {
    std::string out;
    for (size_t i = 0; i < widths.size(); ++i) {
      const std::string cell = i < row.size() ? row[i] : "";
      const std::string pad(widths[i] - Width(cell), ' ');
      out += right.count(i) ? pad + cell : cell + (i + 1 < widths.size() ? pad : "");
      if (i + 1 < widths.size()) out += "  ";
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    return out + "\n";
  };
  std::string out = line(header);
  std::vector<std::string> rule;
  for (size_t width : widths) rule.push_back(std::string(width, '-'));
  out += line(rule);
  for (const auto& row : rows) out += line(row);
  return out;
}

std::string Bar(std::optional<double> value, double max, int width) {
  if (!value || !(max > 0) || !std::isfinite(*value)) return "";
  static const char* kEighths[] = {"", "▏", "▎", "▍", "▌", "▋", "▊", "▉"};
  const int eighths = static_cast<int>(std::lround(std::clamp(*value / max, 0.0, 1.0) * width * 8));
  std::string out;
  for (int i = 0; i < eighths / 8; ++i) out += "█";
  out += kEighths[eighths % 8];
  int cells = eighths / 8 + (eighths % 8 ? 1 : 0);
  return out + std::string(static_cast<size_t>(std::max(0, width - cells)), ' ');
}

std::string Number(std::optional<double> value, int digits, const std::string& suffix) {
  if (!value) return "-";
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "%.*g", digits, *value);
  return buffer + suffix;
}

std::string Duration(std::optional<double> seconds) {
  if (!seconds) return "-";
  char buffer[64];
  if (*seconds < 60) {
    std::snprintf(buffer, sizeof(buffer), "%.1fs", *seconds);
    return buffer;
  }
  long total = std::lround(*seconds);
  long hours = total / 3600, minutes = (total % 3600) / 60, secs = total % 60;
  if (hours) std::snprintf(buffer, sizeof(buffer), "%ldh%02ldm%02lds", hours, minutes, secs);
  else std::snprintf(buffer, sizeof(buffer), "%ldm%02lds", minutes, secs);
  return buffer;
}

}  // namespace accelopt::cli
