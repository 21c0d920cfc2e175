// plugins/search/mcgs_core.cc - see mcgs_core.h.
#include "mcgs_core.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <utility>

namespace accelopt_search {
namespace {

constexpr double kPi = 3.14159265358979323846;

double Num(const json& object, const char* key, double fallback) {
  if (!object.is_object()) return fallback;
  auto it = object.find(key);
  return it != object.end() && it->is_number() ? it->get<double>() : fallback;
}

// [0, 1) with 53 random bits.
double Uniform(uint64_t& state) { return static_cast<double>(SplitMix64(state) >> 11) * (1.0 / 9007199254740992.0); }

double Normal(uint64_t& state) {
  const double u1 = 1.0 - Uniform(state);  // (0, 1]
  const double u2 = Uniform(state);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * kPi * u2);
}

// Gamma(shape, 1) by Marsaglia and Tsang; shape < 1 through Gamma(shape + 1) * U^(1/shape).
double Gamma(uint64_t& state, double shape) {
  if (shape < 1.0) {
    const double u = 1.0 - Uniform(state);
    return Gamma(state, shape + 1.0) * std::pow(u, 1.0 / shape);
  }
  const double d = shape - 1.0 / 3.0;
  const double c = 1.0 / std::sqrt(9.0 * d);
  for (;;) {
    const double x = Normal(state);
    double v = 1.0 + c * x;
    if (v <= 0) continue;
    v = v * v * v;
    const double u = Uniform(state);
    if (u < 1.0 - 0.0331 * x * x * x * x) return d * v;
    if (std::log(u) < 0.5 * x * x + d * (1.0 - v + std::log(v))) return d * v;
  }
}

bool Live(const json& move) {
  const std::string state = move.value("state", "untried");
  return state == "untried" || state == "pending" || state == "expanded";
}

// In-flight visits of the selections made so far in one SelectLeaves call.
struct VirtualVisits {
  std::map<std::string, int> node;
  std::map<std::pair<std::string, int>, int> edge;
};

double EffectiveVisits(const json& node, const VirtualVisits& vv) {
  auto it = vv.node.find(node.value("id", ""));
  return Num(node, "N", 0) + (it == vv.node.end() ? 0 : it->second);
}

double EffectiveMean(const json& node, const VirtualVisits& vv, double virtual_loss) {
  auto it = vv.node.find(node.value("id", ""));
  const int v = it == vv.node.end() ? 0 : it->second;
  const double n = Num(node, "N", 0) + v;
  return n > 0 ? (Num(node, "W", 0) - virtual_loss * v) / n : 0.0;
}

// Whether something can still be expanded at or below `id` (a node on `stack` counts as not).
bool Expandable(const json& nodes, const std::string& id, std::set<std::string>& stack) {
  if (!nodes.contains(id) || stack.count(id)) return false;
  const json& node = nodes[id];
  if (node.value("status", "") != "ok" || !node.value("moves_ready", false)) return false;
  for (const auto& move : node.value("moves", json::array())) {
    if (move.value("state", "") == "untried") return true;
  }
  stack.insert(id);
  bool found = false;
  for (const auto& move : node.value("moves", json::array())) {
    if (move.value("state", "") == "expanded" && move["child"].is_string() && Expandable(nodes, move["child"], stack)) {
      found = true;
      break;
    }
  }
  stack.erase(id);
  return found;
}

std::vector<double> MovePriors(const json& node) {
  std::vector<double> priors;
  for (const auto& move : node.value("moves", json::array())) priors.push_back(Live(move) ? Num(move, "prior", 0) : 0.0);
  return priors;
}

}  // namespace

SearchParams ParamsFrom(const json& with) {
  SearchParams p;
  p.c_puct = Num(with, "c_puct", p.c_puct);
  p.widen_k = Num(with, "widen_k", p.widen_k);
  p.widen_alpha = Num(with, "widen_alpha", p.widen_alpha);
  p.dirichlet_alpha = Num(with, "dirichlet_alpha", p.dirichlet_alpha);
  p.noise_eps = Num(with, "noise_eps", p.noise_eps);
  p.virtual_loss = Num(with, "virtual_loss", p.virtual_loss);
  p.fail_value = Num(with, "fail_value", p.fail_value);
  p.workers = std::max(1, static_cast<int>(Num(with, "workers", p.workers)));
  p.budget = std::max(0, static_cast<int>(Num(with, "budget", p.budget)));
  p.min_gain = std::clamp(Num(with, "min_gain", p.min_gain), 0.0, 0.5);
  return p;
}

