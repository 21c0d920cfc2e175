#include "pipeline/expression_names.h"

#include <cctype>
#include <set>

namespace accelopt {
namespace {

bool IsIdentStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool IsIdentChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// Length of a long bracket opener "[[" / "[==[" at `pos` (0 if none); `level` gets the '=' count.
size_t LongBracket(const std::string& s, size_t pos, size_t* level) {
  if (pos >= s.size() || s[pos] != '[') return 0;
  size_t i = pos + 1;
  while (i < s.size() && s[i] == '=') ++i;
  if (i < s.size() && s[i] == '[') {
    *level = i - pos - 1;
    return i - pos + 1;
  }
  return 0;
}

// Skips a long string/comment body after its opener; returns the index after the closer.
size_t SkipLong(const std::string& s, size_t pos, size_t level) {
  std::string closer = "]" + std::string(level, '=') + "]";
  size_t end = s.find(closer, pos);
  return end == std::string::npos ? s.size() : end + closer.size();
}

struct Token {
  enum Kind { kName, kString, kNumber, kSymbol } kind;
  std::string text;
  size_t offset;
};

std::vector<Token> Tokenize(const std::string& s) {
  std::vector<Token> tokens;
  size_t i = 0;
  while (i < s.size()) {
    char c = s[i];
    size_t level = 0;
    if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
    } else if (c == '-' && i + 1 < s.size() && s[i + 1] == '-') {  // comment
      i += 2;
      if (size_t open = LongBracket(s, i, &level)) {
        i = SkipLong(s, i + open, level);
      } else {
        while (i < s.size() && s[i] != '\n') ++i;
      }
    } else if (c == '"' || c == '\'') {
      size_t start = i++;
      while (i < s.size() && s[i] != c) i += s[i] == '\\' ? 2 : 1;
      ++i;
      tokens.push_back({Token::kString, "", start});
    } else if (size_t open = LongBracket(s, i, &level)) {
      tokens.push_back({Token::kString, "", i});
      i = SkipLong(s, i + open, level);
    } else if (std::isdigit(static_cast<unsigned char>(c)) ||
               (c == '.' && i + 1 < s.size() && std::isdigit(static_cast<unsigned char>(s[i + 1])))) {
      size_t start = i;
      while (i < s.size()) {
        char d = s[i];
        bool exponent_sign = (d == '+' || d == '-') && i > start && std::string("eEpP").find(s[i - 1]) != std::string::npos &&
                             !(s[start] == '0' && i > start + 1 && (s[start + 1] == 'x' || s[start + 1] == 'X') &&
                               (s[i - 1] == 'e' || s[i - 1] == 'E'));
        if (IsIdentChar(d) || d == '.' || exponent_sign) ++i;
        else break;
      }
      tokens.push_back({Token::kNumber, "", start});
    } else if (IsIdentStart(c)) {
      size_t start = i;
      while (i < s.size() && IsIdentChar(s[i])) ++i;
      tokens.push_back({Token::kName, s.substr(start, i - start), start});
    } else {
      // Multi-character symbols that matter here: "..", "...", "==", "~=", "<=", ">=", "::".
      static const char* const kLong[] = {"...", "..", "==", "~=", "<=", ">=", "::", "//", "<<", ">>"};
      std::string symbol(1, c);
      for (const char* candidate : kLong) {
        if (s.compare(i, std::char_traits<char>::length(candidate), candidate) == 0) {
          symbol = candidate;
          break;
        }
      }
      tokens.push_back({Token::kSymbol, symbol, i});
      i += symbol.size();
    }
  }
  return tokens;
}

const std::set<std::string>& Keywords() {
  static const std::set<std::string> keywords = {"and",   "break", "do",     "else", "elseif", "end",   "false",
                                                 "for",   "goto",  "if",     "in",   "local",  "nil",   "not",
                                                 "or",    "repeat", "return", "then", "true",  "until", "while"};
  return keywords;
}

}  // namespace

std::optional<std::vector<NameUse>> GlobalNames(const std::string& code) {
  std::vector<Token> tokens = Tokenize(code);
  std::vector<NameUse> uses;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const Token& token = tokens[i];
    if (token.kind != Token::kName) continue;
    if (token.text == "function") return std::nullopt;
    if (Keywords().count(token.text)) continue;
    if (i > 0 && tokens[i - 1].kind == Token::kSymbol && (tokens[i - 1].text == "." || tokens[i - 1].text == ":")) continue;
    if (i + 1 < tokens.size() && tokens[i + 1].kind == Token::kSymbol && tokens[i + 1].text == "=") continue;  // {k = v}
    NameUse use{token.text, {}, token.offset};
    for (size_t j = i + 1; j + 1 < tokens.size(); j += 2) {
      if (tokens[j].kind != Token::kSymbol || tokens[j].text != "." || tokens[j + 1].kind != Token::kName) break;
      use.fields.push_back(tokens[j + 1].text);
    }
    uses.push_back(std::move(use));
  }
  return uses;
}

}  // namespace accelopt
