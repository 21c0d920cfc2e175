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
    python::Packed message;
    std::vector<uint64_t> sizes;
    try {
      sizes = BlobSizes(request, options.memory_bytes ? options.memory_bytes : UINT64_MAX);
    } catch (const std::invalid_argument&) {
      return 74;  // the host sent a malformed frame: the stream cannot be resynchronised
    }
    for (uint64_t size : sizes) {
      message.blobs.emplace_back();
      if (reader.ReadExact(&message.blobs.back(), size, -1) != LineReader::kLine) return 0;
    }
    python::Packed reply;
    if (!request.is_object()) {
      reply.value = {{"ok", false}, {"error", {{"kind", "worker_error"}, {"message", "malformed request line"}}}};
    } else {
      message.value = {{"module", request.value("module", "")},
                       {"function", request.value("function", "")},
                       {"arg", request.value("arg", nlohmann::json())},
                       {"packed", request.value("packed", false)},
                       {"scratch", request.value("scratch", options.scratch)},
                       {"limits", request.value("limits", nlohmann::json::object())}};
      try {
        reply = python::CallPacked("accelopt.sandbox.worker_entry", "handle", std::move(message));
      } catch (const python::PythonError& error) {
        reply = {};
        reply.value = {{"ok", false}, {"restart", true},
                       {"error", {{"kind", "python_error"}, {"message", error.what()}, {"traceback", error.traceback()}}}};
      } catch (const std::exception& error) {  // e.g. a result JSON cannot parse
        reply = {};
        reply.value = {{"ok", false}, {"restart", true}, {"error", {{"kind", "worker_error"}, {"message", error.what()}}}};
      }
      reply.value["id"] = request.value("id", nlohmann::json());
      reply.value["nonce"] = request.value("nonce", "");
    }
    bool restart = reply.value.value("restart", false);
    if (!WriteFrame(kReplyFd, std::move(reply.value), reply.blobs)) return 0;
    if (restart) return 75;
  }
  return 0;
}

}  // namespace accelopt::worker
