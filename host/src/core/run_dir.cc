#include "core/run_dir.h"

#include <ctime>
#include <stdexcept>

#include "core/text.h"

namespace accelopt {
namespace {

std::string UtcStamp(const char* format) {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buffer[64];
  std::strftime(buffer, sizeof(buffer), format, &tm);
  return buffer;
}

std::string SafeName(const std::string& name) {
  std::string out;
  for (char c : name) out += (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_') ? c : '_';
  return out.empty() ? "run" : out;
}

}  // namespace

std::string UtcNowIso() { return UtcStamp("%Y-%m-%dT%H:%M:%SZ"); }

RunDirectory RunDirectory::Create(const std::filesystem::path& explicit_dir, const std::string& name,
                                  const std::filesystem::path& base) {
  std::filesystem::path dir = explicit_dir;
  if (dir.empty()) {
    std::string stem = UtcStamp("%Y%m%d-%H%M%S") + "-" + SafeName(name);
    dir = base / stem;
    for (int i = 2; std::filesystem::exists(dir); ++i) dir = base / (stem + "-" + std::to_string(i));
  }
  std::filesystem::create_directories(dir);
  return RunDirectory(std::filesystem::absolute(dir).lexically_normal());
}

void RunDirectory::WriteText(const std::filesystem::path& relative, std::string_view text) const {
  WriteFileAtomic(path_ / relative, text);
}

void RunDirectory::WriteJson(const std::filesystem::path& relative, const nlohmann::json& value) const {
  WriteText(relative, value.dump(2) + "\n");
}

}  // namespace accelopt
