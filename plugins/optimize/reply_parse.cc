#include "reply_parse.h"

#include <cctype>
#include <sstream>

#include "accelopt/plugin_sdk.hpp"

namespace accelopt_optimize {
namespace {

using nlohmann::json;

using namespace accelopt::sdk::code_blocks;  // SplitLines, Trim, Blank, JoinTrimmed, Layout, Scan

std::string Lower(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

bool IsDecoration(char c) { return c == '*' || c == '_' || c == '#' || c == '>' || c == '`'; }

}  // namespace

bool IsDiffBlock(const FencedBlock& block) {
  const std::string info = Lower(block.info);
  if (info == "diff" || info == "patch" || info == "udiff") return true;
  for (const auto& line : SplitLines(block.code)) {
    if (line.rfind("@@", 0) == 0) return true;
  }
  return false;
}

std::optional<std::string> ExtractDiff(const std::string& reply) {
  auto blocks = FencedBlocks(reply);
  for (const auto& block : blocks) {
    if (IsDiffBlock(block)) return block.code;
  }
  if (!blocks.empty()) return std::nullopt;
  const auto lines = SplitLines(reply);
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].rfind("--- ", 0) == 0 || lines[i].rfind("@@", 0) == 0) {
      bool hunk = false;
      for (size_t k = i; k < lines.size() && !hunk; ++k) hunk = lines[k].rfind("@@", 0) == 0;
      if (!hunk) return std::nullopt;
      std::string out;
      for (size_t k = i; k < lines.size(); ++k) out += lines[k] + "\n";
      return out;
    }
  }
  return std::nullopt;
}

MoveChoice ParseMoveChoice(const std::string& reply) {
  MoveChoice choice;
  Layout layout = Scan(reply);
  bool have_site = false, have_params = false;
  for (size_t i = 0; i < layout.lines.size(); ++i) {
    if (layout.owner[i] != -1) continue;
    const std::string& line = layout.lines[i];
    if (choice.kind.empty()) {
      if (auto v = LabelValue(line, "MOVE"); v && !v->empty()) {
        std::string value = *v;
        const size_t colon = value.find(':');
        if (colon != std::string::npos) {
          if (!have_site) choice.site = Trim(value.substr(colon + 1));
          have_site = have_site || !choice.site.empty();
          value = value.substr(0, colon);
        }
        choice.kind = CleanTitle(value);
        continue;
      }
    }
    if (!have_site) {
      if (auto v = LabelValue(line, "SITE"); v && !v->empty()) {
        choice.site = *v;
        have_site = true;
        continue;
      }
    }
    if (!have_params) {
      // PARAMS takes the raw text after the label (CleanTitle would strip JSON quotes).
      if (auto v = LabelValue(line, "PARAMS"); v && !v->empty()) {
        const size_t colon = line.find(':');
        std::string raw = Trim(line.substr(colon + 1));
        while (!raw.empty() && (raw.front() == '`' || raw.front() == '*')) raw.erase(0, 1);
        while (!raw.empty() && (raw.back() == '`' || raw.back() == '*')) raw.pop_back();
        raw = Trim(raw);
        json parsed = json::parse(raw, nullptr, false);
        choice.params = parsed.is_object() ? parsed : json({{"text", raw}});
        have_params = true;
      }
    }
  }
  choice.title = PlanTitle(reply);
  return choice;
}

std::optional<std::string> ExtractKernelCode(const std::string& reply) {
  auto all = FencedBlocks(reply);
  std::vector<FencedBlock> blocks;
  for (auto& block : all) {
    if (!IsDiffBlock(block)) blocks.push_back(std::move(block));
  }
  if (blocks.empty()) return std::nullopt;
  for (const auto& block : blocks) {
    for (const auto& line : SplitLines(block.code)) {
      if (line.rfind("def ", 0) == 0 || line.rfind("@", 0) == 0 || line.rfind("import ", 0) == 0 ||
          line.rfind("from ", 0) == 0) {
        return block.code;
      }
    }
  }
  return blocks.front().code;
}

std::string CleanTitle(const std::string& text) {
  std::string t = Trim(text);
  auto starts = [&](const char* p) { return t.rfind(p, 0) == 0; };
  auto ends = [&](const char* p) {
    const size_t n = std::char_traits<char>::length(p);
    return t.size() >= n && t.compare(t.size() - n, n, p) == 0;
  };
  // Leading emphasis, headings, quotes and list markers ("## ", "**", "- ").
  while (!t.empty()) {
    if (t[0] == '*' || t[0] == '#' || t[0] == '>' || std::isspace(static_cast<unsigned char>(t[0]))) t.erase(0, 1);
    else if (starts("__") || starts("- ") || starts("+ ")) t.erase(0, 2);
    else break;
  }
  // Trailing emphasis ("x**", "x__").
  while (!t.empty()) {
    if (t.back() == '*' || std::isspace(static_cast<unsigned char>(t.back()))) t.pop_back();
    else if (ends("__")) t.resize(t.size() - 2);
    else break;
  }
  // A title wholly in quotes or backticks.
  for (char q : {'"', '\'', '`'}) {
    if (t.size() >= 2 && t.front() == q && t.back() == q && t.find(q, 1) == t.size() - 1) t = Trim(t.substr(1, t.size() - 2));
  }
  return t;
}

