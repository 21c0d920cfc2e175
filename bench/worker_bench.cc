// accelopt-bench-worker: measures the worker pool (docs/isolation.md,
// "Benchmarks"). Run through bench/worker_bench.sh, which saves the output
// under docs/benchmarks/.
//
//   accelopt-bench-worker overhead [N_POOL=200] [N_FRESH=40]
//     per-candidate overhead of isolation on tiny correct kernels: the pool
//     (1 worker, persistent) vs one fresh /usr/bin/python3.11 per candidate
//     doing the same imports and the same split harness. Overhead = median
//     wall time per candidate minus the median of the same harness run
//     in-process without isolation (accelopt.sandbox.trusted.run_unisolated).
//   accelopt-bench-worker scaling [N=20]
//     wall time of N mid-size kernels submitted at once to a pool of 1 and
//     of 2 workers (the ratio is the parallel speed-up).
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include <spdlog/spdlog.h>

#include "python/interpreter.h"
#include "worker/isolated_call.h"

namespace fs = std::filesystem;
namespace python = accelopt::python;
namespace worker = accelopt::worker;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

const std::string kFixtures = std::string(ACCELOPT_SOURCE_DIR) + "/tests/python/sandbox/fixtures";

double Ms(Clock::time_point start) { return std::chrono::duration<double, std::milli>(Clock::now() - start).count(); }

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  size_t n = values.size();
  return n == 0 ? 0 : (n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2);
}

