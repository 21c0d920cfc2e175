#include "worker/worker_main.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <string>

#include <spdlog/spdlog.h>

#include "python/interpreter.h"
#include "worker/protocol.h"
#include "worker/sandbox.h"

namespace accelopt::worker {
namespace {

constexpr int kRequestFd = 0;
constexpr int kReplyFd = 3;

}  // namespace

int WorkerMain(const WorkerMainOptions& options) {
  CloseInheritedFds(kReplyFd + 1);
  DieWithParent(options.parent_pid);
  spdlog::set_pattern("%l %v");
  std::vector<std::string> warnings;
  ApplyResourceLimits(options.memory_bytes, options.cpu_seconds, &warnings);
  if (options.sandbox) DropNetwork(&warnings);

  nlohmann::json versions;
  try {
    python::Initialize(options.python_paths);
    versions = python::CallJson("accelopt.sandbox.worker_entry", "startup", {{"worker_id", options.id}});
  } catch (const std::exception& error) {
    nlohmann::json reply = {{"ready", false}, {"error", error.what()}};
    WriteLine(kReplyFd, reply.dump());
    return 71;
  }
  if (options.sandbox) {
    std::vector<std::string> readable = {"/usr", "/lib", "/lib64", "/dev/urandom", python::HostPythonDir()};
    for (const auto& path : options.python_paths) readable.push_back(path);
    std::vector<std::string> writable = {"/dev/null"};
    if (!options.scratch.empty()) writable.push_back(options.scratch);
    RestrictFileSystem(readable, writable, &warnings);
    InstallSyscallFilter(&warnings);
  } else {
    warnings.push_back("sandbox disabled (--no-sandbox)");
  }
  nlohmann::json ready = {{"ready", true}, {"pid", getpid()}, {"warnings", warnings}, {"versions", versions}};
  if (!WriteLine(kReplyFd, ready.dump())) return 0;

  LineReader reader(kRequestFd);
  std::string line;
  while (reader.ReadLine(&line, -1) == LineReader::kLine) {
    nlohmann::json request = nlohmann::json::parse(line, nullptr, false);
    nlohmann::json reply;
    if (!request.is_object()) {
      reply = {{"ok", false}, {"error", {{"kind", "worker_error"}, {"message", "malformed request line"}}}};
    } else {
      nlohmann::json message = {{"module", request.value("module", "")},
                                {"function", request.value("function", "")},
                                {"arg", request.value("arg", nlohmann::json())},
                                {"scratch", request.value("scratch", options.scratch)},
                                {"limits", request.value("limits", nlohmann::json::object())}};
      try {
        reply = python::CallJson("accelopt.sandbox.worker_entry", "handle", message);
      } catch (const python::PythonError& error) {
        reply = {{"ok", false}, {"restart", true},
                 {"error", {{"kind", "python_error"}, {"message", error.what()}, {"traceback", error.traceback()}}}};
      } catch (const std::exception& error) {  // e.g. a result JSON cannot parse
        reply = {{"ok", false}, {"restart", true}, {"error", {{"kind", "worker_error"}, {"message", error.what()}}}};
      }
      reply["id"] = request.value("id", nlohmann::json());
      reply["nonce"] = request.value("nonce", "");
    }
    if (!WriteLine(kReplyFd, reply.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace))) return 0;
    if (reply.value("restart", false)) return 75;
  }
  return 0;
}

}  // namespace accelopt::worker
