#include "worker/prefault.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>

#include "worker/candidate_process.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

namespace accelopt::worker {
namespace {

constexpr uint64_t kPresent = 1ull << 63;
constexpr uint64_t kExclusive = 1ull << 56;  // Documentation/admin-guide/mm/pagemap.rst

bool ReadAll(int fd, void* data, size_t size) {
  auto* bytes = static_cast<char*>(data);
  while (size > 0) {
    ssize_t n = read(fd, bytes, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    bytes += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

bool WriteAll(int fd, const void* data, size_t size) {
  const auto* bytes = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = write(fd, bytes, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    bytes += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

std::vector<PageRange> ExclusivePages() {
  std::vector<PageRange> ranges;
  FILE* maps = std::fopen("/proc/self/maps", "r");
  int pagemap = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  if (maps == nullptr || pagemap < 0) {
    if (maps) std::fclose(maps);
    if (pagemap >= 0) close(pagemap);
    return ranges;
  }
  char line[512];
  std::vector<uint64_t> entries;
  while (std::fgets(line, sizeof(line), maps)) {
    uintptr_t lo = 0, hi = 0;
    char perms[5] = {};
    if (std::sscanf(line, "%" SCNxPTR "-%" SCNxPTR " %4s", &lo, &hi, perms) != 3) continue;
    if (perms[1] != 'w' || perms[3] != 'p' || hi <= lo) continue;
    size_t pages = (hi - lo) / page;
    entries.resize(pages);
    off_t at = static_cast<off_t>(lo / page * sizeof(uint64_t));
    if (pread(pagemap, entries.data(), pages * sizeof(uint64_t), at) != static_cast<ssize_t>(pages * sizeof(uint64_t)))
      continue;
    for (size_t i = 0; i < pages; ++i) {
      if ((entries[i] & (kPresent | kExclusive)) != (kPresent | kExclusive)) continue;
      uintptr_t address = lo + i * page;
      if (!ranges.empty() && ranges.back().start + ranges.back().bytes == address) ranges.back().bytes += page;
      else ranges.push_back({address, page});
    }
  }
  std::fclose(maps);
  close(pagemap);
  return ranges;
}

std::vector<PageRange> LearnWrittenPages(const std::function<void()>& warm_up) {
  std::vector<PageRange> ranges;
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return ranges;
  pid_t child = -1;
  try {
    child = ForkWithPython([&] {
      close(fds[0]);
      warm_up();
      std::vector<PageRange> found = ExclusivePages();
      uint64_t count = found.size();
      return WriteAll(fds[1], &count, sizeof(count)) && WriteAll(fds[1], found.data(), found.size() * sizeof(PageRange))
                 ? 0 : 1;
    });
  } catch (const std::exception&) {
    close(fds[0]);
    close(fds[1]);
    return ranges;
  }
  close(fds[1]);
  uint64_t count = 0;
  if (ReadAll(fds[0], &count, sizeof(count)) && count < (1u << 24)) {
    ranges.resize(count);
    if (!ReadAll(fds[0], ranges.data(), count * sizeof(PageRange))) ranges.clear();
  }
  close(fds[0]);
  ChildEnd end = WaitForChild(child, 60, SteadyNowMs());
  if (end.exit_code != 0) ranges.clear();
  return ranges;
}

size_t PrefaultPages(const std::vector<PageRange>& ranges) {
  size_t done = 0;
  for (const auto& range : ranges) {
    if (madvise(reinterpret_cast<void*>(range.start), range.bytes, MADV_POPULATE_WRITE) == 0) done += range.bytes;
  }
  return done;
}

}  // namespace accelopt::worker
