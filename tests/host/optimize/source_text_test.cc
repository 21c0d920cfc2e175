// Kernel source text helpers of the optimization stages (plugins/optimize/source_text.h).
#include <catch2/catch.hpp>

#include "source_text.h"

using namespace accelopt_optimize;

TEST_CASE("normalized sources ignore comments, docstrings and whitespace but not code or strings", "[optimize]") {
  const std::string a =
      "def kernel(x):\n    \"\"\"Doubles x.\"\"\"\n    y = x * 2  # twice\n    return y\n";
  const std::string b = "def kernel(x):\n\n    y = x*2\n    return y   # done\n";
  CHECK(NormalizeSource(a) == NormalizeSource(b));
  CHECK(NormalizeSource(a) == "defkernel(x):y=x*2returny");
  CHECK(NormalizeSource("s = '# not a comment'\n") == "s='#notacomment'");  // a '#' inside a string stays
  CHECK(NormalizeSource("y = x * 3\n") != NormalizeSource("y = x * 2\n"));
  CHECK(HashHex(NormalizeSource(a)) == HashHex(NormalizeSource(b)));
  CHECK(HashHex("") == "cbf29ce484222325");  // FNV-1a 64 offset basis
  CHECK(HashHex("a").size() == 16);
}

TEST_CASE("the import header is added only to sources without NKI imports", "[optimize]") {
  CHECK(WithImportHeader("import nki\nx = 1\n") == "import nki\nx = 1\n");
  CHECK(WithImportHeader("from neuronxcc import nki\n") == "from neuronxcc import nki\n");
  std::string added = WithImportHeader("def kernel(x):\n    return x\n");
  CHECK(added.rfind("import numpy as np\nimport neuronxcc.nki as nki\n", 0) == 0);
  CHECK(added.find("def kernel(x):") != std::string::npos);
}

TEST_CASE("the changed region drops common lines and cuts long sides", "[optimize]") {
  auto region = ChangedRegion("a\nb\nc\nd\n", "a\nB\nC\nd\n");
  CHECK(region["before"] == "b\nc\n");
  CHECK(region["after"] == "B\nC\n");
  auto same = ChangedRegion("a\nb\n", "a\nb\n");
  CHECK(same["before"] == "");
  CHECK(same["after"] == "");
  auto added = ChangedRegion("a\n", "a\nb\n");
  CHECK(added["before"] == "");
  CHECK(added["after"] == "b\n");
  std::string many;
  for (int i = 0; i < 30; ++i) many += "line" + std::to_string(i) + "\n";
  auto cut = ChangedRegion("x\n", many, 3);
  CHECK(cut["after"] == "line0\nline1\nline2\n...\n");
}
