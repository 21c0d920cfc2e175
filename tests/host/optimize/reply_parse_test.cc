// Reading LLM replies (plugins/optimize/reply_parse.h): every fence and label
// form a model writes.
#include <catch2/catch.hpp>

#include "accelopt/plugin_sdk.hpp"
#include "reply_parse.h"

using namespace accelopt_optimize;

namespace {

const char* kKernel = "import neuronxcc.nki as nki\n\n@nki.jit\ndef kernel(x):\n    return x";

std::string Block(const std::string& fence_line) { return "Here it is.\n\n" + fence_line + "\n" + kKernel + "\n```\nDone.\n"; }

}  // namespace

TEST_CASE("fenced blocks: info strings with spaces, any case, tildes and none", "[optimize][reply]") {
  for (const std::string fence : {"```python", "``` python", "```python ", "```  python  ", "```py", "```Python3", "```", "````python"}) {
    INFO(fence);
    std::string reply = Block(fence);
    if (fence == "````python") reply = "x\n````python\n" + std::string(kKernel) + "\n````\n";
    auto code = ExtractKernelCode(reply);
    REQUIRE(code);
    CHECK(*code == kKernel);  // never "python" as the first line
  }
  auto blocks = FencedBlocks("~~~python\na = 1\n~~~\n");
  REQUIRE(blocks.size() == 1);
  CHECK(blocks[0].info == "python");
  CHECK(blocks[0].code == "a = 1");
  CHECK(FencedBlocks("``` python \nb = 2\n```")[0].info == "python");
}

TEST_CASE("fenced blocks: backticks inside prose and inline code never open a block", "[optimize][reply]") {
  // An inline ``` before the real block used to pair with the real block's opening fence.
  std::string reply = "Wrap the kernel in ``` fences as asked:\n```python\n" + std::string(kKernel) + "\n```\n";
  auto code = ExtractKernelCode(reply);
  REQUIRE(code);
  CHECK(*code == kKernel);
  CHECK(ExtractCodeBlocks(reply).size() == 1);
  // A line that starts with ``` but holds inline code is not a fence.
  CHECK(ExtractCodeBlocks("```x = 1``` is the idea\n```python\ny = 2\n```\n") == std::vector<std::string>{"y = 2"});
  // An unclosed block is not a block; an empty one is skipped.
  CHECK_FALSE(ExtractFirstCodeBlock("```python\nx = 1\n"));
  CHECK(ExtractCodeBlocks("```\n\n```\n```python\nz = 3\n```") == std::vector<std::string>{"z = 3"});
  // A closing fence needs at least as many marks and nothing after them.
  CHECK(ExtractCodeBlocks("````\na\n```\nb\n````\n") == std::vector<std::string>{"a\n```\nb"});
}

TEST_CASE("fenced blocks: indented fences are dedented and blank edges trimmed", "[optimize][reply]") {
  std::string reply = "1. The kernel:\n   ```python\n\n   def kernel(x):\n       return x\n\n   ```\n";
  auto code = ExtractFirstCodeBlock(reply);
  REQUIRE(code);
  CHECK(*code == "def kernel(x):\n    return x");
  CHECK(*ExtractFirstCodeBlock("```python\r\na = 1\r\n```\r\n") == "a = 1");  // CRLF replies
}

TEST_CASE("the kernel block is the first one that defines something", "[optimize][reply]") {
  std::string reply = "The change:\n```python\nx_tile = nl.load(x[i])\n```\nThe whole kernel:\n```python\n" +
                      std::string(kKernel) + "\n```\nUsage:\n```\nkernel(a)\n```\n";
  CHECK(*ExtractKernelCode(reply) == kKernel);
  CHECK(*ExtractFirstCodeBlock(reply) == "x_tile = nl.load(x[i])");
  CHECK(*ExtractKernelCode("```\nonly = 1\n```") == "only = 1");  // no definition anywhere: the first block
  CHECK_FALSE(ExtractKernelCode("no code at all"));
}

