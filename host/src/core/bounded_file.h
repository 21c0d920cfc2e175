// bounded_file.h - reading a file the user names, with bounds: a regular
// file only (never /dev/zero, a FIFO or a folder) and a size cap enforced
// while reading.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

namespace accelopt {

/// Reads the whole file at `path` if it is a regular file of at most
/// `max_bytes` bytes; never reads past the cap (a file that grows while it is
/// read is refused too). `what` names such files in messages, e.g.
/// "pipeline files". Throws std::runtime_error with a message that does not
/// repeat the path: "cannot read: No such file or directory", "not a regular
/// file (a device); pipeline files are read from regular files only", "file
/// of N bytes exceeds the limit of M bytes for pipeline files".
std::string ReadRegularFile(const std::filesystem::path& path, std::uintmax_t max_bytes, const std::string& what);

}  // namespace accelopt