std::optional<std::string> LabelValue(const std::string& line, const std::string& name) {
  std::string t = Trim(line);
  // Leading decoration and list markers.
  size_t i = 0;
  while (i < t.size()) {
    if (IsDecoration(t[i]) || t[i] == ' ' || t[i] == '\t') {
      ++i;
    } else if ((t[i] == '-' || t[i] == '+') && i + 1 < t.size() && t[i + 1] == ' ') {
      i += 2;
    } else {
      break;
    }
  }
  if (Lower(t.substr(i, name.size())) != Lower(name)) return std::nullopt;
  size_t j = i + name.size();
  while (j < t.size() && (t[j] == '*' || t[j] == '_' || t[j] == ' ')) ++j;  // "**Plan**:" / "PLAN :"
  if (j >= t.size() || t[j] != ':') return std::nullopt;
  return CleanTitle(t.substr(j + 1));
}

std::string PlanTitle(const std::string& text) {
  constexpr size_t kMaxChars = 160;
  auto limit = [&](std::string title) {
    if (title.size() > kMaxChars) title = title.substr(0, kMaxChars) + "...";
    return title;
  };
  Layout layout = Scan(text);
  const auto& lines = layout.lines;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (layout.owner[i] != -1) continue;
    for (const char* label : {"PLAN", "TITLE"}) {
      auto value = LabelValue(lines[i], label);
      if (!value) continue;
      if (!value->empty()) return limit(*value);
      for (size_t k = i + 1; k < lines.size(); ++k) {  // "PLAN:" alone: the next prose line
        if (layout.owner[k] == -1 && !Blank(lines[k])) return limit(CleanTitle(lines[k]));
      }
    }
  }
  // A bold span near the start ("**Keep x on chip**").
  for (size_t i = 0, seen = 0; i < lines.size() && seen < 5; ++i) {
    if (layout.owner[i] != -1 || Blank(lines[i])) continue;
    ++seen;
    auto bold = lines[i].find("**");
    auto end = bold == std::string::npos ? std::string::npos : lines[i].find("**", bold + 2);
    if (end != std::string::npos && end > bold + 2) return limit(CleanTitle(lines[i].substr(bold + 2, end - bold - 2)));
  }
  for (size_t i = 0; i < lines.size(); ++i) {
    if (layout.owner[i] == -1 && !Blank(lines[i])) return limit(CleanTitle(lines[i]));
  }
  return "";
}

json ParseSummary(const std::string& reply) {
  Layout layout = Scan(reply);
  const auto& lines = layout.lines;
  enum class Section { kNone, kTitle, kDescription, kBefore, kAfter };
  Section section = Section::kNone;
  std::string title;
  std::vector<std::string> description;
  int before = -1, after = -1;
  for (size_t i = 0; i < lines.size(); ++i) {
    const int owner = layout.owner[i];
    if (owner >= 0) {  // a line of a code block
      if (section == Section::kBefore && before < 0) before = owner;
      if (section == Section::kAfter && after < 0 && owner != before) after = owner;
      continue;
    }
    if (owner != -1) continue;  // fence lines, empty blocks
    const std::string& line = lines[i];
    if (auto v = LabelValue(line, "TITLE"); v && title.empty()) {
      title = *v;
      section = Section::kTitle;
      continue;
    }
    if (auto v = LabelValue(line, "DESCRIPTION")) {
      section = Section::kDescription;
      if (!v->empty()) description.push_back(*v);
      continue;
    }
    if (LabelValue(line, "BEFORE") || LabelValue(line, "Slow kernel") || LabelValue(line, "Original code")) {
      section = Section::kBefore;
      continue;
    }
    if (LabelValue(line, "AFTER") || LabelValue(line, "Fast kernel") || LabelValue(line, "Optimized code")) {
      section = Section::kAfter;
      continue;
    }
    if (section == Section::kTitle && title.empty() && !Blank(line)) {
      title = CleanTitle(line);  // "TITLE:" alone, the title on the next line
      continue;
    }
    if (section == Section::kDescription) description.push_back(line);
  }
  if (title.empty()) {
    for (size_t i = 0; i < lines.size(); ++i) {  // a bold span outside code
      if (layout.owner[i] != -1) continue;
      auto bold = lines[i].find("**");
      auto end = bold == std::string::npos ? std::string::npos : lines[i].find("**", bold + 2);
      if (end != std::string::npos && end > bold + 2) {
        title = CleanTitle(lines[i].substr(bold + 2, end - bold - 2));
        break;
      }
    }
  }
  if (Lower(title) == "no optimization found") return nullptr;
  if (title.empty()) {
    if (reply.find("No optimization found") != std::string::npos) return nullptr;
    throw accelopt::sdk::StageFailure("unparsable_reply", "the summary has no TITLE: line or bold title");
  }
  std::string text = JoinTrimmed(description);
  if (text.empty()) {
    // No DESCRIPTION: section: the prose outside code blocks, minus the title and labels.
    std::vector<std::string> prose;
    for (size_t i = 0; i < lines.size(); ++i) {
      if (layout.owner[i] != -1) continue;
      const std::string& line = lines[i];
      if (line.find(title) != std::string::npos || LabelValue(line, "TITLE") || LabelValue(line, "BEFORE") ||
          LabelValue(line, "AFTER")) {
        continue;
      }
      prose.push_back(line);
    }
    text = JoinTrimmed(prose);
  }
  const auto& blocks = layout.blocks;
  if (before < 0 && after < 0) {
    before = blocks.size() > 0 ? 0 : -1;
    after = blocks.size() > 1 ? 1 : -1;
  } else if (after < 0 && before >= 0 && static_cast<size_t>(before + 1) < blocks.size()) {
    after = before + 1;
  }
  return {{"title", title},
          {"description", text},
          {"before", before >= 0 ? blocks[before].code : ""},
          {"after", after >= 0 ? blocks[after].code : ""}};
}

}  // namespace accelopt_optimize
