#include "core/bounded_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace accelopt {

std::string ReadRegularFile(const std::filesystem::path& path, std::uintmax_t max_bytes, const std::string& what) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused below.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) throw std::runtime_error(std::string("cannot read: ") + std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw std::runtime_error(std::string("cannot stat: ") + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) {
    const char* kind = S_ISDIR(st.st_mode)                        ? "a directory"
                       : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "a device"
                       : S_ISFIFO(st.st_mode)                       ? "a pipe"
                                                                    : "a special file";
    throw std::runtime_error(std::string("not a regular file (") + kind + "); " + what + " are read from regular files only");
  }
  auto too_big = [&](std::uintmax_t size) {
    return std::runtime_error("file of " + std::to_string(size) + " bytes exceeds the limit of " + std::to_string(max_bytes) +
                              " bytes for " + what);
  };
  if (static_cast<std::uintmax_t>(st.st_size) > max_bytes) throw too_big(static_cast<std::uintmax_t>(st.st_size));
  std::string text;
  char buffer[65536];
  while (true) {
    ssize_t n = ::read(fd, buffer, sizeof(buffer));
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n < 0) throw std::runtime_error(std::string("cannot read: ") + std::strerror(errno));
    if (n == 0) break;
    text.append(buffer, static_cast<size_t>(n));
    if (text.size() > max_bytes) throw too_big(text.size());  // the file grew while it was read
  }
  return text;
}

}  // namespace accelopt
