// The slurm executor end to end on the one-node cluster of
// scripts/slurm-local.sh (docs/scale-out.md). Skipped, saying why, where
// Slurm cannot start (not root, packages missing, daemons refused).
#include <catch2/catch.hpp>

#include <unistd.h>

#include <array>
#include <cstdio>
#include <map>
#include <string>

#include "support/test_support.h"

using namespace accelopt::testing;
using json = nlohmann::json;

namespace {

// Runs `command` in a shell; returns (exit status, stdout+stderr).
std::pair<int, std::string> Shell(const std::string& command) {
  std::string output;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (!pipe) return {-1, "popen failed"};
  std::array<char, 4096> buffer;
  size_t n;
  while ((n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0) output.append(buffer.data(), n);
  int status = ::pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

// SLURM_CONF=... for the local cluster, or "" with *why set when it cannot start.
std::string LocalCluster(std::string* why) {
  if (geteuid() != 0) {
    *why = "not root: slurmctld and slurmd need root here";
    return "";
  }
  if (Shell("command -v slurmctld && command -v munged").first != 0) {
    *why = "slurm-wlm or munge is not installed (scripts/setup.sh installs them)";
    return "";
  }
  auto [status, output] = Shell("bash " + SourcePath("scripts/slurm-local.sh").string() + " up");
  auto at = output.find("export SLURM_CONF=");
  if (status != 0 || at == std::string::npos) {
    *why = "scripts/slurm-local.sh up failed: " + output;
    return "";
  }
  std::string conf = output.substr(at + std::string("export ").size());
  return conf.substr(0, conf.find('\n'));
}

std::map<std::string, json> ProfilesByProblem(const std::filesystem::path& run_dir) {
  std::map<std::string, json> out;
  for (const auto& entry : ReadJson(run_dir / "profile_results.json")) out[entry["case"]["problem"]] = entry["profile"];
  return out;
}

}  // namespace

TEST_CASE("the small main job runs through a one-node Slurm cluster and gives the local results",
          "[cli][slurm][e2e]") {
  std::string why;
  std::string slurm_conf = LocalCluster(&why);
  if (slurm_conf.empty()) {
    WARN("skipped: " + why);
    return;
  }
  TempDir dir;
  std::vector<std::string> args = {"run", SourcePath("pipelines/nkibench-profile.yaml").string(), "--set",
                                   "backend.nki=emulator", "--set", "vars.cases=small", "--set",
                                   "vars.problems=[silu, mamba, matmul]", "--workers", "2"};
  auto local_args = args;
  local_args.insert(local_args.end(), {"--run-dir", (dir.path() / "local").string()});
  auto local = RunHostWithEnv({"ACCELOPT_NO_PROGRESS=1"}, local_args);
  INFO(local.output);
  REQUIRE(local.exit_code == 0);

  auto slurm_args = args;
  slurm_args.insert(slurm_args.end(), {"--executor", "slurm", "--run-dir", (dir.path() / "slurm").string()});
  auto slurm = RunHostWithEnv({slurm_conf, "ACCELOPT_NO_PROGRESS=1"}, slurm_args);
  INFO(slurm.output);
  REQUIRE(slurm.exit_code == 0);
  json run = ReadJson(dir.path() / "slurm" / "run.json");
  CHECK(run["services"]["workers"]["executor"] == "slurm");
  CHECK(run["services"]["workers"]["crashes"] == 0);
  CHECK(run["services"]["workers"]["sandbox_warnings"].empty());  // the same sandbox inside the job step

  auto expected = ProfilesByProblem(dir.path() / "local");
  auto got = ProfilesByProblem(dir.path() / "slurm");
  REQUIRE(got.size() == expected.size());
  for (const auto& [problem, profile] : expected) {
    INFO(problem);
    CHECK(got[problem]["correct"] == profile["correct"]);
    CHECK(got[problem]["latency"] == profile["latency"]);  // the emulator's estimate is deterministic
  }
}