bool BeatsIncumbent(double latency_ms, double incumbent_ms, double min_gain) {
  return latency_ms > 0 && latency_ms < incumbent_ms * (1.0 - min_gain);
}

double Puct(double q, double prior, double parent_visits, double edge_visits, double c_puct) {
  return q + c_puct * prior * std::sqrt(std::max(0.0, parent_visits)) / (1.0 + edge_visits);
}

int WidenLimit(double visits, double k, double alpha) {
  const double limit = std::ceil(k * std::pow(std::max(1.0, visits), alpha) - 1e-9);
  return std::max(1, static_cast<int>(limit));
}

double Value(bool ok, double latency_ms, double baseline_ms, double fail_value) {
  if (!ok || !(latency_ms > 0) || !(baseline_ms > 0)) return fail_value;
  return std::log(baseline_ms / latency_ms);
}

uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

uint64_t DeriveSeed(int64_t seed, int64_t round, const std::string& text) {
  uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a 64
  for (unsigned char c : text) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  uint64_t state = static_cast<uint64_t>(seed) * 0x9E3779B97F4A7C15ULL ^ h;
  SplitMix64(state);
  state ^= static_cast<uint64_t>(round) * 0xD1B54A32D192ED03ULL;
  return SplitMix64(state);
}

std::vector<double> Dirichlet(uint64_t seed, size_t n, double alpha) {
  std::vector<double> out(n, 0.0);
  if (n == 0) return out;
  uint64_t state = seed;
  double sum = 0;
  for (auto& x : out) {
    x = Gamma(state, alpha > 0 ? alpha : 1e-3);
    sum += x;
  }
  if (!(sum > 0)) return std::vector<double>(n, 1.0 / static_cast<double>(n));
  for (auto& x : out) x /= sum;
  return out;
}

std::vector<double> MixNoise(const std::vector<double>& priors, const std::vector<double>& noise, double eps) {
  std::vector<double> out(priors.size());
  for (size_t i = 0; i < priors.size(); ++i) out[i] = (1.0 - eps) * priors[i] + eps * (i < noise.size() ? noise[i] : 0.0);
  return out;
}

double MeanValue(const json& node) {
  const double n = Num(node, "N", 0);
  return n > 0 ? Num(node, "W", 0) / n : 0.0;
}

bool Exhausted(const json& graph) {
  std::set<std::string> stack;
  return !Expandable(graph.value("nodes", json::object()), graph.value("root", ""), stack);
}

int RevivePruned(json& graph) {
  int revived = 0;
  for (auto& [id, node] : graph["nodes"].items()) {
    json& moves = node["moves"];
    bool touched = false;
    for (auto& move : moves) {
      if (move.value("state", "") != "pruned") continue;
      move["state"] = "untried";
      move["revived"] = true;
      touched = true;
      ++revived;
    }
    if (!touched) continue;
    std::vector<size_t> live;
    std::vector<double> weights;
    for (size_t i = 0; i < moves.size(); ++i) {
      if (!Live(moves[i])) continue;
      live.push_back(i);
      weights.push_back(Num(moves[i], "weight", 1.0));
    }
    const std::vector<double> priors = Normalize(weights);
    for (size_t j = 0; j < live.size(); ++j) moves[live[j]]["prior"] = priors[j];
  }
  return revived;
}

