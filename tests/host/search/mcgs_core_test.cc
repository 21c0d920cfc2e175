// The graph search's arithmetic on hand-built graphs (plugins/search/mcgs_core.cc):
// PUCT, progressive widening, seeded Dirichlet noise, selection with virtual
// loss, backpropagation and transposition merging.
#include <catch2/catch.hpp>

#include <cmath>
#include <numeric>
#include <set>

#include "mcgs_core.h"

using namespace accelopt_search;
using nlohmann::json;

namespace {

json Move(const std::string& id, double prior, const std::string& state = "untried", json child = nullptr, int n = 0) {
  return {{"id", id}, {"rule", id}, {"prior", prior}, {"state", state}, {"child", child}, {"n", n}};
}

json Node(const std::string& id, const std::string& hash, double n, double w, json moves = json::array(),
          const std::string& status = "ok") {
  return {{"id", id}, {"hash", hash}, {"status", status}, {"N", n}, {"W", w}, {"depth", 0},
          {"moves_ready", true}, {"moves", moves}};
}

// root n0 (N=5) with two expanded children: n1 (mean 0.2, edge n=2) and n2 (mean 0.05, edge n=2),
// and one untried move c (prior 0.1).
json TwoChildGraph() {
  json g = {{"root", "n0"}, {"next_id", 3}, {"nodes", json::object()}};
  g["nodes"]["n0"] = Node("n0", "h0", 5, 0.5,
                          json::array({Move("a", 0.5, "expanded", "n1", 2), Move("b", 0.4, "expanded", "n2", 2), Move("c", 0.1)}));
  g["nodes"]["n1"] = Node("n1", "h1", 2, 0.4, json::array({Move("d", 1.0)}));
  g["nodes"]["n2"] = Node("n2", "h2", 2, 0.1, json::array({Move("e", 1.0)}));
  return g;
}

SearchParams NoNoise() {
  SearchParams p;
  p.noise_eps = 0;
  return p;
}

}  // namespace

TEST_CASE("PUCT: Q plus c_puct * P * sqrt(N(s)) / (1 + N(s,a))", "[search][mcgs]") {
  CHECK(Puct(0.2, 0.5, 4, 1, 1.0) == Approx(0.2 + 0.5 * 2.0 / 2.0));
  CHECK(Puct(0.0, 0.25, 9, 0, 2.0) == Approx(2.0 * 0.25 * 3.0));
  CHECK(Puct(-0.1, 0.5, 0, 0, 1.0) == Approx(-0.1));  // no visits: no exploration bonus
}

TEST_CASE("progressive widening allows ceil(k * N^alpha) children, at least one", "[search][mcgs]") {
  CHECK(WidenLimit(0, 1.0, 0.5) == 1);
  CHECK(WidenLimit(1, 1.0, 0.5) == 1);
  CHECK(WidenLimit(2, 1.0, 0.5) == 2);   // ceil(1.414)
  CHECK(WidenLimit(4, 1.0, 0.5) == 2);   // exactly 2, not 3
  CHECK(WidenLimit(5, 1.0, 0.5) == 3);
  CHECK(WidenLimit(9, 2.0, 0.5) == 6);
  CHECK(WidenLimit(100, 0.5, 0.25) == 2);  // ceil(0.5 * 3.16)
}

TEST_CASE("value: log speedup over the baseline, a fixed penalty for a failure", "[search][mcgs]") {
  CHECK(Value(true, 0.5, 1.0, -0.5) == Approx(std::log(2.0)));
  CHECK(Value(true, 2.0, 1.0, -0.5) == Approx(-std::log(2.0)));
  CHECK(Value(false, 0.5, 1.0, -0.5) == -0.5);
  CHECK(Value(true, 0.0, 1.0, -0.7) == -0.7);
}

