// The three NKIBench pipelines (beam, agent, graph search) against a scripted
// OpenAI-compatible server that behaves like a strong but imperfect model
// (issue 37): it follows the answer format, has one good idea - a restructured
// rope kernel (the rotation's products split between the Vector and GpSimd
// engines, each in explicit nisa.tensor_tensor calls) that no single rule move
// produces - keeps proposing it (it converges), and now and then answers in
// prose, with "```Python" fences and bold labels, or with an HTTP 503. Each
// pipeline must reach the restructured kernel within budget 6 with at most
// kRequestsPerCandidate (12) requests per evaluated candidate (the small rope
// case, emulator; the kernel is 10% faster on the full case too). A model whose move-planner replies never name a move kind gets
// one re-ask each, produces no candidate, and the run exits 1 saying why.
#include <catch2/catch.hpp>

#include <atomic>
#include <fstream>
#include <iostream>
#include <mutex>

#include "host/optimize/optimize_fixture.h"

using namespace accelopt::testing;
using namespace accelopt::testing::optimize;
using nlohmann::json;

namespace {

// Requests (503s and re-asks included) per evaluated candidate that no pipeline may exceed
// against this model. A converging model gets one or two candidates evaluated, so the fixed
// cost of a round dominates: two planner calls (the planner converges), the executor call and
// its re-ask naming the repeat, a summary, plus the model's lapses (each prose reply re-asked
// once, each 503 retried). Measured at writing: beam 21 requests for 2 candidates, agent 9 for
// 1, graph search 11 for 1 (before issue 37: agent 507 for 1, graph search 33 for 1).
constexpr double kRequestsPerCandidate = 12.0;

// The restructured kernel: 2.2% faster than nkibench/kernels/rope_single_freq_apply_0.py on
// the small case and 10% on the full one (emulator, trn1); the four products and the two
// sums alternate between the Vector and the GpSimd engine, so both work at once.
const char* kSplitRope = R"PY(import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl

TILE_T = 512


@nki.jit
def kernel(x, freqs_cos, freqs_sin):
    D, T = x.shape
    H2 = D // 2
    assert D % 2 == 0 and H2 <= 128 and T % TILE_T == 0
    out = nl.ndarray((D, T), dtype=x.dtype, buffer=nl.shared_hbm)
    for j in nl.affine_range(T // TILE_T):
        x_lo = nl.load(x[0:H2, j * TILE_T:(j + 1) * TILE_T])
        x_hi = nl.load(x[H2:D, j * TILE_T:(j + 1) * TILE_T])
        cos_t = nl.load(freqs_cos[0:H2, j * TILE_T:(j + 1) * TILE_T])
        sin_t = nl.load(freqs_sin[0:H2, j * TILE_T:(j + 1) * TILE_T])
        a = nisa.tensor_tensor(x_lo, cos_t, op=nl.multiply, engine=nisa.vector_engine)
        b = nisa.tensor_tensor(x_hi, sin_t, op=nl.multiply, engine=nisa.gpsimd_engine)
        c = nisa.tensor_tensor(x_lo, sin_t, op=nl.multiply, engine=nisa.gpsimd_engine)
        d = nisa.tensor_tensor(x_hi, cos_t, op=nl.multiply, engine=nisa.vector_engine)
        out_lo = nisa.tensor_tensor(a, b, op=nl.subtract, engine=nisa.vector_engine)
        out_hi = nisa.tensor_tensor(c, d, op=nl.add, engine=nisa.gpsimd_engine)
        nl.store(out[0:H2, j * TILE_T:(j + 1) * TILE_T], value=out_lo)
        nl.store(out[H2:D, j * TILE_T:(j + 1) * TILE_T], value=out_hi)
    return out
)PY";

const char* kIdea = "split the rotation's products between the Vector and GpSimd engines";

// The model. Counters make its lapses deterministic with llm_concurrency=1.
class ConvergingModel {
 public:
  std::string Respond(const json& body) {
    ++requests_;
    const std::string system = body["messages"][0]["content"];
    const std::string user = body["messages"][1]["content"];
    if (system.rfind("You are a performance engineer", 0) == 0) {
      const int call = ++planner_;
      if (system.find("Move vocabulary") != std::string::npos) {  // the graph search's move planner
        if (call % 3 == 1 && user.find("could not be used") == std::string::npos)
          return std::string("**Plan:** I would ") + kIdea + "; the Vector Engine does all six operations today.";
        return std::string("MOVE: open\nPLAN: ") + kIdea +
               "\nThe four products and the two sums alternate between nisa.vector_engine and nisa.gpsimd_engine "
               "(explicit nisa.tensor_tensor calls); loads and stores stay as they are.";
      }
      return std::string("**PLAN:** ") + kIdea + "\n\n**Why:** the Vector Engine does all six operations; GpSimd is idle.";
    }
    if (system.rfind("You are an NKI kernel engineer", 0) == 0) {
      const int call = ++executor_;
      if (call % 4 == 2) return ScriptedLlmServer::kHttp503;
      if (call % 5 == 1 && user.find("could not be used") == std::string::npos)
        return "I would split the products between the two engines; that keeps both busy.";
      return std::string("**Kernel:**\n\n```Python\n") + kSplitRope + "```\n";
    }
    return std::string("TITLE: ") + kIdea + "\nDESCRIPTION:\nBoth engines work at once.\n";
  }
  int requests() const { return requests_.load(); }

