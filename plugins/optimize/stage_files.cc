#include "stage_files.h"

#include <cctype>
#include <fstream>
#include <mutex>
#include <sstream>

namespace fs = std::filesystem;

namespace accelopt_optimize {

using accelopt::sdk::StageFailure;

void WriteText(const fs::path& path, const std::string& text) {
  accelopt::sdk::WriteFile(path, text);  // atomic and checked: a reader never sees half a file
}

void WriteJson(const fs::path& path, const json& value) { WriteText(path, value.dump(2) + "\n"); }

void AppendJsonLine(const fs::path& path, const json& value) {
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  // One write per line, never through a symlink planted in the run directory.
  accelopt::sdk::AppendFile(path, value.dump(-1, ' ', false, json::error_handler_t::replace) + "\n");
}

std::string SafeName(const std::string& text) {
  std::string out;
  for (char c : text) out += (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-') ? c : '_';
  return out;
}

}  // namespace accelopt_optimize
