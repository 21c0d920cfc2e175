// accelopt/sdk/files.hpp - checked, atomic file writes for plugin stages.
//
// A stage's files are read by later stages, by `--resume` and by people while
// the run goes on; a crash or a full disk must not leave half a file behind,
// and a failed write must fail the stage instead of passing silently (an
// unchecked std::ofstream does both). WriteFile writes a temporary file next
// to the target, flushes it to disk and renames it over the target.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>

#include <nlohmann/json.hpp>

#include "accelopt/sdk/failure.hpp"

namespace accelopt::sdk {

/// Writes `content` to `path` atomically: readers see the old file or the whole
/// new one, never a part. Parent folders are created. The temporary file
/// (`<path>.tmp.XXXXXX`, unique per call, so concurrent writers of one path do not
/// collide) is removed on failure. Throws StageFailure{kind "io_error", details
/// {"path", "errno"}} when a folder cannot be created or a write, flush, close or
/// rename fails (disk full, permissions, ...).
inline void WriteFile(const std::filesystem::path& path, std::string_view content) {
  auto fail = [&](const std::string& what, int error) {
    throw StageFailure("io_error", "cannot write " + path.string() + ": " + what + ": " + std::strerror(error),
                       {{"path", path.string()}, {"errno", error}});
  };
  if (path.has_parent_path()) {
    std::error_code ec;
    std::filesystem::create_directories(path.parent_path(), ec);
    if (ec) fail("cannot create its folder", ec.value());
  }
  std::string tmp = path.string() + ".tmp.XXXXXX";
  int fd = ::mkostemp(tmp.data(), O_CLOEXEC);
  if (fd < 0) fail("cannot create a temporary file", errno);
  auto abandon = [&](const std::string& what, int error) {
    ::close(fd);
    ::unlink(tmp.c_str());
    fail(what, error);
  };
  const char* data = content.data();
  size_t left = content.size();
  while (left > 0) {
    ssize_t n = ::write(fd, data, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      abandon("write failed", errno);
    }
    data += n;
    left -= static_cast<size_t>(n);
  }
  if (::fchmod(fd, 0644) != 0) abandon("chmod failed", errno);  // mkostemp creates 0600
  if (::fsync(fd) != 0) abandon("fsync failed", errno);
  if (::close(fd) != 0) {
    int error = errno;
    ::unlink(tmp.c_str());
    fail("close failed", error);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int error = errno;
    ::unlink(tmp.c_str());
    fail("rename failed", error);
  }
}

/// WriteFile of `value` as JSON indented by `indent` spaces (-1: one line) and a
/// final newline. Invalid UTF-8 in strings becomes U+FFFD. Throws as WriteFile.
inline void WriteJsonFile(const std::filesystem::path& path, const nlohmann::json& value, int indent = 2) {
  WriteFile(path, value.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
}

}  // namespace accelopt::sdk