 private:
  std::atomic<int> requests_{0}, planner_{0}, executor_{0};
};

std::vector<std::string> Args(const std::string& pipeline, const std::filesystem::path& run_dir, const std::string& url,
                              const std::string& cases = "small") {
  std::vector<std::string> args = {"run", SourcePath("pipelines/" + pipeline).string(), "--run-dir", run_dir.string()};
  for (const std::string& s : std::vector<std::string>{"vars.cases=" + cases, "vars.problems=[rope_single_freq_apply]",
                                                       "backend.nki=emulator", "vars.mode=llm", "vars.budget=6",
                                                       "vars.isolation=inprocess", "vars.llm_concurrency=1",
                                                       "llm.default.model=fake-model", "llm.default.base_url=" + url}) {
    args.push_back("--set");
    args.push_back(s);
  }
  return args;
}

// Candidates the run profiled (optimize/records.jsonl lines with a profile result).
int Evaluated(const std::filesystem::path& run_dir) {
  int n = 0;
  std::ifstream in(run_dir / "optimize" / "records.jsonl");
  for (std::string line; std::getline(in, line);) {
    const json record = json::parse(line, nullptr, false);
    n += record.is_object() && (record.value("status", "") == "ok" || record.contains("compiled"));
  }
  return n;
}

void CheckReachesTheRestructuredKernel(const std::string& pipeline, const std::string& cases = "small") {
  ConvergingModel model;
  ScriptedLlmServer server([&](const json& body) { return model.Respond(body); });
  TempDir dir;
  const auto run_dir = dir.path() / "run";
  auto result = RunHost(Args(pipeline, run_dir, server.BaseUrl(), cases));
  INFO(pipeline << "\n" << result.output);
  REQUIRE(result.exit_code == 0);
  REQUIRE(ReadJson(run_dir / "run.json")["status"] == "succeeded");
  const json row = ReadJson(run_dir / "optimize_results.json")["rows"][0];
  INFO(row.dump(2));
  CHECK(row["status"] == "improved");
  CHECK(row["best_latency_ms"].get<double>() < row["original_latency_ms"].get<double>() * 0.99);
  const std::string best = ReadFile(run_dir / "best" / (row["case_name"].get<std::string>() + ".py"));
  CHECK_THAT(best, Catch::Contains("engine=nisa.gpsimd_engine"));
  const int evaluated = Evaluated(run_dir);
  INFO("requests " << model.requests() << ", evaluated candidates " << evaluated);
  REQUIRE(evaluated >= 1);
  CHECK(model.requests() <= kRequestsPerCandidate * evaluated);
  if (cases != "small")  // the hidden full-size runs report what they measured (docs/benchmarks/llm-converging-model.txt)
    std::cout << pipeline << " (" << cases << "): " << model.requests() << " requests, " << evaluated
              << " evaluated candidates, " << row["original_latency_ms"].get<double>() << " -> "
              << row["best_latency_ms"].get<double>() << " ms" << std::endl;
}

}  // namespace

TEST_CASE("a converging model: the beam search reaches the restructured rope kernel with a handful of requests per candidate",
          "[search][optimize][e2e][llm][reask]") {
  CheckReachesTheRestructuredKernel("nkibench-optimize.yaml");
}

TEST_CASE("a converging model: the agent loop reaches the restructured rope kernel with a handful of requests per candidate",
          "[search][agent][e2e][llm][reask]") {
  CheckReachesTheRestructuredKernel("nkibench-agent.yaml");
}

TEST_CASE("a converging model: the graph search reaches the restructured rope kernel through the open move",
          "[search][mcgs][e2e][llm][reask]") {
  CheckReachesTheRestructuredKernel("nkibench-mcgs.yaml");
}

// The issue's own setting: the published rope baseline at full size (hidden: minutes each;
// run with `accelopt-tests "[llm-full-size]"`, figures in docs/benchmarks/llm-converging-model.txt).
TEST_CASE("a converging model at full size: the three pipelines reach the restructured rope kernel", "[.][llm-full-size]") {
  for (const std::string pipeline : {"nkibench-optimize.yaml", "nkibench-agent.yaml", "nkibench-mcgs.yaml"}) {
    SECTION(pipeline) { CheckReachesTheRestructuredKernel(pipeline, "full"); }
  }
}

