// digest.h - content hashes (SHA-256, OpenSSL) for files the host reuses.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace accelopt {

/// SHA-256 of `data` as 64 lowercase hex digits. Throws std::runtime_error
/// if OpenSSL fails (it does not for in-memory data in practice).
std::string Sha256Hex(std::string_view data);

/// SHA-256 of the file at `path` (read in chunks, without following a
/// symlink at `path` itself), or std::nullopt if it cannot be read.
std::optional<std::string> Sha256OfFile(const std::filesystem::path& path);

}  // namespace accelopt
