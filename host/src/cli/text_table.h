// text_table.h - aligned text tables and bars for terminal output (runs, compare).
#pragma once

#include <optional>
#include <set>
#include <string>
#include <vector>

namespace accelopt::cli {

/// Rows under a header, columns padded to their widest cell (UTF-8 aware);
/// columns in `right` are right-aligned. Each line ends with '\n'.
std::string FormatTable(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows,
                        const std::set<size_t>& right = {});

/// A horizontal bar of `value / max * width` cells drawn with block
/// characters (eighths), padded with spaces to `width`; "" for a missing value.
std::string Bar(std::optional<double> value, double max, int width);

/// A number with `digits` significant digits plus `suffix`, or "-".
std::string Number(std::optional<double> value, int digits = 4, const std::string& suffix = "");

/// 1h02m03s / 2m03s / 4.2s, or "-".
std::string Duration(std::optional<double> seconds);

}  // namespace accelopt::cli