TEST_CASE("graph search: an open move carries its plan text to the executor, its statistics are its own, a converged node is finished",
          "[search][mcgs][e2e][llm][reask]") {
  ConvergingModel model;
  std::mutex mutex;
  std::vector<std::string> planner_users, executor_users;
  ScriptedLlmServer server([&](const json& body) {
    const std::string system = body["messages"][0]["content"];
    const std::string user = body["messages"][1]["content"];
    std::string reply = model.Respond(body);
    std::lock_guard<std::mutex> lock(mutex);
    if (system.rfind("You are a performance engineer", 0) == 0) planner_users.push_back(user);
    if (system.rfind("You are an NKI kernel engineer", 0) == 0 && reply != ScriptedLlmServer::kHttp503) executor_users.push_back(user);
    return reply;
  });
  TempDir dir;
  const auto run_dir = dir.path() / "run";
  auto result = RunHost(Args("nkibench-mcgs.yaml", run_dir, server.BaseUrl()));
  INFO(result.output);
  REQUIRE(result.exit_code == 0);
  const json graph = ReadJson(run_dir / "search_graph.json");
  REQUIRE(graph["cases"].size() == 1);
  const json cg = graph["cases"].begin().value();
  const json& root = cg["nodes"][cg["root"].get<std::string>()];
  // Planner 1 answered in prose: one re-ask quoting what was wrong, then an open move.
  REQUIRE(planner_users.size() >= 2);
  CHECK(planner_users[0].find("could not be used") == std::string::npos);
  CHECK_THAT(planner_users[1], Catch::Contains("could not be used") && Catch::Contains("`MOVE: <kind>` line is required"));
  // The planner converged (the same open move twice): one edge, no further planner calls for the root.
  int open_edges = 0;
  for (const auto& move : root["moves"]) {
    if (move["kind"] != "open") continue;
    ++open_edges;
    CHECK(move["rule"] == "open");
    CHECK(move["prior"].get<double>() > 0);
    CHECK_THAT(move["text"].get<std::string>(), Catch::Contains(kIdea));
    CHECK(move["state"] == "expanded");
    CHECK(move["child"] == cg["incumbent"]);
  }
  CHECK(open_edges == 1);
  // The executor saw the open move's plan text.
  REQUIRE_FALSE(executor_users.empty());
  CHECK_THAT(executor_users[0], Catch::Contains("Move: `open`") && Catch::Contains(kIdea));
  // The incumbent's own open move gives back its kernel: one re-ask naming the repeat, then the node is finished.
  bool reask_named_repeat = false;
  for (const auto& user : executor_users) reask_named_repeat = reask_named_repeat || user.find("is a repeat") != std::string::npos;
  CHECK(reask_named_repeat);
  CHECK_THAT(ReadFile(run_dir / "events.jsonl"), Catch::Contains("\"converged\""));
  CHECK(cg["done_reason"] == "exhausted");
  // Tactic statistics of the open kind, kept like a rule's.
  CHECK(ReadJson(run_dir / "tactics.json").dump().find("\"open\"") != std::string::npos);
}

TEST_CASE("graph search: a model that never names a move kind gets one re-ask per plan; no candidate means exit 1 with the reason",
          "[search][mcgs][e2e][llm][reask]") {
  std::atomic<int> planner{0};
  ScriptedLlmServer server([&](const json& body) -> std::string {
    const std::string system = body["messages"][0]["content"];
    if (system.rfind("You are a performance engineer", 0) == 0) {
      ++planner;
      return std::string("**Plan:** I would ") + kIdea + ".";
    }
    return "unused";
  });
  TempDir dir;
  const auto run_dir = dir.path() / "run";
  std::vector<std::string> args = Args("nkibench-mcgs.yaml", run_dir, server.BaseUrl());
  args.push_back("--set");
  args.push_back("vars.moves=3");
  auto result = RunHost(args);
  INFO(result.output);
  CHECK(result.exit_code == 1);
  const json run = ReadJson(run_dir / "run.json");
  CHECK(run["status"] == "failed");
  CHECK(run["error"]["kind"] == "no_candidates");
  CHECK_THAT(run["error"]["message"].get<std::string>(), Catch::Contains("no candidate was produced"));
  CHECK_THAT(result.output, Catch::Contains("no candidate was produced"));
  CHECK_THAT(ReadFile(run_dir / "optimize_results.md"), Catch::Contains("no candidate was produced"));
  // Three planner calls for the root, each re-asked once, and nothing else.
  CHECK(planner.load() == 6);
}
