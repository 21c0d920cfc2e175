// Stage-level tests of the optimize plugin (in-process, through the plugin ABI).
#include <catch2/catch.hpp>

#include "core/errors.h"
#include "host/optimize/optimize_fixture.h"

using namespace accelopt::testing;
using namespace accelopt::testing::optimize;
using nlohmann::json;

namespace {

json Candidate(const std::string& id, const std::string& kernel, double latency, const std::string& case_name = "silu_M256_N1024") {
  return {{"id", id}, {"case_name", case_name}, {"problem", "silu"}, {"kernel", kernel}, {"latency_ms", latency},
          {"baseline_latency_ms", 1.0}, {"lineage", json::array()}, {"history", json::array()}};
}

json Record(const std::string& id, const std::string& kernel, const std::string& parent_kernel, double parent_latency,
            double latency, const std::string& plan_id, const std::string& parent = "base") {
  json r = Candidate(id, kernel, latency);
  r["status"] = "ok";
  r["parent"] = parent;
  r["parent_kernel"] = parent_kernel;
  r["parent_latency_ms"] = parent_latency;
  r["speedup"] = parent_latency / latency;
  r["plan"] = {{"plan_id", plan_id}, {"title", "plan " + plan_id}, {"rule", "tile"}, {"params", {{"TILE_N", 1024}}}};
  return r;
}

}  // namespace

TEST_CASE("select keeps the best kernel so far (elitism) and never the same kernel twice", "[optimize]") {
  TempDir dir;
  auto base = dir.Write("base.py", "# baseline\nx = 1\n");
  auto best_file = dir.Write("best.py", "x = 2  # best so far\n");
  auto a = dir.Write("a.py", "x = 3\n");
  auto a_copy = dir.Write("a_copy.py", "# same kernel, other comments\nx  =  3   # spacing\n\n");
  auto b = dir.Write("b.py", "x = 4\n");
  auto c = dir.Write("c.py", "x = 5\n");

  json beam = json::array({Candidate("base", base.string(), 1.0)});
  json best = {{"silu_M256_N1024", Candidate("old-best", best_file.string(), 0.5)}};
  json records = json::array({Record("a", a.string(), base.string(), 1.0, 0.9, "b0p0"),
                              Record("a-copy", a_copy.string(), base.string(), 1.0, 0.85, "b0p1"),
                              Record("b", b.string(), base.string(), 1.0, 0.95, "b0p2"),
                              Record("c", c.string(), base.string(), 1.0, 0.7, "b0p3")});
  json failed = Record("broken", c.string(), base.string(), 1.0, 0.1, "b0p4");
  failed["status"] = "failed";
  records.push_back(failed);

  json out = RunStage("select", {{"beam", beam}, {"records", records}, {"best", best}, {"beam_width", 3}}, dir.path());
  std::vector<std::string> ids;
  for (const auto& m : out["beam"]) ids.push_back(m["id"]);
  // The best so far (0.5 ms, from an earlier iteration) leads; a and a-copy are the same
  // kernel: only the faster entry (a-copy) stays; the failed record never enters.
  CHECK(ids == std::vector<std::string>{"old-best", "c", "a-copy"});
  CHECK(out["best"]["silu_M256_N1024"]["id"] == "old-best");
  CHECK(out["improved"].empty());
  bool dropped_a = false;
  for (const auto& d : out["dropped"]) dropped_a = dropped_a || (d["id"] == "a" && d["reason"] == "duplicate source");
  CHECK(dropped_a);

  // A faster new kernel becomes the best and is reported as an improvement.
  json faster = Record("d", dir.Write("d.py", "x = 6\n").string(), base.string(), 1.0, 0.25, "b0p5");
  json out2 = RunStage("select", {{"beam", out["beam"]}, {"records", json::array({faster})}, {"best", out["best"]}, {"beam_width", 2}},
                       dir.path());
  CHECK(out2["beam"][0]["id"] == "d");
  CHECK(out2["beam"][1]["id"] == "old-best");
  CHECK(out2["best"]["silu_M256_N1024"]["id"] == "d");
  REQUIRE(out2["improved"].size() == 1);
}