TEST_CASE("a new incumbent beats the old one by more than min_gain", "[search][mcgs]") {
  CHECK(BeatsIncumbent(9.0, 10.0, 0.005));
  CHECK_FALSE(BeatsIncumbent(9.991, 10.0, 0.005));  // 0.09 %: rope's retile steps, within the model's error
  CHECK_FALSE(BeatsIncumbent(9.95, 10.0, 0.005));   // exactly the threshold is not more than it
  CHECK(BeatsIncumbent(9.991, 10.0, 0.0));          // min_gain 0: any gain
  CHECK_FALSE(BeatsIncumbent(10.0, 10.0, 0.0));
  CHECK_FALSE(BeatsIncumbent(0.0, 10.0, 0.005));    // no latency
  CHECK(BeatsIncumbent(5.0, 1e300, 0.005));         // no incumbent latency yet
  CHECK(ParamsFrom(json::object()).min_gain == Approx(0.005));
  CHECK(ParamsFrom({{"min_gain", 0.0}}).min_gain == 0.0);
  CHECK(ParamsFrom({{"min_gain", 3.0}}).min_gain == Approx(0.5));  // clamped
}

TEST_CASE("Dirichlet noise: seeded, deterministic, on the simplex", "[search][mcgs]") {
  const auto a = Dirichlet(42, 5, 0.3);
  const auto b = Dirichlet(42, 5, 0.3);
  const auto c = Dirichlet(43, 5, 0.3);
  REQUIRE(a.size() == 5);
  CHECK(a == b);
  CHECK(a != c);
  CHECK(std::accumulate(a.begin(), a.end(), 0.0) == Approx(1.0));
  for (double x : a) CHECK(x >= 0.0);
  CHECK(Dirichlet(1, 0, 0.3).empty());
  CHECK(DeriveSeed(0, 3, "silu") == DeriveSeed(0, 3, "silu"));
  CHECK(DeriveSeed(0, 3, "silu") != DeriveSeed(0, 4, "silu"));
  CHECK(DeriveSeed(0, 3, "silu") != DeriveSeed(1, 3, "silu"));
  // alpha = 1 over many draws: each component averages 1/n
  double sum0 = 0;
  for (uint64_t s = 0; s < 4000; ++s) sum0 += Dirichlet(s, 4, 1.0)[0];
  CHECK(sum0 / 4000 == Approx(0.25).margin(0.02));
  // mixing
  const auto mixed = MixNoise({0.5, 0.5}, {1.0, 0.0}, 0.25);
  CHECK(mixed[0] == Approx(0.625));
  CHECK(mixed[1] == Approx(0.375));
}

TEST_CASE("selection descends by PUCT when the node is at its widening limit", "[search][mcgs]") {
  json g = TwoChildGraph();
  // N(n0)=5 -> limit ceil(sqrt 5)=3 > 2 children: expand the untried move c first.
  auto sel = SelectLeaves(g, NoNoise(), 1, 1);
  REQUIRE(sel.size() == 1);
  CHECK(sel[0].node == "n0");
  CHECK(g["nodes"]["n0"]["moves"][sel[0].move]["id"] == "c");
  CHECK(g["nodes"]["n0"]["moves"][2]["state"] == "pending");

  // N(n0)=4 -> limit 2 = children: descend. a: 0.2 + 0.5*2/3 = 0.533; b: 0.05 + 0.4*2/3 = 0.317.
  json h = TwoChildGraph();
  h["nodes"]["n0"]["N"] = 4;
  sel = SelectLeaves(h, NoNoise(), 1, 1);
  REQUIRE(sel.size() == 1);
  CHECK(sel[0].path == std::vector<std::string>({"n0", "n1"}));
  CHECK(sel[0].node == "n1");
  CHECK(h["nodes"]["n1"]["moves"][0]["id"] == "d");
  // the trace of the choice holds both PUCT scores
  const json scores = sel[0].steps[0]["scores"];
  REQUIRE(scores.size() == 2);
  CHECK(scores[0]["score"].get<double>() == Approx(0.2 + 0.5 * 2.0 / 3.0));
  CHECK(scores[1]["score"].get<double>() == Approx(0.05 + 0.4 * 2.0 / 3.0));
}

