// moves_command.cc - `accelopt-host moves KERNEL.py [--reference REF]` (docs/cli.md, docs/rules.md).
#include "cli/moves_command.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "python/interpreter.h"

namespace accelopt::cli {

nlohmann::json ProfileInWorker(const ProfileOptions& options, const nlohmann::json& request);  // commands.cc
void SettleDrawStore();                                                                         // commands.cc

namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::invalid_argument("cannot read " + path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

void PrintTable(const MovesOptions& options, const nlohmann::json& profile, const nlohmann::json& plans) {
  std::cout << "moves for " << options.kernel;
  if (profile.is_object() && profile.value("correct", false) && profile["latency_ms"].is_number()) {
    const auto& m = profile["metrics"];
    std::printf(" (profiled: %.4f ms, bottleneck %s; ranked by the predicted gain; a search tries them in the "
                "order of `search #`)\n", profile["latency_ms"].get<double>(), m.value("bottleneck", "?").c_str());
  } else {
    std::cout << " (no profile: ranked by the rules' priors; --reference REF ranks by the kernel's metrics)\n";
  }
  if (plans.empty()) {
    std::cout << "  no rule applies\n";
    return;
  }
  const bool ranked_by_gain = !plans.empty() && plans[0].contains("search_rank");
  std::printf("%3s  %-9s %s\n", "#", "gain", ranked_by_gain ? "move (search #)" : "move");
  int rank = 0;
  for (const auto& plan : plans) {
    std::string gain = "-";
    if (plan.contains("predicted_gain") && plan["predicted_gain"].is_number()) {
      char buffer[32];
      std::snprintf(buffer, sizeof(buffer), "%.1f %%", 100.0 * plan["predicted_gain"].get<double>());
      gain = buffer;
    }
    std::string id = plan.value("id", "");
    if (ranked_by_gain && plan["search_rank"].is_number_integer()) id += " (" + std::to_string(plan["search_rank"].get<int>()) + ")";
    std::printf("%3d  %-9s %s\n", ++rank, gain.c_str(), id.c_str());
    std::cout << "               " << plan.value("description", "") << "\n";
    if (!plan.value("effect", "").empty()) std::cout << "               effect: " << plan.value("effect", "") << "\n";
  }
}

}  // namespace

int MovesCommand(const MovesOptions& options) {
  try {
    std::vector<std::string> python_paths;
    for (const auto& path : options.profile.python_paths) python_paths.push_back(std::filesystem::absolute(path).string());
    python::Initialize(python_paths);
  } catch (const python::PythonError& error) {
    std::cerr << "error: cannot start the embedded Python: " << error.what() << "\n";
    return kExitUsage;
  }
  std::string source;
  try {
    source = ReadFile(options.kernel);
  } catch (const std::exception& error) {
    std::cerr << "error: " << error.what() << "\n";
    return kExitUsage;
  }
  nlohmann::json profile = nullptr;
  bool profile_failed = false;
  nlohmann::json metrics = nlohmann::json::object();
  if (!options.reference.empty()) {
    nlohmann::json request = {{"kernel", std::filesystem::absolute(options.kernel).string()},
                              {"reference", std::filesystem::absolute(options.reference).string()},
                              {"backend", options.profile.backend},
                              {"target", options.target},
                              {"rel_tol", options.rel_tol}};
    try {
      profile = ProfileInWorker(options.profile, request);
    } catch (const std::exception& error) {
      profile = {{"correct", false}, {"error", {{"kind", "worker_error"}, {"message", error.what()}}}};
    }
    if (profile.value("correct", false) && profile["metrics"].is_object()) {
      metrics = profile["metrics"];
    } else {
      profile_failed = true;
      std::string message = profile.contains("error") && profile["error"].is_object() ? profile["error"].value("message", "") : "";
      std::cerr << "warning: the profile failed (" << message << "); moves are ranked without metrics\n";
    }
  }
  nlohmann::json reply;
  try {
    reply = python::CallJson(accelopt::api::kRulesPropose, {{"source", source},
                              {"metrics", metrics},
                              {"input_shapes", profile.is_object() ? profile.value("input_shapes", nlohmann::json::array())
                                                      : nlohmann::json::array()},
                              {"max_plans", options.max_moves},
                              {"seed", 0},
                              // With metrics, a gain per move: list them in that order (the
                              // column and the rank agree); search_rank keeps the searches' order.
                              {"rank", metrics.empty() ? "score" : "predicted_gain"}});
  } catch (const python::PythonError& error) {
    std::cerr << "error: accelopt.rules.propose: " << error.what() << "\n";
    return kExitUsage;
  }
  if (reply.contains("error") && reply["error"].is_object()) {
    std::cerr << "error: " << options.kernel << ": " << reply["error"].value("message", "") << "\n";
    return kExitUsage;
  }
  const nlohmann::json plans = reply.value("plans", nlohmann::json::array());
  if (options.json) {
    std::cout << nlohmann::json{{"kernel", options.kernel}, {"profile", profile}, {"plans", plans}}.dump(2) << "\n";
  } else {
    PrintTable(options, profile, plans);
  }
  if (!options.reference.empty()) {
    std::cout.flush();
    SettleDrawStore();  // the profile's published draws reach the disk store (after the answer is out)
  }
  return profile_failed ? kExitFailed : kExitOk;
}

}  // namespace accelopt::cli