TEST_CASE("select: a screened (unconfirmed) record never enters the beam or becomes the best; confirm_below_ms is the full beam's slowest",
          "[optimize][screen]") {
  TempDir dir;
  auto base = dir.Write("base.py", "x = 1\n");
  json beam = json::array({Candidate("base", base.string(), 1.0)});
  json screened = Record("fast-screened", dir.Write("s.py", "x = 2\n").string(), base.string(), 1.0, 0.2, "b0p0");
  screened["validation"] = "screened";
  json confirmed = Record("confirmed", dir.Write("c.py", "x = 3\n").string(), base.string(), 1.0, 0.5, "b0p1");
  confirmed["validation"] = "confirmed";
  json full = Record("full", dir.Write("f.py", "x = 4\n").string(), base.string(), 1.0, 0.8, "b0p2");
  full["validation"] = "full";
  json out = RunStage("select", {{"beam", beam}, {"records", json::array({screened, confirmed, full})}, {"beam_width", 2}},
                      dir.path());
  std::vector<std::string> ids;
  for (const auto& m : out["beam"]) ids.push_back(m["id"]);
  CHECK(ids == std::vector<std::string>{"confirmed", "full"});
  CHECK(out["best"]["silu_M256_N1024"]["id"] == "confirmed");
  bool dropped = false;
  for (const auto& d : out["dropped"]) dropped = dropped || (d["id"] == "fast-screened" && d["reason"] == "screened only (not confirmed)");
  CHECK(dropped);
  // The beam is full (2): a screened candidate must beat its slowest member to be worth confirming.
  CHECK(out["confirm_below_ms"]["silu_M256_N1024"] == 0.8);
  // A beam that is not full has no threshold: every screened pass is confirmed.
  json wide = RunStage("select", {{"beam", beam}, {"records", json::array({confirmed})}, {"beam_width", 6}}, dir.path());
  CHECK_FALSE(wide["confirm_below_ms"].contains("silu_M256_N1024"));
}

