#include "source_text.h"

#include <cctype>
#include <cstdint>
#include <cstdio>
#include <sstream>
#include <vector>

namespace accelopt_optimize {

using nlohmann::json;

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
  uint64_t hash = 14695981039346656037ULL;  // FNV-1a 64 offset basis
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

}  // namespace accelopt_optimize
