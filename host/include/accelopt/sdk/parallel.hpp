// accelopt/sdk/parallel.hpp - a parallel for-loop for stages that fan out
// independent work (LLM requests, file writes) over a few threads.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <functional>
#include <thread>
#include <vector>

namespace accelopt::sdk {

/// Runs fn(0), ..., fn(n-1) on up to `threads` threads (the caller's thread is one of
/// them; fewer when n is smaller; 1 when threads < 1). Indices are handed out in order,
/// each exactly once. fn must not throw: catch inside it and record the error per index.
inline void ParallelFor(size_t n, int threads, const std::function<void(size_t)>& fn) {
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i; (i = next.fetch_add(1)) < n;) fn(i);
  };
  const int count = std::max(1, std::min<int>(threads, static_cast<int>(std::min<size_t>(n, 1u << 20))));
  std::vector<std::thread> pool;
  for (int t = 1; t < count; ++t) pool.emplace_back(worker);
  worker();
  for (auto& thread : pool) thread.join();
}

}  // namespace accelopt::sdk