TEST_CASE("rewrite selection keeps the best sample of a faster plan and the worst of a slower one within thresholds and TopK/2", "[optimize]") {
  TempDir dir;
  auto parent = dir.Write("parent.py", "a = 1\nb = 2\nc = 3\n");
  auto k = [&](const std::string& name, const std::string& middle) {
    return dir.Write(name, "a = 1\n" + middle + "\nc = 3\n").string();
  };
  const std::string p = parent.string();
  json records = json::array({
      // plan p0: best sample 1.30 (positive) - the other sample (1.10) is not picked
      Record("p0s0", k("p0s0.py", "b = 10"), p, 1.0, 1.0 / 1.30, "b0p0"),
      Record("p0s1", k("p0s1.py", "b = 11"), p, 1.0, 1.0 / 1.10, "b0p0"),
      // plan p1: 1.03 -> positive but below max_threshold 1.04
      Record("p1s0", k("p1s0.py", "b = 12"), p, 1.0, 1.0 / 1.03, "b0p1"),
      // plans p2, p3, p4: positives 1.20, 1.50, 1.10 (TopK/2 = 2 -> 1.50 and 1.30 and not 1.20/1.10)
      Record("p2s0", k("p2s0.py", "b = 13"), p, 1.0, 1.0 / 1.20, "b0p2"),
      Record("p3s0", k("p3s0.py", "b = 14"), p, 1.0, 1.0 / 1.50, "b0p3"),
      Record("p4s0", k("p4s0.py", "b = 15"), p, 1.0, 1.0 / 1.10, "b0p4"),
      // plan p5: both samples slower: the worst (0.5) is kept
      Record("p5s0", k("p5s0.py", "b = 16"), p, 1.0, 1.0 / 0.8, "b0p5"),
      Record("p5s1", k("p5s1.py", "b = 17"), p, 1.0, 1.0 / 0.5, "b0p5"),
      // plan p6: 0.9 is slower but not below 1/1.15 = 0.8696
      Record("p6s0", k("p6s0.py", "b = 18"), p, 1.0, 1.0 / 0.9, "b0p6"),
      // plan p7: exactly 1.0 -> nothing
      Record("p7s0", k("p7s0.py", "b = 19"), p, 1.0, 1.0, "b0p7"),
      // plan p8: a mixed plan (best 1.05 > 1, so its best sample, not its worst)
      Record("p8s0", k("p8s0.py", "b = 20"), p, 1.0, 1.0 / 1.05, "b0p8"),
      Record("p8s1", k("p8s1.py", "b = 21"), p, 1.0, 1.0 / 0.6, "b0p8"),
  });
  json out = RunStage("summarize", {{"records", records}, {"mode", "rules"}, {"top_k", 4}, {"max_threshold", 1.04},
                                    {"min_threshold", 1.15}, {"iteration", 3}},
                      dir.path());
  std::vector<std::string> ids;
  for (const auto& s : out["selected"]) ids.push_back(s["id"]);
  // 2 positives (TopK/2) fastest first, then negatives slowest first for the remaining 2.
  CHECK(ids == std::vector<std::string>{"p3s0", "p0s0", "p5s1"});
  REQUIRE(out["items"].size() == 3);
  const json& positive = out["items"][0];
  CHECK(positive["direction"] == "improvement");
  CHECK(positive["speedup"].get<double>() == Approx(1.5));
  CHECK(positive["before"] == "b = 2\n");
  CHECK(positive["after"] == "b = 14\n");
  CHECK_THAT(positive["description"].get<std::string>(), Catch::Contains("1.500x"));
  CHECK(positive["lineage"]["candidate"] == "p3s0");
  CHECK(positive["lineage"]["plan_id"] == "b0p3");
  const json& negative = out["items"][2];
  CHECK(negative["direction"] == "regression");
  CHECK(negative["speedup_original"].get<double>() == Approx(0.5));
  CHECK(negative["speedup"].get<double>() == Approx(2.0));
  // Oriented slow -> fast: before is the (slow) candidate, after the (fast) parent.
  CHECK(negative["before"] == "b = 17\n");
  CHECK(negative["after"] == "b = 2\n");

  // With no positives, up to TopK negatives are taken.
  json slow_only = json::array({Record("n0", k("n0.py", "b = 30"), p, 1.0, 2.0, "b0p0"),
                                Record("n1", k("n1.py", "b = 31"), p, 1.0, 3.0, "b0p1")});
  json out2 = RunStage("summarize", {{"records", slow_only}, {"mode", "rules"}, {"top_k", 4}}, dir.path());
  CHECK(out2["selected"].size() == 2);
  CHECK(out2["selected"][0]["id"] == "n1");
}

