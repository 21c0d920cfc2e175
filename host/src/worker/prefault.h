// prefault.h - the pages a kernel run writes, learnt once per worker and
// faulted in ahead of every candidate.
//
// A candidate process is a fork of the worker: each page its run writes is
// first copied (copy-on-write), ~900 faults of 5-10 us each for a tiny
// kernel on our VMs (docs/isolation.md, Benchmarks). The worker learns once
// which pages a trusted warm-up run writes (the pages a forked child then
// maps exclusively, /proc/self/pagemap bit 56) and every spare process
// breaks copy-on-write on exactly those (MADV_POPULATE_WRITE) while it waits
// for its request, off the critical path. Contents never change.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

namespace accelopt::worker {

/// A run of pages: start address and length in bytes (page multiples).
struct PageRange {
  uintptr_t start = 0;
  size_t bytes = 0;
};

/// The present pages of this process's private writable mappings that it
/// maps exclusively (shared with no other process), as merged ranges. Reads
/// /proc/self/maps and /proc/self/pagemap; empty if they cannot be read.
std::vector<PageRange> ExclusivePages();

/// Forks a child (with CPython's fork hooks) that runs `warm_up` and
/// reports ExclusivePages() afterwards: the pages a run writes. Must be
/// called while /proc is readable (before Landlock). Empty on any failure.
std::vector<PageRange> LearnWrittenPages(const std::function<void()>& warm_up);

/// MADV_POPULATE_WRITE on every range (Linux >= 5.14); ranges no longer
/// mapped are skipped. Returns the bytes populated.
size_t PrefaultPages(const std::vector<PageRange>& ranges);

}  // namespace accelopt::worker
