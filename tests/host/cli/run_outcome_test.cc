// One status rule (docs/cli.md, "Statuses and exit codes"): run.json's status,
// the run's last log line and the exit code agree, for every way a run ends;
// a run whose every LLM call failed has failed (issue 36, items 2 and 4).
#include <catch2/catch.hpp>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "support/test_support.h"

using namespace accelopt::testing;
using nlohmann::json;

namespace {

// The last line the host logged (progress lines aside).
std::string LastLine(const std::string& output) {
  std::istringstream in(output);
  std::string line, last;
  while (std::getline(in, line))
    if (!line.empty()) last = line;
  return last;
}

struct Ended {
  int exit_code;
  json run;
  std::string last_line;
  std::string output;
};

Ended RunPipeline(TempDir& dir, const std::string& yaml, const std::vector<std::string>& extra = {}) {
  auto pipeline = dir.Write("p.yaml", yaml);
  auto run_dir = dir.path() / "run";
  std::filesystem::remove_all(run_dir);
  std::vector<std::string> args{"run", pipeline.string(), "--run-dir", run_dir.string()};
  args.insert(args.end(), extra.begin(), extra.end());
  auto result = RunHostWithEnv({std::string("ACCELOPT_PLUGIN_PATH=") + ACCELOPT_TEST_PLUGIN_DIR, "ACCELOPT_NO_PROGRESS=1"}, args);
  return {result.exit_code, ReadJson(run_dir / "run.json"), LastLine(result.output), result.output};
}

// The status word the last line states: "run NAME: STATUS (...) — DIR".
std::string StatusInLastLine(const std::string& line) {
  std::smatch match;
  if (std::regex_search(line, match, std::regex(R"(run \S+: (\w+) \()"))) return match[1];
  return "";
}

// A TCP port on which nothing listens (bound, then closed).
int ClosedPort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  socklen_t size = sizeof(address);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &size);
  ::close(fd);
  return ntohs(address.sin_port);
}

}  // namespace

TEST_CASE("a run whose items all failed ends failed, exit 1, and says so last", "[cli][outcome]") {
  TempDir dir;
  auto ended = RunPipeline(dir, "version: 1\nname: t\nstages:\n"
                                "  - id: fan\n    for_each: '${{ {1, 2} }}'\n    uses: native:test_return\n"
                                "    with: {value: {ok: false}}\n");
  INFO(ended.output);
  CHECK(ended.exit_code == 1);
  CHECK(ended.run["status"] == "failed");
  CHECK(StatusInLastLine(ended.last_line) == "failed");
  // The first cause, named in run.json.
  REQUIRE(ended.run["error"].is_object());
  CHECK(ended.run["error"]["kind"] == "items_failed");
  CHECK_THAT(ended.run["error"]["message"].get<std::string>(), Catch::Contains("fan") && Catch::Contains("2 of 2"));
}

TEST_CASE("a stage that failed under on_failure: continue makes the run failed", "[cli][outcome]") {
  TempDir dir;
  auto ended = RunPipeline(dir, "version: 1\nname: t\nstages:\n"
                                "  - id: a\n    uses: native:test_maybe_fail\n    on_failure: continue\n    with: {fail: true}\n"
                                "  - id: b\n    uses: native:test_echo\n    with: {value: 1}\n");
  INFO(ended.output);
  CHECK(ended.exit_code == 1);
  CHECK(ended.run["status"] == "failed");
  CHECK(StatusInLastLine(ended.last_line) == "failed");
  CHECK(ended.run["error"]["stage"] == "a");
  CHECK(ended.run["error"]["kind"] == "boom");
}

TEST_CASE("a run whose failures the pipeline expects (failed_items: ignore) succeeded, exit 0", "[cli][outcome]") {
  TempDir dir;
  auto ended = RunPipeline(dir, "version: 1\nname: t\nstages:\n"
                                "  - id: fan\n    for_each: '${{ {1, 2} }}'\n    uses: native:test_return\n"
                                "    failed_items: ignore\n    with: {value: {ok: false}}\n");
  INFO(ended.output);
  CHECK(ended.exit_code == 0);
  CHECK(ended.run["status"] == "succeeded");
  CHECK(StatusInLastLine(ended.last_line) == "succeeded");
  CHECK_FALSE(ended.run.contains("error"));
}