TEST_CASE("memory keeps a FIFO capacity per problem and the newest duplicate and is saved and reloaded", "[optimize]") {
  TempDir dir;
  auto item = [](const std::string& id, const std::string& title, const std::string& after, const std::string& case_name = "silu") {
    return json{{"id", id}, {"title", title}, {"description", "d"}, {"before", "x"}, {"after", after}, {"case_name", case_name},
                {"speedup", 1.2}};
  };
  json first = RunStage("memory", {{"add", json::array({item("1", "Fuse", "a"), item("2", "Tile", "b"), item("3", "Hoist", "c"),
                                                         item("m1", "Other", "z", "matmul")})},
                                   {"capacity", 2}, {"scope", "problem"}},
                        dir.path());
  std::vector<std::string> ids;
  for (const auto& i : first["memory"]["items"]) ids.push_back(i["id"]);
  CHECK(ids == std::vector<std::string>{"2", "3", "m1"});  // silu: the oldest (1) evicted
  CHECK(first["evicted"] == 1);

  // "tile " with other spacing/case and the same after-snippet is a duplicate: the newer one replaces it.
  json second = RunStage("memory", {{"memory", first["memory"]}, {"add", json::array({item("4", "  TILE ", "b"), item("5", "No optimization found", "q")})},
                                    {"capacity", 2}, {"scope", "problem"}},
                         dir.path());
  ids.clear();
  for (const auto& i : second["memory"]["items"]) ids.push_back(i["id"]);
  CHECK(ids == std::vector<std::string>{"3", "m1", "4"});
  CHECK(second["duplicates_replaced"] == 1);

  // Saved in the stage dir and the run dir; `load` starts a new memory from the file.
  REQUIRE(std::filesystem::exists(dir.path() / "memory.json"));
  TempDir other;
  json loaded = RunStage("memory", {{"load", (dir.path() / "memory.json").string()}, {"capacity", 16}}, other.path());
  CHECK(loaded["memory"]["items"] == second["memory"]["items"]);
  CHECK_THROWS_AS(RunStage("memory", {{"load", dir.Write("bad.json", "{").string()}}, other.path()), accelopt::StageError);

  // Shared scope: capacity counts all problems.
  json shared = RunStage("memory", {{"memory", second["memory"]}, {"capacity", 2}, {"scope", "shared"}}, other.path());
  CHECK(shared["memory"]["items"].size() == 2);
}

TEST_CASE("execute in diff format: a diff that applies, a full-source fallback, a diff without fallback", "[optimize]") {
  TempDir dir;
  auto parent = dir.Write("parent.py", "import neuronxcc.nki as nki\n\n\ndef kernel(x):\n    y = x + 1\n    return y\n");
  json member = Candidate("silu-base", parent.string(), 0.028);
  member["task"] = dir.Write("ref.py", "def forward(x):\n    return x\n").string();
  json plans = json::array();
  for (const std::string id : {"b0p0", "b0p1", "b0p2"}) {
    plans.push_back({{"plan_id", id}, {"title", id}, {"text", "do " + id}, {"origin", "llm"}, {"kind", "fuse_silu"},
                     {"params", {{"site", "y"}}}, {"effect", "VectorE time"}, {"candidate", member}});
  }
  ScopedLlm llm([](const json& request) {
    std::string user = request["messages"][1]["content"];
    const std::string bad = "```diff\n@@ -5 +5 @@\n-    y = x + 7\n+    y = x * 2\n```\n";
    if (user.find("do b0p0") != std::string::npos) return Reply("```diff\n@@ -5 +5 @@\n-    y = x + 1\n+    y = x * 2\n```\n");
    if (user.find("do b0p1") != std::string::npos) return Reply(bad + "```python\nimport neuronxcc.nki as nki\n\n\ndef kernel(x):\n    return x * 3\n```\n");
    return Reply(bad);
  });
  json out = RunStage("execute", {{"plans", plans}, {"samples_per_plan", 1}, {"iteration", 0}, {"mode", "llm"},
                                  {"edit_format", "diff"}, {"prompts", SourcePath("prompts").string()}},
                      dir.path());
  REQUIRE(out["candidates"].size() == 2);
  REQUIRE(out["failures"].size() == 1);
  const json& applied = out["candidates"][0];
  CHECK(applied["edit"] == "diff");
  CHECK(ReadFile(applied["kernel"].get<std::string>()) == "import neuronxcc.nki as nki\n\n\ndef kernel(x):\n    y = x * 2\n    return y\n");
  CHECK_THAT(applied["diff"].get<std::string>(), Catch::StartsWith("--- a/kernel.py\n+++ b/kernel.py\n@@ -2,5 +2,5 @@") &&
                                                     Catch::Contains("-    y = x + 1\n+    y = x * 2\n"));
  CHECK(applied["plan"]["kind"] == "fuse_silu");
  const json& fallback = out["candidates"][1];
  CHECK(fallback["edit"] == "source");
  CHECK(fallback["patch_error"]["kind"] == "hunk_failed");
  CHECK_THAT(fallback["patch_error"]["message"].get<std::string>(), Catch::Contains("hunk 1") && Catch::Contains("y = x + 7"));
  CHECK_THAT(ReadFile(fallback["kernel"].get<std::string>()), Catch::Contains("return x * 3"));
  const json& failed = out["failures"][0];
  CHECK(failed["error"]["kind"] == "patch_failed");
  CHECK_THAT(failed["error"]["message"].get<std::string>(), Catch::Contains("hunk 1") && Catch::Contains("no full kernel"));
  CHECK_THAT(failed["reply_diff"].get<std::string>(), Catch::Contains("y = x + 7"));
  // The executor was asked for a diff, with the move named.
  auto requests = llm.Requests();
  REQUIRE(requests.size() == 3);
  CHECK_THAT(requests[0]["messages"][0]["content"].get<std::string>(), Catch::Contains("unified diff"));
  CHECK_THAT(requests[0]["messages"][1]["content"].get<std::string>(),
             Catch::Contains("Move: `fuse_silu` (VectorE time), parameters {\"site\":\"y\"}."));
}

