#include "pipeline/yaml_input.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sstream>
#include <unordered_map>
#include <vector>

#include <yaml-cpp/anchor.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/parser.h>

#include "core/bounded_file.h"
#include "core/errors.h"

namespace accelopt {
namespace {

// Thrown from the event handler to stop the parse at a bad alias.
struct ExpansionError {
  YAML::Mark mark;
  std::string message;
};

// Counts the nodes of a document as if every alias were expanded. Each
// anchored node remembers its expanded size; an alias adds that size.
class ExpansionCounter : public YAML::EventHandler {
 public:
  explicit ExpansionCounter(std::uint64_t max_nodes) : max_nodes_(max_nodes) {}

  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& mark, YAML::anchor_t anchor) override { Leaf(mark, anchor); }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor, const std::string&) override {
    Leaf(mark, anchor);
  }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    for (const auto& open : open_) {
      if (open.anchor == anchor && anchor != YAML::NullAnchor) {
        throw ExpansionError{mark, "alias refers to the node that contains it (a recursive structure)"};
      }
    }
    auto it = sizes_.find(anchor);
    Add(mark, it == sizes_.end() ? 1 : it->second);
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor, YAML::EmitterStyle::value) override {
    Open(mark, anchor);
  }
  void OnSequenceEnd() override { Close(); }
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor, YAML::EmitterStyle::value) override {
    Open(mark, anchor);
  }
  void OnMapEnd() override { Close(); }

 private:
  struct Open_ {
    YAML::anchor_t anchor;
    std::uint64_t start;
  };

  void Add(const YAML::Mark& mark, std::uint64_t nodes) {
    total_ += nodes;
    if (total_ > max_nodes_) {
      throw ExpansionError{mark, "the document expands to more than " + std::to_string(max_nodes_) +
                                     " nodes once its aliases are expanded (alias bomb?)"};
    }
  }
  void Leaf(const YAML::Mark& mark, YAML::anchor_t anchor) {
    Add(mark, 1);
    if (anchor != YAML::NullAnchor) sizes_[anchor] = 1;
  }
  void Open(const YAML::Mark& mark, YAML::anchor_t anchor) {
    open_.push_back({anchor, total_});
    Add(mark, 1);
  }
  void Close() {
    if (open_.empty()) return;
    Open_ open = open_.back();
    open_.pop_back();
    if (open.anchor != YAML::NullAnchor) sizes_[open.anchor] = total_ - open.start;
  }

  std::uint64_t max_nodes_;
  std::uint64_t total_ = 0;
  std::vector<Open_> open_;
  std::unordered_map<YAML::anchor_t, std::uint64_t> sizes_;
};

SourceLocation At(const std::string& file, const YAML::Mark& mark) {
  if (mark.is_null()) return {file, 0, 0};
  return {file, mark.line + 1, mark.column + 1};
}

// Escapes such as "\uD800" decode to bytes that are not valid UTF-8; every
// scalar (keys included) is checked once the tree is built.
void CheckScalars(const YAML::Node& node, const std::string& file, std::vector<Diagnostic>* diagnostics) {
  if (node.IsScalar()) {
    if (FindInvalidUtf8(node.Scalar()) != std::string_view::npos) {
      diagnostics->push_back({At(file, node.Mark()), "invalid UTF-8 (from an escape sequence)"});
    }
  } else if (node.IsSequence()) {
    for (const auto& child : node) CheckScalars(child, file, diagnostics);
  } else if (node.IsMap()) {
    for (auto it = node.begin(); it != node.end(); ++it) {
      CheckScalars(it->first, file, diagnostics);
      CheckScalars(it->second, file, diagnostics);
    }
  }
}

}  // namespace


std::string ReadPipelineFile(const std::filesystem::path& path, std::uintmax_t max_bytes) {
  try {
    return ReadRegularFile(path, max_bytes, "pipeline files");
  } catch (const std::runtime_error& error) {
    throw ConfigError(SourceLocation{path.string()}, error.what());
  }
}

YAML::Node LoadYamlChecked(const std::string& text, const std::string& file, std::uint64_t max_nodes) {
  if (size_t bad = FindInvalidUtf8(text); bad != std::string_view::npos) {
    int line = 1;
    size_t line_start = 0;
    for (size_t i = 0; i < bad; ++i) {
      if (text[i] == '\n') {
        ++line;
        line_start = i + 1;
      }
    }
    throw ConfigError(SourceLocation{file, line, static_cast<int>(bad - line_start + 1)}, "invalid UTF-8");
  }
  try {
    std::istringstream stream(text);
    YAML::Parser parser(stream);
    ExpansionCounter counter(max_nodes);
    parser.HandleNextDocument(counter);
  } catch (const ExpansionError& error) {
    throw ConfigError(At(file, error.mark), error.message);
  } catch (const YAML::ParserException& error) {
    throw ConfigError(At(file, error.mark), "invalid YAML: " + error.msg);
  }
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::ParserException& error) {
    throw ConfigError(At(file, error.mark), "invalid YAML: " + error.msg);
  }
  std::vector<Diagnostic> diagnostics;
  CheckScalars(root, file, &diagnostics);
  if (!diagnostics.empty()) throw ConfigError(diagnostics);
  return root;
}

}  // namespace accelopt