TEST_CASE("titles lose their markdown decoration", "[optimize][reply]") {
  CHECK(CleanTitle("**Fuse the loads**") == "Fuse the loads");
  CHECK(CleanTitle("** Fuse the loads") == "Fuse the loads");
  CHECK(CleanTitle("## Fuse") == "Fuse");
  CHECK(CleanTitle("- __Fuse__ ") == "Fuse");
  CHECK(CleanTitle("\"Fuse\"") == "Fuse");
  CHECK(CleanTitle("`Fuse`") == "Fuse");
  CHECK(CleanTitle("Use `nl.load`") == "Use `nl.load`");  // inline code at the end stays
  CHECK(LabelValue("**PLAN:** keep x", "PLAN") == std::optional<std::string>("keep x"));
  CHECK(LabelValue("**Plan**: keep x", "PLAN") == std::optional<std::string>("keep x"));
  CHECK(LabelValue("plan : keep x", "PLAN") == std::optional<std::string>("keep x"));
  CHECK(LabelValue("The plan: keep x", "PLAN") == std::nullopt);
  CHECK(LabelValue("PLANS: x", "PLAN") == std::nullopt);
}

TEST_CASE("plan titles: every label form, a label alone, bold spans and plain first lines", "[optimize][reply]") {
  CHECK(PlanTitle("PLAN: keep x on chip\nBecause ...") == "keep x on chip");
  CHECK(PlanTitle("**PLAN:** keep x on chip\nBecause ...") == "keep x on chip");
  CHECK(PlanTitle("**PLAN**: keep x on chip") == "keep x on chip");
  CHECK(PlanTitle("PLAN: **keep x on chip**") == "keep x on chip");
  CHECK(PlanTitle("## Plan: keep x on chip") == "keep x on chip");
  CHECK(PlanTitle("**TITLE:** keep x on chip") == "keep x on chip");
  CHECK(PlanTitle("Thinking first.\n\nPLAN:\n\n**keep x on chip**\n") == "keep x on chip");
  CHECK(PlanTitle("```python\nPLAN: not this\n```\nPLAN: this one") == "this one");
  CHECK(PlanTitle("I suggest **fusing the steps** here.") == "fusing the steps");
  CHECK(PlanTitle("\n\n### Fuse the steps\nmore") == "Fuse the steps");
  CHECK(PlanTitle("   \n") == "");
  std::string long_title = "PLAN: " + std::string(300, 'a');
  CHECK(PlanTitle(long_title).size() == 163);
}

TEST_CASE("summaries: label forms, sections and code blocks by label", "[optimize][reply]") {
  const std::string body =
      "DESCRIPTION:\nThe slow kernel does A; the fast one B, 1.5x faster.\n"
      "BEFORE:\n```python\nslow = 1\n```\nAFTER:\n```python\nfast = 1\n```\n";
  for (const std::string title_line : {"TITLE: Fuse the steps", "**TITLE:** Fuse the steps", "**Title**: Fuse the steps",
                                       "TITLE: **Fuse the steps**", "## TITLE: Fuse the steps", "TITLE:\nFuse the steps"}) {
    INFO(title_line);
    auto parsed = ParseSummary(title_line + "\n" + body);
    REQUIRE(parsed.is_object());
    CHECK(parsed["title"] == "Fuse the steps");
    CHECK(parsed["description"] == "The slow kernel does A; the fast one B, 1.5x faster.");
    CHECK(parsed["before"] == "slow = 1");
    CHECK(parsed["after"] == "fast = 1");
  }
  // Bold labels, an example block inside the description: BEFORE/AFTER come from their labels.
  auto labelled = ParseSummary(
      "**TITLE:** Fuse\n**DESCRIPTION:**\nLike this:\n```python\nexample = 0\n```\nfaster.\n"
      "**BEFORE:**\n```python\nslow = 1\n```\n**AFTER:**\n```python\nfast = 1\n```\n");
  CHECK(labelled["before"] == "slow = 1");
  CHECK(labelled["after"] == "fast = 1");
  CHECK(labelled["description"] == "Like this:\nfaster.");
  // No labels at all: a bold title, prose and the first two blocks.
  auto loose = ParseSummary("**Fuse the steps**\nIt is faster.\n```\na\n```\n```\nb\n```\n");
  CHECK(loose["title"] == "Fuse the steps");
  CHECK(loose["description"] == "It is faster.");
  CHECK(loose["before"] == "a");
  CHECK(loose["after"] == "b");
}

