// plugins/search/mcgs_core.h - the arithmetic of the Monte-Carlo graph search
// (docs/search.md): PUCT, progressive widening, seeded Dirichlet noise,
// leaf selection with virtual loss, transposition merging and
// backpropagation, on the JSON graph the stages carry. Pure functions
// without the plugin SDK (compiled into the tests as well:
// tests/host/search/mcgs_core_test.cc).
//
// One problem's graph ("case graph"):
//   {"root": "n0", "next_id": 1, "evaluations": 0, "baseline_latency_ms": x,
//    "incumbent": "n0", "done": false, "pending": [selection...],
//    "nodes": {"n0": node, ...}}
// node:
//   {"id", "hash", "status": "ok"|"failed"|"pending", "latency_ms", "N", "W",
//    "depth", "parent", "moves_ready", "moves": [move...], ...}
// move (an edge once expanded):
//   {"id", "rule", "title", "prior", "state": "untried"|"pending"|"expanded"|"invalid"|"pruned",
//    "child": node id or null, "n": edge visits, ...}
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace accelopt_search {

using nlohmann::json;

/// The search constants (all documented parameters of the pipeline).
struct SearchParams {
  double c_puct = 1.0;            ///< exploration weight of PUCT
  double widen_k = 1.0;           ///< progressive widening: ceil(k * N^alpha) children
  double widen_alpha = 0.5;
  double dirichlet_alpha = 0.3;   ///< root noise concentration
  double noise_eps = 0.25;        ///< root noise weight (0 = off)
  double virtual_loss = 1.0;      ///< value charged per in-flight visit while selecting
  double fail_value = -0.5;       ///< value of a failed candidate (log-speedup units)
  int workers = 1;                ///< selections (evaluations in flight) per problem and round
  int budget = 40;                ///< candidate evaluations per problem
  double min_gain = 0.005;        ///< a new incumbent is faster than the old one by more than this fraction
};

/// SearchParams from a stage's `with` (missing keys keep the defaults above).
SearchParams ParamsFrom(const json& with);

/// Q(s,a) + c_puct * P(s,a) * sqrt(N(s)) / (1 + N(s,a)).
double Puct(double q, double prior, double parent_visits, double edge_visits, double c_puct);

/// Children a node with `visits` visits may have: ceil(k * max(1, N)^alpha), at least 1.
int WidenLimit(double visits, double k, double alpha);

/// True when a correct kernel at `latency_ms` may replace the incumbent at `incumbent_ms`: it is faster by
/// more than the fraction `min_gain` (0 = any gain). Smaller differences are within the cost model's
/// error and would let a search chain moves that do nothing (docs/search.md, "Incumbent").
bool BeatsIncumbent(double latency_ms, double incumbent_ms, double min_gain);

/// Value of an evaluation: log(baseline / latency) for a correct kernel, `fail_value` otherwise.
double Value(bool ok, double latency_ms, double baseline_ms, double fail_value);

/// splitmix64 step; the search's only random source (portable, unlike std:: distributions).
uint64_t SplitMix64(uint64_t& state);
/// A 64-bit seed from a base seed, a round number and a text (e.g. the case name).
uint64_t DeriveSeed(int64_t seed, int64_t round, const std::string& text);
/// n samples of Dirichlet(alpha, ..., alpha), seeded; same seed -> same vector
/// on every platform (Marsaglia-Tsang gamma, Box-Muller normals). n == 0: empty.
std::vector<double> Dirichlet(uint64_t seed, size_t n, double alpha);
/// (1 - eps) * priors + eps * noise, element-wise.
std::vector<double> MixNoise(const std::vector<double>& priors, const std::vector<double>& noise, double eps);

/// Mean value W/N of a node (0 when unvisited).
double MeanValue(const json& node);

/// One selected leaf: expand move `move` of node `node`, reached by `path` (root first, node last).
struct Selection {
  std::vector<std::string> path;
  std::string node;
  int move = -1;
  double prior = 0;        ///< the move's prior as used (noise included at the root)
  json steps = json::array();  ///< per node on the path: {node, choice, scores...} for the trace
};

/// Selects up to `count` leaves in `graph` (a case graph) with virtual loss
/// between them: from the root, expand the best untried move (highest prior,
/// noisy at the root) while the node has fewer children than WidenLimit allows
/// or no child to descend into; otherwise descend to the child of highest
/// PUCT (children on the current path, failed or exhausted are skipped).
/// Chosen moves become "pending". Root noise: Dirichlet(seed) over the root's
/// live moves. Returns fewer selections when the graph is exhausted.
std::vector<Selection> SelectLeaves(json& graph, const SearchParams& params, uint64_t seed, int count);

/// True when nothing below the root can be expanded any more.
bool Exhausted(const json& graph);

/// Makes every "pruned" move of `graph` (a problem's graph) "untried" again, marked
/// "revived": true, and re-normalizes each touched node's priors over its live moves
/// by their `weight`. Pruning defers a move the tactic statistics predict to gain
/// little; once nothing else is left and the budget is not spent, those moves are
/// the best untried ones. Returns the number of moves revived.
int RevivePruned(json& graph);

/// Adds a visit with `value` to every node of `path` and to the edges between
/// consecutive nodes (the first move of a whose child is b).
void Backpropagate(json& graph, const std::vector<std::string>& path, double value);

/// The result of attaching a move's resulting state to the graph.
struct Merge {
  std::string child;   ///< the node the move leads to
  bool created = false;  ///< a new node (to evaluate); false: a transposition (or self-loop)
  bool self_loop = false;  ///< the move leads back to its own node
};

/// Move `move` of `node` produced a kernel whose canonical hash is `hash`:
/// if a node with that hash exists, the move becomes an edge to it
/// (transposition); otherwise a new pending node is created. `fields` are
/// copied into a new node. A self-loop marks the move "invalid".
Merge MergeState(json& graph, const std::string& node, int move, const std::string& hash, const json& fields);

/// Node id with `hash`, or "" when none.
std::string FindHash(const json& graph, const std::string& hash);

/// How a proposed move is weighted (native:mcgs_priors; docs/search.md "priors").
struct PriorRule {
  bool uniform = false;         ///< base 1 instead of 1/(1+rank)
  double tactic_weight = 1.0;   ///< exponent of the tactic factor (0: statistics ignored)
  int tactic_min_count = 3;     ///< evaluations before the statistics predict a gain (0: never)
  bool prune_predicted = false;  ///< the proposer's own estimate may prune
  bool prune_across_problems = false;  ///< other problems' statistics may prune too (prune_scope: all)
};

/// The unnormalized weight of a move and its predicted gain (nullopt: unknown).
struct MoveWeight {
  double weight = 1.0;
  std::optional<double> predicted;
};

/// Weight of the move at `rank` (0 = the proposer's first): base (`own_prior` when
/// positive, else 1/(1+rank) or 1) x (2 (improved+1)/(n+2))^tactic_weight from `stats`
/// (a tactics.json entry of every problem, or null). Predicted gain: exp(log_gain_sum /
/// correct) - 1 of `predict_stats` (the same entry's counts on the move's own problem, its
/// `problems.<name>`, or the whole entry with prune_across_problems; null: none) once those
/// hold tactic_min_count evaluations (-1 when all failed), else `estimate` with
/// prune_predicted. A `predict_stats` without `log_gain_sum` (a tactics.json written before
/// per-problem gains were kept) predicts nothing.
MoveWeight WeighMove(size_t rank, std::optional<double> own_prior, const json& stats, const json& predict_stats,
                     std::optional<double> estimate, const PriorRule& rule);

/// Records one evaluation of `rule` applied on a kernel of `problem` whose bottleneck is
/// `bottleneck` in `tactics` (tactics.json's object; created when null): n, improved
/// (speedup_vs_parent > 1), failed (!ok), log_gain_sum (of the correct ones), for the
/// entry and for its `problems.<problem>` (plugins/search/tactics.cc).
void RecordTactic(json& tactics, const std::string& rule, const std::string& bottleneck, const std::string& problem,
                  bool ok, double speedup_vs_parent);
/// The statistics entry of (rule, bottleneck), or null.
json TacticEntry(const json& tactics, const std::string& rule, const std::string& bottleneck);

/// The statistics that may prune a move on `problem`: `entry.problems[problem]`, or the
/// whole `entry` with rule.prune_across_problems; null when there are none.
json PredictionStats(const json& entry, const std::string& problem, const PriorRule& rule);

/// Normalizes `weights` to sum 1 (uniform when they sum to <= 0).
std::vector<double> Normalize(const std::vector<double>& weights);

}  // namespace accelopt_search
