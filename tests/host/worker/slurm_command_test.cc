// srun's command line for a worker under the slurm executor (docs/scale-out.md).
#include <catch2/catch.hpp>

#include <algorithm>

#include "worker/worker_process.h"

using namespace accelopt::worker;

TEST_CASE("a slurm worker is one srun job step whose shell moves the reply fd to stdout", "[worker][slurm]") {
  SlurmOptions slurm;
  slurm.partition = "trn1";
  slurm.time = "2:00:00";
  slurm.mem = "64G";
  slurm.gres = "neuron:1";
  slurm.cpus_per_task = 4;
  slurm.extra = {"--exclusive"};
  auto argv = SlurmCommand(slurm, 3, {"/opt/accelopt-host", "worker", "--id", "3"});
  auto has = [&argv](const std::string& arg) { return std::find(argv.begin(), argv.end(), arg) != argv.end(); };
  CHECK(argv.front() == "srun");
  for (const char* arg : {"--quiet", "--unbuffered", "--ntasks=1", "--kill-on-bad-exit=1", "--job-name=accelopt-w3",
                          "--partition=trn1", "--time=2:00:00", "--mem=64G", "--gres=neuron:1", "--cpus-per-task=4",
                          "--exclusive"})
    CHECK(has(arg));
  auto shell = std::find(argv.begin(), argv.end(), "/bin/sh");
  REQUIRE(shell != argv.end());
  CHECK(*(shell + 1) == "-c");
  CHECK(*(shell + 2) == "exec 3>&1 1>&2; exec \"$@\"");
  CHECK(std::vector<std::string>(shell + 4, argv.end()) ==
        std::vector<std::string>{"/opt/accelopt-host", "worker", "--id", "3"});

  SlurmOptions defaults;  // nothing the cluster should decide is forced
  auto plain = SlurmCommand(defaults, 0, {"w"});
  for (const auto& arg : plain) {
    CHECK(arg.rfind("--partition", 0) != 0);
    CHECK(arg.rfind("--gres", 0) != 0);
    CHECK(arg.rfind("--time", 0) != 0);
  }
}