TEST_CASE("execute writes the first fenced block as a kernel file with lineage and records no_code_block after one re-ask", "[optimize]") {
  TempDir dir;
  auto parent = dir.Write("parent.py", "import neuronxcc.nki as nki\nx = 1\n");
  json member = Candidate("silu-base", parent.string(), 0.028);
  member["task"] = dir.Write("ref.py", "def forward(x):\n    return x\n").string();
  member["lineage"] = json::array({"root"});
  json plans = json::array({{{"plan_id", "b0p0"}, {"title", "A"}, {"text", "do A"}, {"origin", "llm"}, {"candidate", member}},
                            {{"plan_id", "b0p1"}, {"title", "B"}, {"text", "do B"}, {"origin", "llm"}, {"candidate", member}}});
  ScopedLlm llm([](const json& request) {
    std::string user = request["messages"][1]["content"];
    if (user.find("do A") != std::string::npos) return Reply("Sure, in ``` fences.\n``` python \nx = 2\n```\nand also\n```python\nx = 3\n```\n");
    return Reply("I would rather explain: just change x.");
  });
  json out = RunStage("execute", {{"plans", plans}, {"samples_per_plan", 1}, {"iteration", 4}, {"mode", "llm"},
                                  {"prompts", SourcePath("prompts").string()}},
                      dir.path());
  REQUIRE(out["candidates"].size() == 1);
  REQUIRE(out["failures"].size() == 1);
  const json& c = out["candidates"][0];
  CHECK(c["id"] == "silu_M256_N1024-i4-b0p0-s0");
  CHECK(c["parent"] == "silu-base");
  CHECK(c["lineage"] == json::array({"root", "silu-base"}));
  CHECK(c["plan"]["plan_id"] == "b0p0");
  CHECK(c["parent_latency_ms"].get<double>() == Approx(0.028));
  std::string source = ReadFile(c["kernel"].get<std::string>());
  CHECK_THAT(source, Catch::Contains("x = 2"));
  CHECK_THAT(source, !Catch::Contains("x = 3"));
  CHECK_THAT(source, Catch::Contains("import neuronxcc.nki as nki"));  // header added
  json sidecar = ReadJson(std::filesystem::path(c["kernel"].get<std::string>()).replace_extension(".json"));
  CHECK(sidecar["parent"] == "silu-base");
  CHECK(sidecar["sample"] == 0);
  const json& f = out["failures"][0];
  CHECK(f["status"] == "failed");
  CHECK(f["error"]["kind"] == "no_code_block");
  CHECK(f["plan"]["plan_id"] == "b0p1");
  CHECK_THAT(f["error"]["message"].get<std::string>(), Catch::Contains("after a re-ask"));
  CHECK(f["reasks"] == 1);
  // The executor prompt carries the plan, the kernel and the reference; the prose reply got
  // one re-ask quoting the parse error (issue 37), so three requests in all.
  auto requests = llm.Requests();
  REQUIRE(requests.size() == 3);
  int reasks = 0;
  for (const auto& r : requests)
    if (r["messages"][1]["content"].get<std::string>().find("could not be used: the reply has no fenced code block") != std::string::npos) ++reasks;
  CHECK(reasks == 1);
  CHECK_THAT(requests[0]["messages"][0]["content"].get<std::string>(), Catch::Contains("partition"));
  CHECK(requests[0].contains("seed"));
}

