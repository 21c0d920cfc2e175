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
//     N mid-size NKIBench candidates (our baseline kernels on the cases of
//     bench/mid_cases.py, cycling through the 14 problems) submitted at once
//     to a pool of 1 and of 2 workers; the ratio is the parallel speed-up.
//     Measured twice: "pool" times the workers' part only (inputs drawn and
//     outputs judged outside the timed region), "end to end" times whole
//     isolated calls, including the trusted host work every candidate needs
//     (a fresh hidden input set with its reference outputs, and judging).
//   [ACCELOPT_BENCH_REQUEST='{"seeds": [0]}'] accelopt-bench-worker search KERNEL REFERENCE [N=2] [M=2] [REL_TOL] [MEMORY_BYTES]
//     one problem inside a running search (bench/candidate_cost.py): after one
//     untimed call (worker start-up, the published seeds' draws cached, the
//     footprint of an input set learnt), N calls of KERNEL through a warm
//     1-worker pool, one after another (wall ms each, with the result's
//     timings), then 2*M calls submitted at once to a warm 2-worker pool
//     (candidates per hour). Prints one JSON line.
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include <spdlog/spdlog.h>

#include "core/allocator.h"
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

// `memory_bytes`: each worker's address-space cap (0: the default, 4 GiB).
worker::PoolOptions Pool(const fs::path& scratch, int workers, uint64_t memory_bytes = 0) {
  worker::PoolOptions options;
  options.workers = workers;
  if (memory_bytes > 0) options.config.memory_bytes = memory_bytes;
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
    worker::LimitHostBlas();
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

json Request(const json& mid_case) {
  json request = Request(mid_case["kernel"].get<std::string>(), mid_case["reference"].get<std::string>());
  if (mid_case.contains("rel_tol")) request["rel_tol"] = mid_case["rel_tol"];
  return request;
}

// Runs `count` tasks at once on their own threads; returns the wall time in ms.
template <typename Task>
double RunAll(int count, Task task) {
  auto start = Clock::now();
  std::vector<std::future<void>> futures;
  for (int i = 0; i < count; ++i) futures.push_back(std::async(std::launch::async, task, i));
  for (auto& f : futures) f.get();
  return Ms(start);
}

void Check(const json& result, const std::string& what) {
  if (!result.value("correct", false)) {
    std::fprintf(stderr, "%s failed: %s\n", what.c_str(), result.dump().substr(0, 2000).c_str());
    std::exit(1);
  }
}

void PrintCpu(const char* label) {
  rusage self{}, children{};
  getrusage(RUSAGE_SELF, &self);
  getrusage(RUSAGE_CHILDREN, &children);
  auto s = [](const timeval& t) { return t.tv_sec + t.tv_usec / 1e6; };
  std::printf("cpu %s: host %.1f s user + %.1f s system; workers %.1f s user + %.1f s system\n", label, s(self.ru_utime),
              s(self.ru_stime), s(children.ru_utime), s(children.ru_stime));
}

int Scaling(int n) {
  fs::path dir = fs::temp_directory_path() / ("accelopt-bench-" + std::to_string(getpid()));
  fs::create_directories(dir / "scratch");
  python::Exec("import sys\nsys.path.insert(0, " + json(std::string(ACCELOPT_SOURCE_DIR) + "/bench").dump() + ")");
  json cases = python::CallJson("mid_cases", "write_cases", {{"dir", (dir / "references").string()}});
  double pool_ms[3] = {0, 0, 0}, e2e_ms[3] = {0, 0, 0}, worker_sum[3] = {0, 0, 0};
  for (const auto& c : cases)  // fills the host's cache of the published seeds' draws (not measured)
    Check(python::CallJson("accelopt.sandbox.trusted", "run_unisolated", Request(c)), c["problem"].get<std::string>());
  for (int workers : {1, 2}) {
    worker::WorkerPool pool(Pool(dir / "scratch", workers));
    worker::LimitHostBlas();  // as ScopedWorkerPool does for a run
    // Warm every worker up (start-up is not part of the measurement).
    RunAll(workers, [&](int) {
      try {
        worker::IsolatedCall(pool, "sandbox_none", "none", nullptr, json::object());
      } catch (const std::exception&) {  // the call fails (no such module); the worker is up
      }
    });
    // Pool only: prepare every candidate first, time the worker calls, judge
    // afterwards. Best of two rounds: the first may still share the cores
    // with the host's idle BLAS threads winding down.
    for (int round = 0; round < 2; ++round) {
      std::vector<python::Packed> prepared(n);
      for (int i = 0; i < n; ++i)
        prepared[i] = python::CallPacked("accelopt.sandbox.trusted", "prepare",
                                         {{{"module", "accelopt.profile"}, {"function", "profile_kernel"},
                                           {"arg", Request(cases[i % cases.size()])}},
                                          {}});
      // References are computed in the background after prepare: not in the workers' time.
      python::CallJson("accelopt.sandbox.trusted", "settle", nullptr);
      std::vector<worker::CallOutcome> outcomes(n);
      double ms = RunAll(n, [&](int i) {
        const json& job = prepared[i].value["worker"];
        outcomes[i] = pool.Call(job["module"], job["function"], job["arg"], {}, &prepared[i].blobs);
      });
      double sum = 0;
      for (int i = 0; i < n; ++i) {
        sum += outcomes[i].wall_ms;
        json outcome = {{"ok", outcomes[i].ok}, {"result", outcomes[i].result}, {"integrity", outcomes[i].integrity}};
        if (!outcomes[i].ok) outcome["error"] = {{"kind", outcomes[i].kind}, {"message", outcomes[i].message}};
        Check(python::CallPacked("accelopt.sandbox.trusted", "finish",
                                 {{{"token", prepared[i].value["token"]}, {"outcome", outcome}}, outcomes[i].blobs})
                  .value,
              "pool candidate " + std::to_string(i));
      }
      if (round == 0 || ms < pool_ms[workers]) {
        pool_ms[workers] = ms;
        worker_sum[workers] = sum;
      }
    }
    // End to end: whole isolated calls, trusted host work included.
    e2e_ms[workers] = RunAll(n, [&](int i) {
      Check(worker::IsolatedCall(pool, "accelopt.profile", "profile_kernel", Request(cases[i % cases.size()]),
                                 json::object()),
            "candidate " + std::to_string(i));
    });
  }
  std::printf("workload: %d candidates, our NKIBench baselines on the mid-size cases of bench/mid_cases.py "
              "(5 seeds + 1 hidden input set each), emulator; pool: best of 2 rounds\n", n);
  for (int w : {1, 2})
    std::printf("%d worker(s): pool %6.0f ms (sum of worker round trips %6.0f ms), end to end %6.0f ms\n", w,
                pool_ms[w], worker_sum[w], e2e_ms[w]);
  std::printf("speed-up 2 vs 1 workers, pool:       %.2fx (target >= 1.8x; machine has %u cores)\n",
              pool_ms[1] / pool_ms[2], std::thread::hardware_concurrency());
  std::printf("speed-up 2 vs 1 workers, end to end: %.2fx (bounded by the host's trusted work, which 1 worker "
              "already overlaps on the other core)\n", e2e_ms[1] / e2e_ms[2]);
  fs::remove_all(dir);
  return 0;
}


int Search(const std::string& kernel, const std::string& reference, int n, int m, double rel_tol,
           uint64_t memory_bytes) {
  fs::path dir = fs::temp_directory_path() / ("accelopt-bench-" + std::to_string(getpid()));
  fs::create_directories(dir / "scratch");
  json request = Request(kernel, reference);
  if (rel_tol > 0) request["rel_tol"] = rel_tol;
  // ACCELOPT_BENCH_REQUEST: a JSON object merged into the request (bench/candidate_cost.py: a
  // screen's {"seeds": [0]}, a confirm's {"seeds": [21, 42, 63, 84], "timing": false}).
  if (const char* extra = std::getenv("ACCELOPT_BENCH_REQUEST"); extra && *extra) request.update(json::parse(extra));
  json out = json::object();
  {
    worker::WorkerPool pool(Pool(dir / "scratch", 1, memory_bytes));
    worker::LimitHostBlas();  // as ScopedWorkerPool does for a run
    auto start = Clock::now();
    json first = worker::IsolatedCall(pool, "accelopt.profile", "profile_kernel", request, json::object());
    out["first_ms"] = Ms(start);
    Check(first, "first call");
    std::vector<double> walls;
    json timings = json::array();
    for (int i = 0; i < n; ++i) {
      auto t = Clock::now();
      json r = worker::IsolatedCall(pool, "accelopt.profile", "profile_kernel", request, json::object());
      walls.push_back(Ms(t));
      Check(r, "search call " + std::to_string(i));
      timings.push_back(r.value("timings", json::object()));
    }
    out["search_ms"] = walls;
    out["search_timings"] = timings;
  }
  if (m > 0) {
    worker::WorkerPool pool(Pool(dir / "scratch", 2, memory_bytes));
    worker::LimitHostBlas();
    RunAll(2, [&](int) { Check(worker::IsolatedCall(pool, "accelopt.profile", "profile_kernel", request, json::object()), "warm-up"); });
    double ms = RunAll(2 * m, [&](int i) {
      Check(worker::IsolatedCall(pool, "accelopt.profile", "profile_kernel", request, json::object()),
            "throughput call " + std::to_string(i));
    });
    out["throughput_calls"] = 2 * m;
    out["throughput_ms"] = ms;
    out["candidates_per_hour"] = 3600e3 * 2 * m / ms;
  }
  std::printf("%s\n", out.dump().c_str());
  fs::remove_all(dir);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  accelopt::TuneAllocatorForArrays();  // as accelopt-host does
  // Errors only: warnings the references print (e.g. overflow in exp) are not results.
  spdlog::set_level(std::getenv("ACCELOPT_BENCH_DEBUG") ? spdlog::level::debug : spdlog::level::err);
  std::string mode = argc > 1 ? argv[1] : "overhead";
  python::Initialize();
  if (mode == "overhead") return Overhead(argc > 2 ? std::atoi(argv[2]) : 200, argc > 3 ? std::atoi(argv[3]) : 40);
  if (mode == "search" && argc > 3)
    return Search(argv[2], argv[3], argc > 4 ? std::atoi(argv[4]) : 2, argc > 5 ? std::atoi(argv[5]) : 2,
                  argc > 6 ? std::atof(argv[6]) : 0, argc > 7 ? std::strtoull(argv[7], nullptr, 10) : 0);
  if (mode == "scaling") {
    int rc = Scaling(argc > 2 ? std::atoi(argv[2]) : 20);
    PrintCpu("total");
    return rc;
  }
  std::fprintf(stderr, "usage: accelopt-bench-worker overhead [N_POOL N_FRESH] | scaling [N] | "
                       "search KERNEL REFERENCE [N M REL_TOL MEMORY_BYTES]\n");
  return 2;
}
