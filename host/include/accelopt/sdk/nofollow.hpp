// accelopt/sdk/nofollow.hpp - file operations below a trusted folder (a run
// directory) that never follow a symbolic link.
//
// A run directory can be written by others (a shared `runs/`, a run copied
// from elsewhere and resumed): a link planted at `optimize/records.jsonl` or
// at a folder such as `stages/03-x/build` would otherwise redirect an append,
// a write or a recursive delete to any file the user can reach. Every
// function here walks from the trusted `base` one component at a time with
// openat(O_NOFOLLOW | O_DIRECTORY) and refuses a symlink anywhere below
// `base` with an error naming the path. `base` itself is trusted and may be
// reached through links (e.g. `runs/latest`).
//
// Header-only so that plugins (which get only host/include) and the host
// (host/src/core/run_dir.h wraps these) share one implementation. Errors are
// std::runtime_error("<path>: <why>").
#pragma once

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <random>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace accelopt::sdk::nofollow {

/// The message of every refused link.
inline constexpr const char* kSymlinkRefused =
    "refusing a symlink (the host never follows symlinks inside a run directory)";

/// An owned descriptor (-1: none).
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() { Reset(); }
  Fd(Fd&& other) noexcept : fd_(other.Release()) {}
  Fd& operator=(Fd&& other) noexcept {
    if (this != &other) Reset(other.Release());
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  int Release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void Reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

inline std::runtime_error Failure(const std::filesystem::path& path, const std::string& why) {
  return std::runtime_error(path.string() + ": " + why);
}

/// The components of `relative`, checked: relative, no "..", no empty names.
inline std::vector<std::string> Components(const std::filesystem::path& relative) {
  if (relative.is_absolute()) throw Failure(relative, "expected a relative path");
  std::vector<std::string> parts;
  for (const auto& part : relative.lexically_normal()) {
    std::string name = part.string();
    if (name.empty() || name == ".") continue;
    if (name == "..") throw Failure(relative, "'..' is not allowed");
    parts.push_back(name);
  }
  return parts;
}

/// Why the entry `name` of `dir_fd` could not be opened as wanted: a link, a
/// non-directory where a folder is needed, or errno `error`.
inline std::runtime_error Refusal(int dir_fd, const std::string& name, int error, bool want_dir,
                                  const std::filesystem::path& shown) {
  struct stat st {};
  if (::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
    if (S_ISLNK(st.st_mode)) return Failure(shown, kSymlinkRefused);
    if (want_dir && !S_ISDIR(st.st_mode)) return Failure(shown, "exists and is not a directory");
  }
  if (error == ELOOP) return Failure(shown, kSymlinkRefused);
  return Failure(shown, std::string("cannot open: ") + std::strerror(error));
}

/// Opens the folder `name` of `dir_fd` without following a link, creating it
/// with `mode` if `create`. Returns -1 with errno ENOENT when it is missing and
/// not `create`d. Throws naming `shown` otherwise.
inline int OpenDirAt(int dir_fd, const std::string& name, bool create, unsigned mode, const std::filesystem::path& shown) {
  if (create && ::mkdirat(dir_fd, name.c_str(), mode) != 0 && errno != EEXIST) {
    throw Failure(shown, std::string("cannot create: ") + std::strerror(errno));
  }
  int fd = ::openat(dir_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd >= 0) return fd;
  int error = errno;
  if (error == ENOENT && !create) return -1;
  throw Refusal(dir_fd, name, error, true, shown);
}

/// Opens `base` (trusted) and walks the first `count` of `parts` below it;
/// returns the last folder's descriptor, or -1 (errno ENOENT) when one is
/// missing and `create` is false.
inline int WalkDirs(const std::filesystem::path& base, const std::vector<std::string>& parts, size_t count, bool create,
                    unsigned mode) {
  Fd dir(::open(base.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir.get() < 0) throw Failure(base, std::string("cannot open: ") + std::strerror(errno));
  std::filesystem::path shown = base;
  for (size_t i = 0; i < count; ++i) {
    shown /= parts[i];
    int next = OpenDirAt(dir.get(), parts[i], create, mode, shown);
    if (next < 0) {
      errno = ENOENT;
      return -1;
    }
    dir.Reset(next);
  }
  return dir.Release();
}

/// Creates the folders of `base`/`relative` (mode `mode`); refuses links.
inline void EnsureDir(const std::filesystem::path& base, const std::filesystem::path& relative, unsigned mode) {
  auto parts = Components(relative);
  Fd dir(WalkDirs(base, parts, parts.size(), true, mode));
}

/// Opens `base`/`relative` for appending (created with `mode` if missing;
/// its folders 0755). Returns the descriptor; the caller closes it.
inline int OpenAppend(const std::filesystem::path& base, const std::filesystem::path& relative, unsigned mode = 0644) {
  auto parts = Components(relative);
  if (parts.empty()) throw Failure(relative, "expected a file name");
  Fd dir(WalkDirs(base, parts, parts.size() - 1, true, 0755));
  // O_NONBLOCK: opening a planted FIFO must not wait for a reader.
  int fd = ::openat(dir.get(), parts.back().c_str(),
                    O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, mode);
  if (fd < 0) throw Refusal(dir.get(), parts.back(), errno, false, base / relative);
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Failure(base / relative, "is not a regular file");
  }
  ::fcntl(fd, F_SETFL, O_WRONLY | O_APPEND);  // blocking writes again
  return fd;
}

/// Writes all of `data` to `fd`; returns 0 or the errno of the failure.
inline int WriteAll(int fd, std::string_view data) {
  const char* p = data.data();
  size_t left = data.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    p += n;
    left -= static_cast<size_t>(n);
  }
  return 0;
}

/// Appends `text` to `base`/`relative` (OpenAppend, one write).
inline void Append(const std::filesystem::path& base, const std::filesystem::path& relative, std::string_view text) {
  Fd fd(OpenAppend(base, relative));
  if (int error = WriteAll(fd.get(), text); error != 0) {
    throw Failure(base / relative, std::string("cannot append: ") + std::strerror(error));
  }
}

/// Writes `text` to `base`/`relative` atomically: a fresh temporary file
/// (O_EXCL | O_NOFOLLOW, mode `mode`), fsync, renamed over the target. A link
/// at the target is replaced, never written through. Folders are created 0755.
inline void WriteAtomic(const std::filesystem::path& base, const std::filesystem::path& relative, std::string_view text,
                        unsigned mode = 0644) {
  auto parts = Components(relative);
  if (parts.empty()) throw Failure(relative, "expected a file name");
  Fd dir(WalkDirs(base, parts, parts.size() - 1, true, 0755));
  const std::string& name = parts.back();
  std::string tmp = "." + name + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(std::random_device{}());
  Fd file(::openat(dir.get(), tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode));
  if (file.get() < 0) throw Failure(base / relative, std::string("cannot write: ") + std::strerror(errno));
  int error = WriteAll(file.get(), text);
  if (error == 0 && ::fchmod(file.get(), mode) != 0) error = errno;  // the umask may have narrowed it
  if (error == 0 && ::fsync(file.get()) != 0) error = errno;
  if (error == 0 && ::close(file.Release()) != 0) error = errno;
  // rename replaces a link at the destination; it never writes through it.
  if (error == 0 && ::renameat(dir.get(), tmp.c_str(), dir.get(), name.c_str()) != 0) error = errno;
  if (error != 0) {
    ::unlinkat(dir.get(), tmp.c_str(), 0);
    throw Failure(base / relative, std::string("cannot write: ") + std::strerror(error));
  }
}

/// Removes the entry `name` of `dir_fd` and, for a folder, everything in it,
/// without following links: a link is unlinked itself, never its target.
inline void RemoveTreeAt(int dir_fd, const std::string& name, const std::filesystem::path& shown, int depth = 0) {
  if (::unlinkat(dir_fd, name.c_str(), 0) == 0 || errno == ENOENT) return;
  if (errno != EISDIR && errno != EPERM) throw Failure(shown, std::string("cannot remove: ") + std::strerror(errno));
  if (depth > 256) throw Failure(shown, "cannot remove: folders nested too deep");
  int fd = ::openat(dir_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) throw Failure(shown, std::string("cannot remove: ") + std::strerror(errno));
  DIR* listing = ::fdopendir(fd);
  if (listing == nullptr) {
    ::close(fd);
    throw Failure(shown, std::string("cannot list: ") + std::strerror(errno));
  }
  std::vector<std::string> names;
  while (dirent* entry = ::readdir(listing)) {
    std::string child = entry->d_name;
    if (child != "." && child != "..") names.push_back(std::move(child));
  }
  try {
    for (const auto& child : names) RemoveTreeAt(::dirfd(listing), child, shown / child, depth + 1);
  } catch (...) {
    ::closedir(listing);
    throw;
  }
  ::closedir(listing);
  if (::unlinkat(dir_fd, name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT) {
    throw Failure(shown, std::string("cannot remove: ") + std::strerror(errno));
  }
}

/// Removes `base`/`relative` (a file, a link or a whole folder) without
/// following any link below `base`. Returns false when it did not exist.
inline bool Remove(const std::filesystem::path& base, const std::filesystem::path& relative) {
  auto parts = Components(relative);
  if (parts.empty()) throw Failure(base, "refusing to remove the base folder itself");
  Fd dir(WalkDirs(base, parts, parts.size() - 1, false, 0));
  if (dir.get() < 0) return false;
  struct stat st {};
  if (::fstatat(dir.get(), parts.back().c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return false;
  RemoveTreeAt(dir.get(), parts.back(), base / relative);
  return true;
}

/// Opens the regular file `base`/`relative` for reading without following a
/// link and without blocking on a FIFO or device (O_NONBLOCK, then fstat
/// S_ISREG). Returns -1 (errno ENOENT) when it is missing; throws otherwise.
inline int OpenRead(const std::filesystem::path& base, const std::filesystem::path& relative) {
  auto parts = Components(relative);
  if (parts.empty()) throw Failure(relative, "expected a file name");
  Fd dir(WalkDirs(base, parts, parts.size() - 1, false, 0));
  if (dir.get() < 0) return -1;
  int fd = ::openat(dir.get(), parts.back().c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return -1;
    throw Refusal(dir.get(), parts.back(), errno, false, base / relative);
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Failure(base / relative, "is not a regular file");
  }
  return fd;
}

}  // namespace accelopt::sdk::nofollow