TEST_CASE("plan prompts show experiences and metrics with meanings and code and a failed call is recorded", "[optimize]") {
  TempDir dir;
  json member = Candidate("silu-base", SourcePath("nkibench/kernels/silu_0.py").string(), 0.028);
  member["task"] = SourcePath("nkibench/reference/silu_M256_N1024_numpy.py").string();
  member["metrics"] = {{"hbm_read_bytes", 1048576}, {"vector_engine_active_time_percent", 0.26}, {"not_displayed", 5}};
  json memory = {{"scope", "problem"},
                 {"items", json::array({{{"title", "Fuse the sigmoid steps"}, {"description", "One activation instead of four."},
                                         {"before", "e = exp(-x)"}, {"after", "y = silu(x)"}, {"speedup", 1.155},
                                         {"direction", "improvement"}, {"case_name", "silu_M256_N1024"}},
                                        {{"title", "Matmul thing"}, {"description", "other problem"}, {"case_name", "matmul_x"}}})}};
  std::atomic<int> calls{0};
  ScopedLlm llm([&](const json&) -> json {
    if (++calls == 2) throw accelopt::StageError("llm_server", "HTTP 503: overloaded");
    return Reply("**PLAN:** keep x on chip\nBecause the profile shows ...");
  });
  json out = RunStage("plan", {{"beam", json::array({member})}, {"memory", memory}, {"plans_per_candidate", 3}, {"mode", "llm"},
                               {"prompts", SourcePath("prompts").string()}, {"max_concurrency", 1}},
                      dir.path());
  CHECK(out["plans"].size() == 2);
  REQUIRE(out["errors"].size() == 1);
  CHECK(out["errors"][0]["error"]["kind"] == "llm_server");
  CHECK(out["plans"][0]["title"] == "keep x on chip");
  CHECK(out["usage"]["total"]["requests"] == 2);
  CHECK(out["usage"]["total"]["failed"] == 1);
  auto requests = llm.Requests();
  REQUIRE(requests.size() == 3);
  const std::string system = requests[0]["messages"][0]["content"];
  const std::string user = requests[0]["messages"][1]["content"];
  CHECK_THAT(system, Catch::Contains("Fuse the sigmoid steps"));
  CHECK_THAT(system, Catch::Contains("y = silu(x)"));
  CHECK_THAT(system, !Catch::Contains("Matmul thing"));  // other problem's memory
  CHECK_THAT(system, Catch::Contains("mm_arithmetic_intensity"));
  CHECK_THAT(system, Catch::Contains("One subscript may not mix the two"));
  CHECK_THAT(user, Catch::Contains("hbm_read_bytes: 1048576 bytes"));
  CHECK_THAT(user, Catch::Contains("latency: 0.028 ms"));
  CHECK_THAT(user, !Catch::Contains("not_displayed"));
  CHECK_THAT(user, Catch::Contains("def forward(x)"));
  CHECK_THAT(user, Catch::Contains("nisa.reciprocal"));
  // The N calls differ (plan number, seed), so replay maps each call to its own answer.
  CHECK(requests[0]["seed"] != requests[1]["seed"]);
}