TEST_CASE("summaries: no optimization found, and replies without a title", "[optimize][reply]") {
  CHECK(ParseSummary("No optimization found").is_null());
  CHECK(ParseSummary("  No optimization found.\n").is_null());
  CHECK(ParseSummary("**No optimization found**").is_null());
  CHECK(ParseSummary("TITLE: No optimization found").is_null());
  CHECK_THROWS_AS(ParseSummary("it is faster somehow"), accelopt::sdk::StageFailure);
  try {
    ParseSummary("");
    FAIL("no title");
  } catch (const accelopt::sdk::StageFailure& failure) {
    CHECK(failure.kind == "unparsable_reply");
  }
}

TEST_CASE("diff blocks: found by info string or hunk header, never taken for the kernel", "[optimize][reply]") {
  const std::string diff = "--- a/kernel.py\n+++ b/kernel.py\n@@ -1,2 +1,2 @@\n def kernel(x):\n-    return x\n+    return 2 * x";
  const std::string reply = "The change:\n```diff\n" + diff + "\n```\nOr the whole kernel:\n```python\n" + kKernel + "\n```\n";
  REQUIRE(ExtractDiff(reply));
  CHECK(*ExtractDiff(reply) == diff);
  CHECK(*ExtractKernelCode(reply) == kKernel);
  // No info string: the @@ line makes it a diff; a lone diff is no kernel.
  CHECK(*ExtractDiff("```\n@@\n-a\n+b\n```") == "@@\n-a\n+b");
  CHECK_FALSE(ExtractKernelCode("```\n@@ -1 +1 @@\n-a\n+b\n```"));
  CHECK(IsDiffBlock({"patch", "x"}));
  CHECK_FALSE(IsDiffBlock({"python", kKernel}));
  // A bare diff without fences, after some prose.
  CHECK(*ExtractDiff("Here:\n--- a/k.py\n+++ b/k.py\n@@ -1 +1 @@\n-a\n+b\n") == "--- a/k.py\n+++ b/k.py\n@@ -1 +1 @@\n-a\n+b\n");
  CHECK_FALSE(ExtractDiff("--- a note\nno hunk here"));
  CHECK_FALSE(ExtractDiff(Block("```python")));
}

TEST_CASE("move choices: kind, site and parameters from labelled lines", "[optimize][reply]") {
  auto m = ParseMoveChoice("**MOVE:** fuse_silu\nSITE: y_tile\nPARAMS: {\"tile\": 256}\nPLAN: fuse the silu chain\nOne activation.");
  CHECK(m.kind == "fuse_silu");
  CHECK(m.site == "y_tile");
  CHECK(m.params == nlohmann::json({{"tile", 256}}));
  CHECK(m.title == "fuse the silu chain");
  auto id = ParseMoveChoice("MOVE: `widen_loop:j*2`\nPLAN: wider tiles\n```python\nMOVE: not_this\n```");
  CHECK(id.kind == "widen_loop");
  CHECK(id.site == "j*2");
  auto raw = ParseMoveChoice("MOVE: tunable\nPARAMS: tile 256 please\nPLAN: x");
  CHECK(raw.params == nlohmann::json({{"text", "tile 256 please"}}));
  auto none = ParseMoveChoice("PLAN: something free-form\nNo move named.");
  CHECK(none.kind.empty());
  CHECK(none.params == nlohmann::json::object());
  CHECK(none.title == "something free-form");
}
