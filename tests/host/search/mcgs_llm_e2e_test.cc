// pipelines/nkibench-mcgs.yaml with a scripted OpenAI-compatible server (the
// small silu case, emulator): the planner names a move kind of the rule
// vocabulary, the executor answers with a unified diff of the parent kernel; a
// diff that does not apply falls back to the reply's full kernel, an unknown
// move kind is refused (an invalid edge with its error) and the search goes on;
// a kernel reached twice is one node (transposition), and a search killed with
// SIGKILL resumes to the same graph as an uninterrupted run.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <chrono>
#include <thread>

#include "host/optimize/optimize_fixture.h"

extern char** environ;

using namespace accelopt::testing;
using namespace accelopt::testing::optimize;
using nlohmann::json;

namespace {

// Three planners per state: a valid move (fuse_silu) whose diff applies, a valid move (widen_loop)
// whose diff does not apply (the reply's full kernel, which does not compile, is the fallback),
// and a move kind outside the vocabulary.
std::string Respond(const json& body) {
  const std::string system = body["messages"][0]["content"];
  const std::string user = body["messages"][1]["content"];
  if (system.rfind("You are a performance engineer", 0) == 0) {
    if (user.find("planner 1 of") != std::string::npos)
      return "MOVE: fuse_silu\nPLAN: fuse the silu steps into one activation\nOne ScalarE instruction.";
    if (user.find("planner 2 of") != std::string::npos)
      return "**MOVE:** widen-loop\nPARAMS: {\"rows\": 256}\nPLAN: load whole rows with advanced indexing\nFewer DMA descriptors.";
    return "MOVE: rewrite_in_cuda\nPLAN: port the kernel to CUDA\nNot an NKI move.";
  }
  if (system.rfind("You are an NKI kernel engineer", 0) == 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(150));  // time to kill the host mid-search
    if (user.find("fuse the silu steps") != std::string::npos) {
      return "The change:\n\n```diff\n" + WholeFileDiff(ParentKernel(user), kFusedSilu) + "```\n";
    }
    return "```diff\n@@ -3,1 +3,1 @@\n-this line is not in the kernel\n+x = 1\n```\nOr in full:\n\n```python\n" +
           std::string(kBrokenSilu) + "```\n";
  }
  return "TITLE: fused silu\nDESCRIPTION:\nOne activation.\n";
}

std::vector<std::string> Args(const std::filesystem::path& run_dir, const std::string& url) {
  std::vector<std::string> args = {"run", SourcePath("pipelines/nkibench-mcgs.yaml").string(), "--run-dir", run_dir.string()};
  for (const std::string s : {"vars.cases=small", "vars.problems=[silu]", "backend.nki=emulator", "vars.mode=llm",
                              "vars.budget=4", "vars.workers=1", "vars.moves=3", "vars.isolation=inprocess",
                              "vars.llm_concurrency=1", "llm.default.model=fake-model"}) {
    args.push_back("--set");
    args.push_back(s);
  }
  args.push_back("--set");
  args.push_back("llm.default.base_url=" + url);
  return args;
}

json Relative(const json& value, const std::string& prefix) {
  if (value.is_string()) {
    std::string s = value;
    for (size_t at; (at = s.find(prefix)) != std::string::npos;) s.erase(at, prefix.size());
    return s;
  }
  if (value.is_array() || value.is_object()) {
    json out = value;
    for (auto it = out.begin(); it != out.end(); ++it) *it = Relative(*it, prefix);
    return out;
  }
  return value;
}

}  // namespace