TEST_CASE("a stage failing with kind usage_error ends the run failed with exit 2", "[cli][outcome]") {
  TempDir dir;
  auto ended = RunPipeline(dir, "version: 1\nname: t\nstages:\n"
                                "  - id: a\n    uses: native:test_maybe_fail\n    with: {fail: true, kind: usage_error}\n");
  INFO(ended.output);
  CHECK(ended.exit_code == 2);
  CHECK(ended.run["status"] == "failed");
  CHECK(ended.run["error"]["kind"] == "usage_error");
  CHECK(StatusInLastLine(ended.last_line) == "failed");
}

TEST_CASE("an unreachable LLM endpoint: every LLM call failed, so the run failed with exit 1", "[cli][outcome][e2e]") {
  TempDir dir;
  const std::string url = "http://127.0.0.1:" + std::to_string(ClosedPort()) + "/v1";
  auto run_dir = dir.path() / "run";
  auto result = RunHostWithEnv({"ACCELOPT_NO_PROGRESS=1"},
                               {"run", SourcePath("pipelines/nkibench-optimize.yaml").string(), "--run-dir", run_dir.string(),
                                "--set", "vars.cases=small", "--set", "vars.problems=[silu]", "--set", "vars.iterations=1",
                                "--set", "vars.plans=2", "--set", "llm.default.base_url=" + url, "--set",
                                "llm.default.model=m", "--set", "llm.default.max_retries=0"});
  INFO(result.output);
  CHECK(result.exit_code == 1);
  json run = ReadJson(run_dir / "run.json");
  CHECK(run["status"] == "failed");
  REQUIRE(run["error"].is_object());
  CHECK(run["error"]["kind"] == "llm_unavailable");
  // The cause the user needs: which endpoint, and what the calls got.
  CHECK_THAT(run["error"]["message"].get<std::string>(), Catch::Contains(url) && Catch::Contains("connect"));
  CHECK(StatusInLastLine(LastLine(result.output)) == "failed");
}

TEST_CASE("docs/cli.md holds the one table of statuses and exit codes; no other doc states another rule",
          "[cli][outcome][docs]") {
  std::ifstream in(SourcePath("docs/cli.md"));
  std::string line;
  std::set<std::pair<std::string, std::string>> rows;  // (status, exit code)
  int tables = 0;
  bool in_table = false;
  while (std::getline(in, line)) {
    if (line.rfind("| status | exit code |", 0) == 0) {
      ++tables;
      in_table = true;
      continue;
    }
    if (in_table && line.rfind("|", 0) != 0) in_table = false;
    if (!in_table || line.rfind("|---", 0) == 0) continue;
    std::smatch match;
    if (std::regex_search(line, match, std::regex(R"(^\| `(\w+)` \| `?([^|`]+?)`? \|)"))) rows.insert({match[1], match[2]});
  }
  CHECK(tables == 1);
  const std::set<std::pair<std::string, std::string>> expected = {
      {"succeeded", "0"}, {"failed", "1"}, {"failed", "2"}, {"interrupted", "1"}, {"interrupted", "130"},
      {"crashed", "the signal's"}};
  CHECK(rows == expected);
  // The other places point there instead of restating a rule of their own.
  for (const char* other : {"README.md", "docs/optimize.md", "docs/reports.md", "docs/search.md"}) {
    std::ifstream doc(SourcePath(other));
    std::stringstream text;
    text << doc.rdbuf();
    INFO(other);
    CHECK(text.str().find("status: succeeded") == std::string::npos);
    CHECK(text.str().find("(`status: succeeded`)") == std::string::npos);
    CHECK(text.str().find("`1` some kernels, items or stages") == std::string::npos);
  }
}
