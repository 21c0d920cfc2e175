// accelopt/sdk/code_blocks.hpp - fenced code blocks of an LLM reply, the one reader every
// plugin uses (the NKI loop's executor, fixer and summarizer replies, FlashInfer-Bench's
// executor replies). Pure functions of the text; tests/host/optimize/reply_parse_test.cc covers
// every accepted form, docs/optimize.md "Reading replies" is the user view.
#pragma once

#include <cctype>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace accelopt::sdk {

/// One fenced block of a reply: `info` is the trimmed info string of the
/// opening fence ("python", "py", "" ...), `code` the body.
struct FencedBlock {
  std::string info;
  std::string code;
};

namespace code_blocks {

inline std::vector<std::string> SplitLines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(line);
  }
  return lines;
}

inline std::string Trim(const std::string& text) {
  size_t a = text.find_first_not_of(" \t\r\n");
  if (a == std::string::npos) return "";
  size_t b = text.find_last_not_of(" \t\r\n");
  return text.substr(a, b - a + 1);
}

inline bool Blank(const std::string& line) { return line.find_first_not_of(" \t\r") == std::string::npos; }

// A fence line: indentation, a run of >= 3 '`' or '~', then the rest.
struct Fence {
  size_t indent = 0;
  char mark = 0;
  size_t length = 0;
  std::string rest;  // after the run, untrimmed
};

inline std::optional<Fence> AsFence(const std::string& line) {
  size_t i = line.find_first_not_of(" \t");
  if (i == std::string::npos || (line[i] != '`' && line[i] != '~')) return std::nullopt;
  Fence fence;
  fence.indent = i;
  fence.mark = line[i];
  size_t j = i;
  while (j < line.size() && line[j] == fence.mark) ++j;
  fence.length = j - i;
  if (fence.length < 3) return std::nullopt;
  fence.rest = line.substr(j);
  return fence;
}

// Removes up to `indent` leading spaces (a tab counts as one).
inline std::string Dedent(const std::string& line, size_t indent) {
  size_t k = 0;
  while (k < indent && k < line.size() && (line[k] == ' ' || line[k] == '\t')) ++k;
  return line.substr(k);
}

inline std::string JoinTrimmed(const std::vector<std::string>& lines) {
  size_t begin = 0, end = lines.size();
  while (begin < end && Blank(lines[begin])) ++begin;
  while (end > begin && Blank(lines[end - 1])) --end;
  std::string out;
  for (size_t i = begin; i < end; ++i) out += lines[i] + (i + 1 < end ? "\n" : "");
  while (!out.empty() && std::isspace(static_cast<unsigned char>(out.back()))) out.pop_back();
  return out;
}

// Each line of `reply` with the index of the fenced block it belongs to (-1:
// prose, -2: a fence line itself); blocks as FencedBlocks returns them
// (unclosed ones become prose).
struct Layout {
  std::vector<std::string> lines;
  std::vector<int> owner;
  std::vector<FencedBlock> blocks;
};

inline Layout Scan(const std::string& reply) {
  Layout layout;
  layout.lines = SplitLines(reply);
  layout.owner.assign(layout.lines.size(), -1);
  size_t i = 0;
  while (i < layout.lines.size()) {
    auto open = AsFence(layout.lines[i]);
    // Backtick fences may not carry a backtick in their info string.
    if (!open || (open->mark == '`' && open->rest.find('`') != std::string::npos)) {
      ++i;
      continue;
    }
    size_t close = i + 1;
    for (; close < layout.lines.size(); ++close) {
      auto end = AsFence(layout.lines[close]);
      if (end && end->mark == open->mark && end->length >= open->length && Blank(end->rest)) break;
    }
    if (close >= layout.lines.size()) break;  // unclosed: the rest is prose
    std::vector<std::string> body;
    for (size_t k = i + 1; k < close; ++k) body.push_back(Dedent(layout.lines[k], open->indent));
    std::string code = JoinTrimmed(body);
    const int index = code.empty() ? -3 : static_cast<int>(layout.blocks.size());
    if (!code.empty()) layout.blocks.push_back({Trim(open->rest), code});
    layout.owner[i] = layout.owner[close] = -2;
    for (size_t k = i + 1; k < close; ++k) layout.owner[k] = index;
    i = close + 1;
  }
  return layout;
}

}  // namespace code_blocks

/// Every complete fenced block of `reply`, in order.
///
/// A fence is a line whose first non-blank characters are three or more
/// backticks (or tildes); the rest of the opening line is the info string,
/// which may be padded with spaces ("``` python", "```python ") and may not
/// contain a backtick (so "```x = 1```" is inline code, not a fence). The block
/// ends at the next line holding only the same fence character, at least as many
/// times. Backticks inside a line of prose never open a block. The fence's
/// indentation is removed from the body lines (blocks inside list items); blank
/// lines around the body are dropped. Empty and unclosed blocks are skipped.
inline std::vector<FencedBlock> FencedBlocks(const std::string& reply) { return code_blocks::Scan(reply).blocks; }

/// The bodies of FencedBlocks(reply), in order.
inline std::vector<std::string> ExtractCodeBlocks(const std::string& reply) {
  std::vector<std::string> bodies;
  for (auto& block : FencedBlocks(reply)) bodies.push_back(std::move(block.code));
  return bodies;
}

/// The first non-empty fenced block's body; nullopt when there is none.
inline std::optional<std::string> ExtractFirstCodeBlock(const std::string& reply) {
  auto blocks = FencedBlocks(reply);
  if (blocks.empty()) return std::nullopt;
  return blocks.front().code;
}

}  // namespace accelopt::sdk