// N distinct tiny kernels (the same doubling with a different constant split).
std::vector<std::string> WriteKernels(const fs::path& dir, int count) {
  std::ifstream in(kFixtures + "/kernel_good.py");
  std::string source((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> paths;
  for (int i = 0; i < count; ++i) {
    fs::path path = dir / ("k" + std::to_string(i) + ".py");
    std::ofstream(path) << "# candidate " << i << "\n" << source;
    paths.push_back(path.string());
  }
  return paths;
}

json Request(const std::string& kernel, const std::string& reference) {
  return {{"kernel", kernel}, {"reference", reference}, {"backend", "emulator"}, {"target", "trn1"}};
}

worker::PoolOptions Pool(const fs::path& scratch, int workers) {
  worker::PoolOptions options;
  options.workers = workers;
  options.config.executable = ACCELOPT_HOST_BINARY;
  options.config.scratch_root = scratch.string();
  return options;
}

double FreshProcess(const std::string& request) {
  static const std::string script =
      "import sys, json\n"
      "sys.path.insert(0, " + json(python::HostPythonDir()).dump() + ")\n"
      "import numpy, nki_emu\n"
      "from accelopt import profile\n"
      "from accelopt.sandbox import trusted\n"
      "r = trusted.run_unisolated(json.loads(sys.argv[1]))\n"
      "sys.exit(0 if r['correct'] else 3)\n";
  std::vector<std::string> args = {"python3.11", "-I", "-c", script, request};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::string blas = "OPENBLAS_NUM_THREADS=1";
  char* envp[] = {blas.data(), nullptr};
  auto start = Clock::now();
  pid_t pid = -1;
  if (posix_spawn(&pid, "/usr/bin/python3.11", nullptr, nullptr, argv.data(), envp) != 0) {
    std::fprintf(stderr, "cannot spawn /usr/bin/python3.11\n");
    std::exit(1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  double ms = Ms(start);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "fresh process failed (status %d)\n", status);
    std::exit(1);
  }
  return ms;
}

int Overhead(int n_pool, int n_fresh) {
  fs::path dir = fs::temp_directory_path() / ("accelopt-bench-" + std::to_string(getpid()));
  fs::create_directories(dir / "scratch");
  auto kernels = WriteKernels(dir, n_pool);
  std::string reference = kFixtures + "/ref_tiny.py";

  // Baseline and fresh processes first: no worker is alive to compete for the cores.
  std::vector<double> inproc, fresh, pool_ms;
  for (int i = 0; i < std::min(n_pool, 50); ++i) {
    auto start = Clock::now();
    json r = python::CallJson("accelopt.sandbox.trusted", "run_unisolated", Request(kernels[i], reference));
    inproc.push_back(Ms(start));
    if (!r.value("correct", false)) {
      std::fprintf(stderr, "in-process baseline failed: %s\n", r.dump().c_str());
      return 1;
    }
  }
  for (int i = 0; i < n_fresh; ++i) fresh.push_back(FreshProcess(Request(kernels[i], reference).dump()));
  {
    worker::WorkerPool pool(Pool(dir / "scratch", 1));
    // First call includes the worker's start-up: reported separately.
    auto start = Clock::now();
    json first = worker::IsolatedCall(pool, "accelopt.profile", "profile_kernel", Request(kernels[0], reference), json::object());
    double first_ms = Ms(start);
    for (int i = 0; i < n_pool; ++i) {
      auto t = Clock::now();
      json r = worker::IsolatedCall(pool, "accelopt.profile", "profile_kernel", Request(kernels[i], reference), json::object());
      pool_ms.push_back(Ms(t));
      if (!r.value("correct", false)) {
        std::fprintf(stderr, "pool candidate %d failed: %s\n", i, r.dump().c_str());
        return 1;
      }
    }
    std::printf("worker start-up + first candidate: %.1f ms (not counted below)\n", first_ms);
    (void)first;
  }
  double base = Median(inproc), pool_med = Median(pool_ms), fresh_med = Median(fresh);
  double pool_over = std::max(pool_med - base, 0.01), fresh_over = fresh_med - base;
  std::printf("tiny kernel: 128x64 float32 doubling, 5 seeds + 1 hidden input set, emulator\n");
  std::printf("in-process split harness (no isolation): median %8.2f ms over %zu candidates\n", base, inproc.size());
  std::printf("worker pool, 1 persistent worker:        median %8.2f ms over %zu candidates\n", pool_med, pool_ms.size());
  std::printf("fresh python3.11 per candidate:          median %8.2f ms over %zu candidates\n", fresh_med, fresh.size());
  std::printf("overhead per candidate: pool %.2f ms, fresh process %.2f ms\n", pool_over, fresh_over);
  std::printf("overhead ratio (fresh / pool): %.1fx (target >= 20x)\n", fresh_over / pool_over);
  fs::remove_all(dir);
  return 0;
}

int Scaling(int n) {
  fs::path dir = fs::temp_directory_path() / ("accelopt-bench-" + std::to_string(getpid()));
  fs::create_directories(dir / "scratch");
  std::string reference = std::string(ACCELOPT_SOURCE_DIR) + "/tests/python/harness/fixtures/ref_double.py";
  std::string kernel = std::string(ACCELOPT_SOURCE_DIR) + "/tests/python/harness/fixtures/kernel_ok.py";
  double wall[3] = {0, 0, 0};
  for (int workers : {1, 2}) {
    worker::WorkerPool pool(Pool(dir / "scratch", workers));
    // Warm every worker up (start-up is not part of the measurement).
    std::vector<std::future<json>> warm;
    for (int i = 0; i < workers; ++i)
      warm.push_back(std::async(std::launch::async, [&] {
        return worker::IsolatedCall(pool, "sandbox_none", "none", nullptr, json::object());
      }));
    for (auto& f : warm) {
      try {
        f.get();
      } catch (const std::exception&) {  // the call fails (no such module); the worker is up
      }
    }
    auto start = Clock::now();
    std::vector<std::future<json>> futures;
    for (int i = 0; i < n; ++i)
      futures.push_back(std::async(std::launch::async, [&] {
        return worker::IsolatedCall(pool, "accelopt.profile", "profile_kernel", Request(kernel, reference), json::object());
      }));
    for (auto& f : futures) {
      json r = f.get();
      if (!r.value("correct", false)) {
        std::fprintf(stderr, "scaling candidate failed: %s\n", r.dump().c_str());
        return 1;
      }
    }
    wall[workers] = Ms(start);
    std::printf("%d worker(s): %d mid-size kernels (256x512, 5 seeds + hidden) in %.0f ms (%.0f ms per kernel)\n", workers,
                n, wall[workers], wall[workers] / n);
  }
  std::printf("speed-up 2 vs 1 workers: %.2fx (target >= 1.8x; machine has %u cores)\n", wall[1] / wall[2],
              std::thread::hardware_concurrency());
  fs::remove_all(dir);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  spdlog::set_level(spdlog::level::warn);
  std::string mode = argc > 1 ? argv[1] : "overhead";
  python::Initialize();
  if (mode == "overhead") return Overhead(argc > 2 ? std::atoi(argv[2]) : 200, argc > 3 ? std::atoi(argv[3]) : 40);
  if (mode == "scaling") return Scaling(argc > 2 ? std::atoi(argv[2]) : 20);
  std::fprintf(stderr, "usage: accelopt-bench-worker overhead [N_POOL N_FRESH] | scaling [N]\n");
  return 2;
}