TEST_CASE("summarize with an LLM: the speedup is filled in and replies are parsed or recorded", "[optimize]") {
  TempDir dir;
  auto parent = dir.Write("parent.py", "a = 1\n");
  json records = json::array({Record("good", dir.Write("g.py", "a = 2\n").string(), parent.string(), 1.0, 0.5, "b0p0"),
                              Record("bad", dir.Write("b.py", "a = 3\n").string(), parent.string(), 1.0, 0.8, "b0p1")});
  ScopedLlm llm([](const json& request) {
    std::string user = request["messages"][1]["content"];
    if (user.find("a = 2") != std::string::npos) {
      return Reply("**TITLE:** Set a to two\n**DESCRIPTION:**\nThe fast kernel sets a to 2, 2x faster.\nBEFORE:\n```python\na = 1\n```\nAFTER:\n```python\na = 2\n```\n");
    }
    return Reply("it is faster somehow");
  });
  json out = RunStage("summarize", {{"records", records}, {"mode", "llm"}, {"prompts", SourcePath("prompts").string()}}, dir.path());
  REQUIRE(out["items"].size() == 1);
  CHECK(out["items"][0]["title"] == "Set a to two");
  CHECK(out["items"][0]["description"] == "The fast kernel sets a to 2, 2x faster.");
  CHECK(out["items"][0]["before"] == "a = 1");
  CHECK(out["items"][0]["after"] == "a = 2");
  REQUIRE(out["errors"].size() == 1);
  CHECK(out["errors"][0]["error"]["kind"] == "unparsable_reply");
  bool filled = false;
  for (const auto& r : llm.Requests()) {
    std::string user = r["messages"][1]["content"];
    if (user.find("a = 2") != std::string::npos) filled = user.find("2.000x faster") != std::string::npos;
    CHECK_THAT(user, !Catch::Contains("{{"));
  }
  CHECK(filled);
}

TEST_CASE("fixer: the error log goes to the model and a repaired kernel is re-profiled", "[optimize]") {
  TempDir dir;
  auto broken = dir.Write("broken.py", kBrokenSilu);
  json record = {{"id", "silu-i0-b0p1-s0"}, {"status", "failed"}, {"problem", "silu"}, {"case_name", "silu_M256_N1024"},
                 {"values", {{"M", 256}, {"N", 1024}}}, {"task", SourcePath("nkibench/reference/silu_M256_N1024_numpy.py").string()},
                 {"rel_tol", 2e-5}, {"kernel", broken.string()}, {"origin", "llm"}, {"parent_latency_ms", 1.0}, {"baseline_latency_ms", 1.0},
                 {"error", {{"kind", "compile_error"}, {"message", "broken.py:14: err_unsupported_mixing_basic_advanced_tensor_indexing"}}}};
  json untouched = {{"id", "other"}, {"status", "failed"}, {"error", {{"kind", "no_code_block"}, {"message", "-"}}}};
  std::atomic<int> calls{0};
  ScopedLlm llm([&](const json&) { return ++calls == 1 ? Reply("Sorry, no idea.") : Reply(Fenced(kFusedSilu)); });
  json out = RunStage("fixer", {{"records", json::array({record, untouched})}, {"rounds", 2}, {"mode", "llm"}, {"backend", "emulator"},
                                {"prompts", SourcePath("prompts").string()}},
                      dir.path());
  CHECK(out["attempted"] == 1);
  CHECK(out["fixed"] == 1);
  const json& fixed = out["records"][0];
  CHECK(fixed["status"] == "ok");
  CHECK(fixed["origin"] == "llm+fixer");
  CHECK(fixed["speedup"].get<double>() > 1.0);
  REQUIRE(fixed["fix_attempts"].size() == 2);
  CHECK(fixed["fix_attempts"][0]["result"]["kind"] == "no_code_block");
  CHECK(out["records"][1] == untouched);
  auto requests = llm.Requests();
  REQUIRE(requests.size() == 2);
  CHECK_THAT(requests[0]["messages"][1]["content"].get<std::string>(), Catch::Contains("err_unsupported_mixing_basic_advanced_tensor_indexing"));
  // rounds = 0 (the NKI default) passes records through without calls.
  json off = RunStage("fixer", {{"records", json::array({record})}, {"rounds", 0}}, dir.path());
  CHECK(off["records"][0]["status"] == "failed");
  CHECK(llm.Requests().size() == 2);
}