std::vector<Selection> SelectLeaves(json& graph, const SearchParams& params, uint64_t seed, int count) {
  std::vector<Selection> out;
  json& nodes = graph["nodes"];
  const std::string root = graph.value("root", "");
  if (!nodes.contains(root)) return out;

  // Root noise over the root's live moves, drawn once per call.
  std::vector<double> root_priors = MovePriors(nodes[root]);
  if (params.noise_eps > 0 && !root_priors.empty()) {
    std::vector<size_t> live;
    const json& moves = nodes[root]["moves"];
    for (size_t i = 0; i < moves.size(); ++i) {
      if (Live(moves[i])) live.push_back(i);
    }
    std::vector<double> noise = Dirichlet(seed, live.size(), params.dirichlet_alpha);
    std::vector<double> full(root_priors.size(), 0.0);
    for (size_t j = 0; j < live.size(); ++j) full[live[j]] = noise[j];
    std::vector<double> mixed = MixNoise(root_priors, full, params.noise_eps);
    for (size_t i = 0; i < mixed.size(); ++i) root_priors[i] = Live(moves[i]) ? mixed[i] : 0.0;
  }

  VirtualVisits vv;
  for (int k = 0; k < count; ++k) {
    Selection sel;
    std::set<std::string> on_path;
    std::string s = root;
    bool found = false;
    for (size_t depth = 0; depth <= nodes.size(); ++depth) {
      sel.path.push_back(s);
      on_path.insert(s);
      json& node = nodes[s];
      if (node.value("status", "") != "ok" || !node.value("moves_ready", false)) break;
      json& moves = node["moves"];
      const std::vector<double> priors = s == root ? root_priors : MovePriors(node);
      int children = 0;
      int best_untried = -1;
      for (size_t i = 0; i < moves.size(); ++i) {
        const std::string state = moves[i].value("state", "untried");
        if (state == "expanded" || state == "pending") ++children;
        if (state == "untried" && (best_untried < 0 || priors[i] > priors[best_untried])) best_untried = static_cast<int>(i);
      }
      const double visits = EffectiveVisits(node, vv);
      const int allowed = WidenLimit(visits, params.widen_k, params.widen_alpha);
      // Children worth descending into, scored by PUCT.
      int best_child = -1;
      double best_score = 0;
      json scores = json::array();
      for (size_t i = 0; i < moves.size(); ++i) {
        if (moves[i].value("state", "") != "expanded" || !moves[i]["child"].is_string()) continue;
        const std::string child = moves[i]["child"];
        if (on_path.count(child)) continue;
        std::set<std::string> stack = on_path;
        if (!Expandable(nodes, child, stack)) continue;
        auto e = vv.edge.find({s, static_cast<int>(i)});
        const double edge_visits = Num(moves[i], "n", 0) + (e == vv.edge.end() ? 0 : e->second);
        const double q = EffectiveMean(nodes[child], vv, params.virtual_loss);
        const double score = Puct(q, priors[i], visits, edge_visits, params.c_puct);
        scores.push_back({{"move", i}, {"child", child}, {"q", q}, {"prior", priors[i]}, {"score", score}});
        if (best_child < 0 || score > best_score) {
          best_child = static_cast<int>(i);
          best_score = score;
        }
      }
      json step = {{"node", s}, {"visits", visits}, {"children", children}, {"allowed", allowed}};
      if (best_untried >= 0 && (children < allowed || best_child < 0)) {
        moves[best_untried]["state"] = "pending";
        sel.node = s;
        sel.move = best_untried;
        sel.prior = priors[best_untried];
        step["choice"] = "expand";
        step["move"] = best_untried;
        sel.steps.push_back(step);
        found = true;
        break;
      }
      if (best_child < 0) break;
      step["choice"] = "descend";
      step["move"] = best_child;
      step["scores"] = scores;
      sel.steps.push_back(step);
      s = moves[best_child]["child"].get<std::string>();
    }
    if (!found) break;
    // Virtual loss along the path until the evaluation comes back.
    for (size_t i = 0; i < sel.path.size(); ++i) {
      vv.node[sel.path[i]] += 1;
      if (i + 1 < sel.path.size()) {
        const json& moves = nodes[sel.path[i]]["moves"];
        for (size_t m = 0; m < moves.size(); ++m) {
          if (moves[m].value("state", "") == "expanded" && moves[m]["child"] == sel.path[i + 1]) {
            vv.edge[{sel.path[i], static_cast<int>(m)}] += 1;
            break;
          }
        }
      }
    }
    out.push_back(std::move(sel));
  }
  return out;
}