TEST_CASE("virtual loss sends the round's second selection elsewhere", "[search][mcgs]") {
  json g = TwoChildGraph();
  g["nodes"]["n0"]["N"] = 4;
  g["nodes"]["n0"]["moves"][2]["state"] = "pruned";  // no untried move at the root
  auto sel = SelectLeaves(g, NoNoise(), 1, 2);
  REQUIRE(sel.size() == 2);
  CHECK(sel[0].node == "n1");
  // n1's only move is pending now (n1 is no longer expandable), so the second goes to n2
  CHECK(sel[1].node == "n2");

  // With moves left in both, the virtual loss alone decides: n1 after one in-flight visit has
  // Q = (0.4 - 1)/5 = -0.12, PUCT -0.12 + 0.5*sqrt(5)/4 = 0.16 < n2's 0.05 + 0.4*sqrt(5)/3 = 0.348
  // (without the loss n1 scores 0.4/5 + 0.28 = 0.36 and wins again).
  json h = TwoChildGraph();
  h["nodes"]["n0"]["N"] = 4;
  h["nodes"]["n0"]["moves"][2]["state"] = "pruned";
  h["nodes"]["n1"]["moves"].push_back(Move("d2", 0.5));
  h["nodes"]["n1"]["N"] = 4;  // widening lets n1 expand two moves
  sel = SelectLeaves(h, NoNoise(), 1, 2);
  REQUIRE(sel.size() == 2);
  CHECK(sel[0].node == "n1");
  CHECK(sel[1].node == "n2");
  SearchParams no_loss = NoNoise();
  no_loss.virtual_loss = 0;
  json k = TwoChildGraph();
  k["nodes"]["n0"]["N"] = 4;
  k["nodes"]["n0"]["moves"][2]["state"] = "pruned";
  k["nodes"]["n1"]["moves"].push_back(Move("d2", 0.5));
  k["nodes"]["n1"]["N"] = 4;
  sel = SelectLeaves(k, no_loss, 1, 2);
  REQUIRE(sel.size() == 2);
  CHECK(sel[1].node == "n1");  // without the loss the same child wins twice
}

TEST_CASE("root noise is seeded: the same seed expands the same move, noise can reorder", "[search][mcgs]") {
  json base = {{"root", "n0"}, {"next_id", 1}, {"nodes", json::object()}};
  base["nodes"]["n0"] = Node("n0", "h0", 1, 0, json::array({Move("a", 0.34), Move("b", 0.33), Move("c", 0.33)}));
  SearchParams p;
  p.noise_eps = 0.9;
  std::set<std::string> chosen;
  for (uint64_t seed = 0; seed < 20; ++seed) {
    json g1 = base, g2 = base;
    auto s1 = SelectLeaves(g1, p, seed, 1);
    auto s2 = SelectLeaves(g2, p, seed, 1);
    REQUIRE(s1.size() == 1);
    CHECK(s1[0].move == s2[0].move);
    CHECK(s1[0].prior == s2[0].prior);
    chosen.insert(g1["nodes"]["n0"]["moves"][s1[0].move]["id"]);
  }
  CHECK(chosen.size() > 1);  // without noise "a" always wins
  json g = base;
  CHECK(g["nodes"]["n0"]["moves"][SelectLeaves(g, NoNoise(), 7, 1)[0].move]["id"] == "a");
}

TEST_CASE("an exhausted graph selects nothing; failed and on-path children are skipped", "[search][mcgs]") {
  json g = {{"root", "n0"}, {"next_id", 3}, {"nodes", json::object()}};
  g["nodes"]["n0"] = Node("n0", "h0", 3, 0, json::array({Move("a", 0.5, "expanded", "n1", 1), Move("b", 0.5, "expanded", "n2", 1)}));
  g["nodes"]["n1"] = Node("n1", "h1", 1, -0.5, json::array(), "failed");
  // n2's only move leads back to the root (a cycle through a transposition)
  g["nodes"]["n2"] = Node("n2", "h2", 1, 0.1, json::array({Move("back", 1.0, "expanded", "n0", 0)}));
  CHECK(Exhausted(g));
  CHECK(SelectLeaves(g, NoNoise(), 1, 2).empty());
  g["nodes"]["n2"]["moves"].push_back(Move("x", 0.5));
  CHECK_FALSE(Exhausted(g));
  auto sel = SelectLeaves(g, NoNoise(), 1, 1);
  REQUIRE(sel.size() == 1);
  CHECK(sel[0].path == std::vector<std::string>({"n0", "n2"}));
}

