// Neuron-backend workers (the hardware sandbox profile, docs/trainium.md)
// against the stand-in SDK of tests/fixtures/neuron_sdk and hostile kernels
// of tests/python/sandbox/fixtures/hw_*.py.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "python/interpreter.h"
#include "support/test_support.h"
#include "worker/isolated_call.h"
#include "worker/pool.h"
#include "worker/worker_process.h"

namespace fs = std::filesystem;
using nlohmann::json;
using namespace accelopt::worker;

namespace {

const std::string kSandboxDir = std::string(ACCELOPT_TEST_DIR) + "/python/sandbox";
const std::string kFixtures = kSandboxDir + "/fixtures";
const std::string kSdk = std::string(ACCELOPT_TEST_DIR) + "/fixtures/neuron_sdk";

// The host side (this process's interpreter) finds the stand-in
// neuron-profile on PATH while it lives (tests/python/host_env.py).
class StandInPath {
 public:
  StandInPath() {
    const char* path = std::getenv("PATH");
    saved_ = accelopt::python::CallJson("host_env", "set_env",
                                        {{"PATH", kSdk + "/bin:" + std::string(path ? path : "/usr/bin:/bin")}});
  }
  ~StandInPath() { accelopt::python::CallJson("host_env", "set_env", saved_); }

 private:
  json saved_;
};

PoolOptions NeuronPool(const fs::path& scratch) {
  PoolOptions options;
  options.workers = 1;
  options.neuron_cores = "7";
  options.config.executable = ACCELOPT_HOST_BINARY;
  options.config.scratch_root = scratch.string();
  options.config.python_paths = {kSandboxDir, kSdk};
  options.config.memory_bytes = 3ull << 30;
  options.default_timeout_s = 60;
  return PoolOptionsFor(options, "neuron");
}

json Profile(WorkerPool& pool, const std::string& kernel) {
  json request = {{"kernel", kFixtures + "/" + kernel}, {"reference", kFixtures + "/ref_tiny.py"},
                  {"backend", "neuron"}, {"target", "trn1"}, {"seeds", {0, 21}}};
  // The static scan would refuse these kernels' imports first; the runtime boundary is under test.
  return IsolatedCall(pool, "accelopt.profile", "profile_kernel", request, {{"static_checks", false}});
}

// Processes on this machine whose command line contains `needle`.
int CountProcesses(const std::string& needle) {
  int count = 0;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    std::ifstream in(entry.path() / "cmdline");
    std::stringstream text;
    text << in.rdbuf();
    std::string line = text.str();
    for (char& c : line) {
      if (c == '\0') c = ' ';
    }
    if (line.find(needle) != std::string::npos) ++count;
  }
  return count;
}

}  // namespace

TEST_CASE("a neuron worker is pinned to its NeuronCore and sees no secrets", "[worker][trainium]") {
  WorkerConfig config;
  config.backend = "neuron";
  config.neuron_cores = {4, 6};
  setenv("NEURON_CC_FLAGS", "--auto-cast=none", 1);
  setenv("OPENAI_API_KEY", "sk-test-secret", 1);
  setenv("NEURON_RT_VISIBLE_CORES", "0-31", 1);
  auto env = WorkerEnvironment(config, 1, "/tmp/scratch");
  unsetenv("OPENAI_API_KEY");
  unsetenv("NEURON_RT_VISIBLE_CORES");
  unsetenv("NEURON_CC_FLAGS");
  auto has = [&env](const std::string& entry) { return std::find(env.begin(), env.end(), entry) != env.end(); };
  CHECK(has("NEURON_RT_VISIBLE_CORES=6"));
  CHECK_FALSE(has("NEURON_RT_VISIBLE_CORES=0-31"));
  CHECK(has("NEURON_CC_FLAGS=--auto-cast=none"));
  CHECK(has("TMPDIR=/tmp/scratch"));
  for (const auto& entry : env) CHECK(entry.find("sk-test-secret") == std::string::npos);
  config.backend = "emulator";  // emulator workers get no NEURON_* settings
  setenv("NEURON_CC_FLAGS", "--auto-cast=none", 1);
  auto emulator_env = WorkerEnvironment(config, 1, "/tmp/scratch");
  unsetenv("NEURON_CC_FLAGS");
  CHECK(std::find(emulator_env.begin(), emulator_env.end(), "NEURON_CC_FLAGS=--auto-cast=none") == emulator_env.end());
  config.gpu_devices = {2, 3};  // one worker per GPU
  auto gpu_env = WorkerEnvironment(config, 1, "/tmp/scratch");
  CHECK(std::find(gpu_env.begin(), gpu_env.end(), "CUDA_VISIBLE_DEVICES=3") != gpu_env.end());
}

TEST_CASE("neuron workers: the device's latency, a clean scratch, no stray process, no program outside the allow-list",
          "[worker][trainium][hostile]") {
  StandInPath path;
  accelopt::testing::TempDir dir;
  WorkerPool pool(NeuronPool(dir.path()));
  REQUIRE(pool.backend() == "neuron");
  CHECK(pool.NeuronCores() == std::vector<int>{7});

  json good = Profile(pool, "kernel_good.py");
  INFO(good.dump(2));
  CHECK(good["correct"] == true);
  CHECK(good["backend"] == "neuron");
  CHECK(good["estimated"] == false);
  CHECK(good["latency_ms"].is_number());
  for (const auto& entry : fs::directory_iterator(dir.path() / "neuron" / "w0"))
    CHECK(entry.path().filename().string().rfind("profile_", 0) != 0);  // the host removed what it profiled

  // A candidate that leaves a process running: every process it started is
  // killed before its reply leaves the worker.
  json stray = Profile(pool, "hw_stray_process.py");
  INFO(stray.dump(2));
  CHECK(stray["correct"] == true);
  CHECK(CountProcesses("time.sleep(97.25)") == 0);

  json outside = Profile(pool, "hw_exec_outside.py");
  INFO(outside.dump(2));
  CHECK(outside["correct"] == false);
  CHECK(outside["error"]["kind"] == "sandbox_violation");

  json after = Profile(pool, "kernel_good.py");  // the pool keeps serving
  CHECK(after["correct"] == true);
}

TEST_CASE("an emulator pool refuses a neuron call and the reverse", "[worker][trainium]") {
  accelopt::testing::TempDir dir;
  PoolOptions options;
  options.workers = 1;
  options.config.executable = ACCELOPT_HOST_BINARY;
  options.config.scratch_root = dir.path().string();
  WorkerPool pool(options);
  json request = {{"kernel", kFixtures + "/kernel_good.py"}, {"reference", kFixtures + "/ref_tiny.py"},
                  {"backend", "neuron"}, {"target", "trn1"}};
  CHECK_THROWS_WITH(IsolatedCall(pool, "accelopt.profile", "profile_kernel", request, json::object()),
                    Catch::Contains("runs the emulator backend"));
}
