#include "core/journal.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <stdexcept>

#include "core/run_dir.h"

namespace accelopt {
namespace {

void CheckHeader(const nlohmann::json& header, const std::string& path) {
  if (!header.is_object() || header.value("journal", "") != "accelopt") {
    throw std::runtime_error(path + ": not an accelopt journal");
  }
  int version = header.value("version", 0);
  if (version < Journal::kOldestSupportedVersion || version > Journal::kVersion) {
    throw std::runtime_error(path + ": journal version " + std::to_string(version) + " is not supported (this host reads " +
                             std::to_string(Journal::kOldestSupportedVersion) + ".." + std::to_string(Journal::kVersion) + ")");
  }
}

}  // namespace

Journal::Journal(const std::filesystem::path& path) : path_(path) {
  bool exists = std::filesystem::exists(path) && std::filesystem::file_size(path) > 0;
  if (exists) {
    std::ifstream in(path);
    std::string first;
    std::getline(in, first);
    CheckHeader(nlohmann::json::parse(first, nullptr, false), path.string());
  }
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd_ < 0) throw std::runtime_error("cannot open " + path.string() + ": " + std::strerror(errno));
  if (!exists) Append({{"journal", "accelopt"}, {"version", kVersion}});
}

Journal::~Journal() {
  if (fd_ >= 0) ::close(fd_);
}

void Journal::Append(nlohmann::json event) {
  if (!event.contains("journal")) event["ts"] = UtcNowIso();
  std::string line = event.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  std::lock_guard<std::mutex> lock(mutex_);
  const char* data = line.data();
  size_t left = line.size();
  while (left > 0) {
    ssize_t n = ::write(fd_, data, left);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw std::runtime_error(std::string("journal write failed: ") + std::strerror(errno));
    data += n;
    left -= static_cast<size_t>(n);
  }
  ::fdatasync(fd_);
}

std::vector<nlohmann::json> Journal::Read(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path.string());
  std::string line;
  if (!std::getline(in, line)) throw std::runtime_error(path.string() + ": empty journal");
  CheckHeader(nlohmann::json::parse(line, nullptr, false), path.string());
  std::vector<nlohmann::json> events;
  while (std::getline(in, line)) {
    auto event = nlohmann::json::parse(line, nullptr, false);
    if (event.is_object()) events.push_back(std::move(event));  // a torn last line is skipped
  }
  return events;
}

std::map<std::string, std::string> Journal::OutputHashes(const std::vector<nlohmann::json>& events) {
  std::map<std::string, std::string> hashes;
  for (const auto& event : events) {
    auto dir = event.find("dir");
    auto hash = event.find("outputs_sha256");
    if (dir != event.end() && dir->is_string() && hash != event.end() && hash->is_string()) {
      hashes[dir->get<std::string>()] = hash->get<std::string>();
    }
  }
  return hashes;
}

}  // namespace accelopt