TEST_CASE("pruned moves are revived once nothing else is left, priors by their weight", "[search][mcgs]") {
  json g = {{"root", "n0"}, {"next_id", 2}, {"nodes", json::object()}};
  json p1 = Move("p1", 0.0, "pruned");
  p1["weight"] = 0.3;
  json p2 = Move("p2", 0.0, "pruned");
  p2["weight"] = 0.1;
  g["nodes"]["n0"] = Node("n0", "h0", 2, 0.2, json::array({Move("a", 1.0, "expanded", "n1", 1)}));
  g["nodes"]["n1"] = Node("n1", "h1", 1, 0.2, json::array({p1, Move("f", 0.0, "invalid"), p2}));
  REQUIRE(Exhausted(g));
  CHECK(RevivePruned(g) == 2);
  const json& moves = g["nodes"]["n1"]["moves"];
  CHECK(moves[0]["state"] == "untried");
  CHECK(moves[0]["revived"] == true);
  CHECK(moves[0]["prior"].get<double>() == Approx(0.75));
  CHECK(moves[2]["prior"].get<double>() == Approx(0.25));
  CHECK(moves[1]["state"] == "invalid");  // an invalid move stays dead
  CHECK(g["nodes"]["n0"]["moves"][0]["prior"].get<double>() == Approx(1.0));  // untouched node
  CHECK_FALSE(Exhausted(g));
  auto sel = SelectLeaves(g, NoNoise(), 1, 1);
  REQUIRE(sel.size() == 1);
  CHECK(sel[0].node == "n1");
  CHECK(g["nodes"]["n1"]["moves"][sel[0].move]["id"] == "p1");
  CHECK(RevivePruned(g) == 0);
}

TEST_CASE("backpropagation adds a visit and the value to each node and edge of the path", "[search][mcgs]") {
  json g = TwoChildGraph();
  g["nodes"]["n3"] = Node("n3", "h3", 0, 0);
  g["nodes"]["n1"]["moves"][0]["state"] = "expanded";
  g["nodes"]["n1"]["moves"][0]["child"] = "n3";
  Backpropagate(g, {"n0", "n1", "n3"}, 0.3);
  CHECK(g["nodes"]["n0"]["N"].get<double>() == 6);
  CHECK(g["nodes"]["n0"]["W"].get<double>() == Approx(0.8));
  CHECK(g["nodes"]["n1"]["N"].get<double>() == 3);
  CHECK(g["nodes"]["n3"]["N"].get<double>() == 1);
  CHECK(MeanValue(g["nodes"]["n3"]) == Approx(0.3));
  CHECK(g["nodes"]["n0"]["moves"][0]["n"].get<double>() == 3);  // edge n0 -a-> n1
  CHECK(g["nodes"]["n0"]["moves"][1]["n"].get<double>() == 2);  // untouched
  CHECK(g["nodes"]["n1"]["moves"][0]["n"].get<double>() == 1);
  CHECK(MeanValue(g["nodes"]["n2"]) == Approx(0.05));
}

