// The LLM transcript never follows a link planted in the run directory
// (issue 34): neither `llm/transcript.jsonl` nor the `llm` folder.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "llm/client_registry.h"
#include "llm/transcript.h"
#include "support/test_support.h"
#include "host/llm/llm_test_env.h"

using namespace accelopt::llm;
using accelopt::testing::TempDir;
using nlohmann::json;
using accelopt::llm::testing::NoEnv;
namespace fs = std::filesystem;

namespace {

std::string Slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

const json kBlock = {{"default", {{"base_url", "http://127.0.0.1:9/v1"}, {"model", "m"}}}};

}  // namespace

TEST_CASE("the transcript refuses a symlinked transcript.jsonl and appends nothing through it", "[llm][security]") {
  TempDir dir;
  auto victim = dir.Write("victim.txt", "keep me\n");
  fs::create_directories(dir.path() / "run/llm");
  fs::create_symlink(victim, dir.path() / "run/llm/transcript.jsonl");
  try {
    TranscriptWriter writer(dir.path() / "run/llm/transcript.jsonl");
    writer.Append({{"request", {{"model", "m"}}}, {"response", {{"body", "x"}}}});
    FAIL("expected the planted link to be refused");
  } catch (const std::exception& error) {
    CHECK_THAT(error.what(), Catch::Contains("transcript.jsonl") && Catch::Contains("refusing a symlink"));
  }
  CHECK(Slurp(victim) == "keep me\n");

  // Through the registry, as `run` makes it.
  RegistryOptions options;
  options.run_dir = dir.path() / "run";
  options.env = NoEnv();
  CHECK_THROWS_WITH(ClientRegistry(kBlock, options), Catch::Contains("refusing a symlink"));
  CHECK(Slurp(victim) == "keep me\n");
}

TEST_CASE("the transcript refuses a symlinked llm folder", "[llm][security]") {
  TempDir dir;
  TempDir outside;
  fs::create_directories(dir.path() / "run");
  fs::create_directory_symlink(outside.path(), dir.path() / "run/llm");
  RegistryOptions options;
  options.run_dir = dir.path() / "run";
  options.env = NoEnv();
  CHECK_THROWS_WITH(ClientRegistry(kBlock, options), Catch::Contains("run/llm: refusing a symlink"));
  CHECK(fs::is_empty(outside.path()));

  // A real folder works, and a resumed transcript continues its seq numbers.
  fs::remove(dir.path() / "run/llm");
  {
    TranscriptWriter writer(dir.path() / "run/llm/transcript.jsonl");
    CHECK(writer.Append({{"request", {{"model", "m"}}}}) == 0);
  }
  TranscriptWriter again(dir.path() / "run/llm/transcript.jsonl");
  CHECK(again.Append({{"request", {{"model", "m"}}}}) == 1);
}
