// plugins/optimize/reply_parse.h - reading LLM replies: fenced code blocks (the
// executor's and fixer's kernel), the planner's one-line plan title and the
// summarizer's TITLE / DESCRIPTION / BEFORE / AFTER sections.
//
// Pure functions of the reply text (no I/O); tests/host/optimize/reply_parse_test.cc
// covers every accepted form. docs/optimize.md, "Reading replies", is the user view.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "accelopt/sdk/code_blocks.hpp"

namespace accelopt_optimize {

// Fenced blocks: the SDK's reader (accelopt/sdk/code_blocks.hpp), shared with the FlashInfer loop.
using accelopt::sdk::ExtractCodeBlocks;
using accelopt::sdk::ExtractFirstCodeBlock;
using accelopt::sdk::FencedBlock;
using accelopt::sdk::FencedBlocks;

/// The kernel module of an executor or fixer reply: the first block that
/// defines something (a line starting with `def `, `@` or `import`/`from`), else
/// the first block; diff blocks (IsDiffBlock) never count. nullopt when the
/// reply has no such block.
std::optional<std::string> ExtractKernelCode(const std::string& reply);

/// True when a fenced block is a unified diff: its info string is `diff`,
/// `patch` or `udiff`, or a body line starts with `@@`.
bool IsDiffBlock(const FencedBlock& block);

/// The unified diff of an executor reply: the first diff block (IsDiffBlock);
/// with no fenced block at all, the reply from its first `--- ` or `@@` line
/// (a bare diff). nullopt when there is none. The text is not validated
/// (accelopt.edits applies it).
std::optional<std::string> ExtractDiff(const std::string& reply);

/// A planner's move choice (prompts/move_planner_*.mustache, docs/search.md
/// "LLM moves"): the labels `MOVE: <kind>` (or `MOVE: <kind>:<site>`),
/// optional `SITE: <site>` and `PARAMS: <JSON object>`, and the `PLAN:` title.
struct MoveChoice {
  std::string kind;    ///< as written ("" when the reply has no MOVE label)
  std::string site;    ///< "" when none
  nlohmann::json params = nlohmann::json::object();  ///< PARAMS' object; {"text": raw} when not JSON
  std::string title;   ///< PlanTitle(reply)
};

/// Reads the move labels outside code blocks (first of each wins; labels
/// decorated as LabelValue accepts). Never throws; validation of the kind is
/// the caller's (accelopt.search.vocabulary).
MoveChoice ParseMoveChoice(const std::string& reply);

/// `text` without the markdown decoration a model puts around a title:
/// surrounding whitespace, `**`/`__`/`*`/`_` emphasis, leading `#` and list
/// markers, matching quotes or backticks. "**x**" -> "x", "** x" -> "x".
std::string CleanTitle(const std::string& text);

/// If `line` is a label line `NAME: value` (NAME matched case-insensitively,
/// decorated or not: "PLAN: x", "**PLAN:** x", "**Plan**: x", "## Title: x",
/// "- TITLE: x"), returns the cleaned value ("" when the value is on the next
/// line); nullopt when the line is not that label.
std::optional<std::string> LabelValue(const std::string& line, const std::string& name);

/// The one-line title of a planner reply (at most 160 characters):
/// the value of the first `PLAN:` or `TITLE:` label outside code blocks (or
/// the next non-blank line when the label stands alone), else the first bold
/// span of the first lines, else the first non-blank line; always cleaned with
/// CleanTitle. "" for a blank reply.
std::string PlanTitle(const std::string& text);

/// Parses a summarizer reply (format: prompts/summarizer_system.mustache).
/// Returns {"title", "description", "before", "after"} (strings; before/after
/// are the code blocks under the BEFORE: and AFTER: labels, else the first and
/// second blocks), or null when the reply says "No optimization found" and has
/// no title. Labels are found as LabelValue finds them; a bold first span
/// also counts as the title.
/// Throws accelopt::sdk::StageFailure{unparsable_reply} when no title is found.
nlohmann::json ParseSummary(const std::string& reply);

}  // namespace accelopt_optimize