TEST_CASE("MCGS with a scripted LLM: vocabulary moves with diffs, full-source fallback, unknown kinds refused, transpositions, kill -9 + resume",
          "[search][mcgs][e2e][llm]") {
  ScriptedLlmServer server(Respond);
  TempDir dir;
  const auto fresh = dir.path() / "fresh";
  auto result = RunHost(Args(fresh, server.BaseUrl()));
  INFO(result.output);
  REQUIRE(ReadJson(fresh / "run.json")["status"] == "succeeded");
  const json graph = ReadJson(fresh / "search_graph.json");
  const json cg = graph["cases"]["silu_M256_N1024"];
  // root -> fused (correct, faster) and root -> broken (failed); from the fused kernel the
  // "broken" plan gives the same broken kernel again: a transposition, not a new evaluation.
  CHECK(cg["evaluations"] == 2);
  CHECK(cg["done_reason"] == "exhausted");
  REQUIRE(cg["nodes"].size() == 3);
  const json& fused = cg["nodes"][cg["incumbent"].get<std::string>()];
  CHECK(fused["speedup_vs_baseline"].get<double>() > 1.05);
  std::string failed;
  for (const auto& [id, node] : cg["nodes"].items()) {
    if (node["status"] == "failed") failed = id;
  }
  REQUIRE_FALSE(failed.empty());
  int edges_to_failed = 0;
  for (const auto& [id, node] : cg["nodes"].items()) {
    for (const auto& move : node["moves"]) edges_to_failed += move["state"] == "expanded" && move["child"] == failed;
  }
  // From the fused kernel the fuse_silu plan gives back the fused kernel itself: one re-ask naming
  // the repeat, the same again, and the node is finished (docs/search.md, "Re-asks in the graph
  // search"); its other moves are closed, so the broken kernel is reached once (the transposition
  // from a repeat is covered in converged_model_llm_e2e_test.cc's graph search).
  CHECK(edges_to_failed == 1);
  CHECK_THAT(ReadFile(fresh / "events.jsonl"), Catch::Contains("\"converged\""));

  // Every edge stores its move kind, parameters and unified diff.
  const json& root = cg["nodes"][cg["root"].get<std::string>()];
  REQUIRE(root["moves"].size() == 3);
  int refused = 0;
  for (const auto& [id, node] : cg["nodes"].items()) {
    for (const auto& move : node["moves"]) {
      INFO(move.dump());
      if (move["kind"] == "rewrite_in_cuda") {  // refused: invalid, with the error, never expanded
        ++refused;
        CHECK(move["state"] == "invalid");
        CHECK(move["error"]["kind"] == "unknown_move");
        CHECK_THAT(move["error"]["message"].get<std::string>(), Catch::Contains("not in the vocabulary") && Catch::Contains("fuse_silu"));
        CHECK(move["child"].is_null());
      }
    }
  }
  CHECK(refused == 2);  // once per state that got moves (the root and the fused kernel)
  for (const auto& move : root["moves"]) {
    if (move["kind"] == "fuse_silu") {  // the diff applied
      CHECK(move["state"] == "expanded");
      CHECK(move["edit"] == "diff");
      CHECK(move["child"] == cg["incumbent"]);
      CHECK_THAT(move["diff"].get<std::string>(), Catch::StartsWith("--- a/kernel.py\n+++ b/kernel.py\n@@ ") &&
                                                      Catch::Contains("+    ") && Catch::Contains("nl.silu"));
      CHECK(move["params"].is_object());
    }
    if (move["kind"] == "widen_loop") {  // the diff did not apply: the full kernel was used
      CHECK(move["params"]["rows"] == 256);
      CHECK(move["edit"] == "source");
      CHECK(move["patch_error"]["kind"] == "hunk_failed");
      CHECK_THAT(move["patch_error"]["message"].get<std::string>(), Catch::Contains("hunk 1"));
      CHECK(move["child"] == failed);
      CHECK_FALSE(move["diff"].get<std::string>().empty());
    }
  }
  CHECK_THAT(ReadFile(fresh / "events.jsonl"), Catch::Contains("unknown_move"));
  CHECK_THAT(ReadFile(fresh / "trace.md"), Catch::Contains("transposition"));
  CHECK(ReadJson(fresh / "optimize_results.json")["rows"][0]["status"] == "improved");

  // kill -9 after the first evaluation, then resume against the same server.
  const auto killed = dir.path() / "killed";
  std::vector<std::string> argv_storage{ACCELOPT_HOST_BINARY};
  for (const auto& a : Args(killed, server.BaseUrl())) argv_storage.push_back(a);
  std::vector<char*> argv;
  for (auto& a : argv_storage) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  pid_t pid = -1;
  REQUIRE(posix_spawn(&pid, ACCELOPT_HOST_BINARY, &actions, nullptr, argv.data(), environ) == 0);
  posix_spawn_file_actions_destroy(&actions);
  bool reached = false;
  for (auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
       !reached && std::chrono::steady_clock::now() < deadline;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    reached = ReadFile(killed / "events.jsonl").find("\"evaluate\"") != std::string::npos;
  }
  REQUIRE(reached);
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  CHECK(WIFSIGNALED(status));
  auto resumed = RunHost({"run", "--resume", killed.string()});
  INFO(resumed.output);
  REQUIRE(ReadJson(killed / "run.json")["status"] == "succeeded");
  CHECK(Relative(ReadJson(killed / "search_graph.json"), killed.string()) == Relative(graph, fresh.string()));
  CHECK(ReadFile(killed / "trace.md") == ReadFile(fresh / "trace.md"));
}