void Backpropagate(json& graph, const std::vector<std::string>& path, double value) {
  json& nodes = graph["nodes"];
  for (size_t i = 0; i < path.size(); ++i) {
    if (!nodes.contains(path[i])) continue;
    json& node = nodes[path[i]];
    node["N"] = Num(node, "N", 0) + 1;
    node["W"] = Num(node, "W", 0) + value;
    if (i + 1 < path.size()) {
      for (auto& move : node["moves"]) {
        if (move.value("state", "") == "expanded" && move["child"] == path[i + 1]) {
          move["n"] = Num(move, "n", 0) + 1;
          break;
        }
      }
    }
  }
}

std::string FindHash(const json& graph, const std::string& hash) {
  if (!graph.contains("nodes") || !graph["nodes"].is_object()) return "";
  for (const auto& [id, node] : graph["nodes"].items()) {
    if (node.value("hash", "") == hash) return id;
  }
  return "";
}

Merge MergeState(json& graph, const std::string& node, int move, const std::string& hash, const json& fields) {
  Merge out;
  json& nodes = graph["nodes"];
  json& m = nodes[node]["moves"][move];
  const std::string existing = FindHash(graph, hash);
  if (existing == node) {
    m["state"] = "invalid";
    m["child"] = nullptr;
    m["error"] = {{"kind", "unchanged"}, {"message", "the move leads back to the same kernel state"}};
    out.child = node;
    out.self_loop = true;
    return out;
  }
  if (!existing.empty()) {
    m["state"] = "expanded";
    m["child"] = existing;
    out.child = existing;
    return out;
  }
  const int64_t next = graph.value("next_id", int64_t{1});
  const std::string id = "n" + std::to_string(next);
  graph["next_id"] = next + 1;
  json created = fields.is_object() ? fields : json::object();
  created["id"] = id;
  created["hash"] = hash;
  created["status"] = "pending";
  created["N"] = 0;
  created["W"] = 0.0;
  created["depth"] = nodes[node].value("depth", 0) + 1;
  created["parent"] = node;
  created["moves_ready"] = false;
  created["moves"] = json::array();
  nodes[id] = created;
  m["state"] = "expanded";
  m["child"] = id;
  out.child = id;
  out.created = true;
  return out;
}

MoveWeight WeighMove(size_t rank, std::optional<double> own_prior, const json& stats, const json& predict_stats,
                     std::optional<double> estimate, const PriorRule& rule) {
  MoveWeight out;
  double base = rule.uniform ? 1.0 : 1.0 / (1.0 + static_cast<double>(rank));
  if (own_prior && *own_prior > 0) base = *own_prior;
  double factor = 1.0;
  if (rule.prune_predicted) out.predicted = estimate;
  if (stats.is_object()) {
    const double n = Num(stats, "n", 0), improved = Num(stats, "improved", 0);
    factor = 2.0 * (improved + 1.0) / (n + 2.0);
  }
  if (predict_stats.is_object() && predict_stats.contains("log_gain_sum")) {
    const double n = Num(predict_stats, "n", 0), failed = Num(predict_stats, "failed", 0);
    if (rule.tactic_min_count > 0 && n >= rule.tactic_min_count) {
      out.predicted = n - failed > 0 ? std::exp(Num(predict_stats, "log_gain_sum", 0) / (n - failed)) - 1.0 : -1.0;
    }
  }
  out.weight = base * (rule.tactic_weight > 0 ? std::pow(factor, rule.tactic_weight) : 1.0);
  return out;
}

json PredictionStats(const json& entry, const std::string& problem, const PriorRule& rule) {
  if (!entry.is_object()) return json();
  if (rule.prune_across_problems) return entry;
  const json problems = entry.value("problems", json::object());
  const std::string key = problem.empty() ? "?" : problem;
  return problems.is_object() && problems.contains(key) ? problems[key] : json();
}

std::vector<double> Normalize(const std::vector<double>& weights) {
  double sum = 0;
  for (double w : weights) sum += std::max(0.0, w);
  std::vector<double> out(weights.size(), weights.empty() ? 0.0 : 1.0 / static_cast<double>(weights.size()));
  if (!(sum > 0)) return out;
  for (size_t i = 0; i < weights.size(); ++i) out[i] = std::max(0.0, weights[i]) / sum;
  return out;
}

}  // namespace accelopt_search
