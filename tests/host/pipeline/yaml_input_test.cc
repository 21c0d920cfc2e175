#include <catch2/catch.hpp>

#include <sys/stat.h>

#include "core/errors.h"
#include "pipeline/loader.h"
#include "pipeline/yaml_input.h"
#include "support/test_support.h"

using namespace accelopt;
using accelopt::testing::TempDir;

namespace {

// The error of loading `yaml` as a pipeline file, with the temp path replaced by "p.yaml".
std::string LoadError(const std::string& yaml, const std::vector<std::string>& sets = {}) {
  TempDir dir;
  auto file = dir.Write("p.yaml", yaml);
  try {
    LoadPipeline(file, sets);
    return "";
  } catch (const ConfigError& error) {
    std::string text = error.what();
    for (size_t pos; (pos = text.find(file.string())) != std::string::npos;) text.replace(pos, file.string().size(), "p.yaml");
    return text;
  }
}

const char* kMinimal = "version: 1\nname: t\nstages:\n  - id: a\n    uses: native:test_echo\n";
// With a declared variable, for --set vars.x=... (undeclared names are refused).
const char* kWithVar = "version: 1\nname: t\nvars: {x: 1}\nstages:\n  - id: a\n    uses: native:test_echo\n";

// The 663-byte "billion laughs" of the issue: 9 levels of 9 aliases each.
std::string BillionLaughs() {
  std::string text = "version: 1\nname: t\nvars:\n  a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n";
  for (char level = 'b'; level <= 'i'; ++level) {
    std::string prev(1, static_cast<char>(level - 1));
    text += "  " + std::string(1, level) + ": &" + std::string(1, level) + " [";
    for (int i = 0; i < 9; ++i) text += (i ? ", *" : "*") + prev;
    text += "]\n";
  }
  return text + "stages:\n  - {id: a, uses: native:test_echo, with: {x: *i}}\n";
}

}  // namespace

TEST_CASE("FindInvalidUtf8 finds the first bad byte", "[pipeline][yaml_input]") {
  CHECK(FindInvalidUtf8("plain ascii") == std::string_view::npos);
  CHECK(FindInvalidUtf8("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80") == std::string_view::npos);
  CHECK(FindInvalidUtf8("ab\xFF") == 2);
  CHECK(FindInvalidUtf8("a\xC0\xAF") == 1);          // overlong '/'
  CHECK(FindInvalidUtf8("x\xED\xA0\x80") == 1);      // surrogate
  CHECK(FindInvalidUtf8("\xE2\x82") == 0);           // truncated
}

TEST_CASE("non-UTF-8 bytes anywhere are reported as file:line:col", "[pipeline][yaml_input]") {
  CHECK(LoadError("version: 1\nname: t\nvars:\n  x: ab\xFF\n" + std::string(kMinimal).substr(19)) ==
        "p.yaml:4:8: error: invalid UTF-8");
  CHECK(LoadError("version: 1\nname: t\nvars:\n  k\xC3: 1\nstages: []\n") == "p.yaml:4:4: error: invalid UTF-8");
  // An escape that would decode to a lone surrogate is refused with its position (by yaml-cpp;
  // every decoded scalar is checked again after parsing).
  CHECK_THAT(LoadError("version: 1\nname: t\nvars:\n  x: \"\\uD800\"\n" + std::string(kMinimal).substr(19)),
             Catch::Contains("p.yaml:4:") && Catch::Contains("invalid unicode"));
  // --set values and keys.
  CHECK(LoadError(kWithVar, {"vars.x=ok\xFE"}) == "--set:1:10: error: invalid UTF-8");
  CHECK(LoadError(kWithVar, {"vars.\xFE=1"}) == "--set:1:6: error: invalid UTF-8");
  CHECK(LoadError(kWithVar, {"vars.x=caf\xC3\xA9"}).empty());
}

TEST_CASE("alias expansion is bounded (billion laughs)", "[pipeline][yaml_input]") {
  std::string bomb = BillionLaughs();
  CHECK(bomb.size() < 700);
  CHECK_THAT(LoadError(bomb), Catch::Contains("p.yaml:") && Catch::Contains("once its aliases are expanded (alias bomb?)"));
  // Honest anchors and aliases still work.
  CHECK(LoadError("version: 1\nname: t\nvars:\n  base: &b {n: 1, l: [1, 2]}\n  copy: *b\n"
                  "stages:\n  - {id: a, uses: native:test_echo, with: {x: *b}}\n")
            .empty());
  // A recursive alias would make a cyclic tree.
  CHECK_THAT(LoadError("version: 1\nname: t\nvars:\n  r: &r [1, *r]\n" + std::string(kMinimal).substr(19)),
             Catch::Contains("p.yaml:4:13: error: alias refers to the node that contains it"));
  // --set values are bounded too.
  CHECK_THAT(LoadError(kWithVar, {"vars.x=[&a [1,1,1,1,1,1,1,1,1,1], &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a], "
                                  "&c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b], &d [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c], "
                                  "&e [*d,*d,*d,*d,*d,*d,*d,*d,*d,*d], &f [*e,*e,*e,*e,*e,*e,*e,*e,*e,*e]]"}),
             Catch::Contains("--set vars.x:1:") && Catch::Contains("alias bomb"));
  CHECK(LoadYamlChecked("[&a [1, 2], *a, *a]", "t", 10).size() == 3);
  CHECK_THROWS_AS(LoadYamlChecked("[&a [1, 2], *a, *a]", "t", 9), ConfigError);
}

TEST_CASE("pipeline files are regular files of bounded size", "[pipeline][yaml_input]") {
  auto error_of = [](const std::filesystem::path& path) {
    try {
      LoadPipeline(path);
      return std::string();
    } catch (const ConfigError& error) {
      return std::string(error.what());
    }
  };
  CHECK(error_of("/dev/zero") == "/dev/zero: error: not a regular file (a device); pipeline files are read from regular files only");
  TempDir dir;
  CHECK_THAT(error_of(dir.path()), Catch::Contains("not a regular file (a directory)"));
  auto fifo = dir.path() / "fifo.yaml";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK_THAT(error_of(fifo), Catch::Contains("not a regular file (a pipe)"));
  auto big = dir.Write("big.yaml", std::string(kMinimal) + "# " + std::string(kMaxPipelineBytes, 'x') + "\n");
  CHECK_THAT(error_of(big), Catch::Contains("exceeds the limit of 4194304 bytes for pipeline files"));
  CHECK_THROWS_AS(ReadPipelineFile(dir.Write("small.yaml", "0123456789"), 9), ConfigError);
  CHECK(ReadPipelineFile(dir.path() / "small.yaml", 10) == "0123456789");
  CHECK_THAT(error_of(dir.path() / "missing.yaml"), Catch::Contains("missing.yaml: error: cannot read: No such file"));
}