TEST_CASE("transpositions: a known state becomes an edge, a new one a node, the own state a dropped move",
          "[search][mcgs]") {
  json g = TwoChildGraph();
  g["nodes"]["n1"]["moves"].push_back(Move("d2", 0.5));
  // n1 --d--> state h2 (n2's): no new node, the edge points at n2
  Merge m = MergeState(g, "n1", 0, "h2", {{"candidate", "x"}});
  CHECK_FALSE(m.created);
  CHECK(m.child == "n2");
  CHECK(g["nodes"]["n1"]["moves"][0]["state"] == "expanded");
  CHECK(g["nodes"]["n1"]["moves"][0]["child"] == "n2");
  CHECK(g["nodes"].size() == 3);
  // backing up through the transposition reaches n2's statistics from both parents
  Backpropagate(g, {"n0", "n1", "n2"}, 0.1);
  CHECK(g["nodes"]["n2"]["N"].get<double>() == 3);
  // n1 --d2--> a new state
  m = MergeState(g, "n1", 1, "h9", {{"candidate", "y"}});
  CHECK(m.created);
  CHECK(m.child == "n3");
  CHECK(g["next_id"] == 4);
  CHECK(g["nodes"]["n3"]["status"] == "pending");
  CHECK(g["nodes"]["n3"]["candidate"] == "y");
  CHECK(g["nodes"]["n3"]["parent"] == "n1");
  CHECK(FindHash(g, "h9") == "n3");
  // n0 --c--> its own state
  m = MergeState(g, "n0", 2, "h0", json::object());
  CHECK(m.self_loop);
  CHECK(g["nodes"]["n0"]["moves"][2]["state"] == "invalid");
}

TEST_CASE("priors normalize; a zero sum becomes uniform", "[search][mcgs]") {
  auto p = Normalize({1.0, 3.0});
  CHECK(p[0] == Approx(0.25));
  CHECK(p[1] == Approx(0.75));
  p = Normalize({0.0, 0.0, 0.0});
  CHECK(p[2] == Approx(1.0 / 3));
  CHECK(Normalize({}).empty());
}

TEST_CASE("move weights: rank or uniform base, the proposer's own prior, tactic factor, predicted gain", "[search][mcgs]") {
  PriorRule rule;
  CHECK(WeighMove(0, std::nullopt, nullptr, nullptr, std::nullopt, rule).weight == Approx(1.0));
  CHECK(WeighMove(3, std::nullopt, nullptr, nullptr, std::nullopt, rule).weight == Approx(0.25));
  CHECK(WeighMove(3, 0.6, nullptr, nullptr, std::nullopt, rule).weight == Approx(0.6));
  PriorRule uniform = rule;
  uniform.uniform = true;
  CHECK(WeighMove(3, std::nullopt, nullptr, nullptr, std::nullopt, uniform).weight == Approx(1.0));
  // 2 evaluations, both improved: factor 2 * 3 / 4 = 1.5; too few to predict a gain
  json stats = {{"n", 2}, {"improved", 2}, {"failed", 0}, {"log_gain_sum", 2 * std::log(1.1)}};
  MoveWeight w = WeighMove(1, std::nullopt, stats, stats, 0.001, rule);
  CHECK(w.weight == Approx(0.5 * 1.5));
  CHECK_FALSE(w.predicted.has_value());  // the proposer's estimate alone does not predict
  PriorRule trusting = rule;
  trusting.prune_predicted = true;
  CHECK(*WeighMove(1, std::nullopt, stats, stats, 0.001, trusting).predicted == Approx(0.001));
  // 4 evaluations, 1 failed, 1 improved: factor 2 * 2 / 6; mean log gain over the 3 correct ones
  stats = {{"n", 4}, {"improved", 1}, {"failed", 1}, {"log_gain_sum", std::log(1.06)}};
  w = WeighMove(0, std::nullopt, stats, stats, std::nullopt, rule);
  CHECK(w.weight == Approx(2.0 * 2.0 / 6.0));
  CHECK(*w.predicted == Approx(std::exp(std::log(1.06) / 3) - 1));
  // all failed: -100 %; tactic_weight 0 ignores the factor
  stats = {{"n", 3}, {"improved", 0}, {"failed", 3}, {"log_gain_sum", 0.0}};
  PriorRule ignore = rule;
  ignore.tactic_weight = 0;
  w = WeighMove(0, std::nullopt, stats, stats, std::nullopt, ignore);
  CHECK(w.weight == Approx(1.0));
  CHECK(*w.predicted == Approx(-1.0));
}
