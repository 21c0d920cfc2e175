#include "worker/worker_main.h"

#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>

#include <spdlog/spdlog.h>

#include "python/interpreter.h"
#include "worker/candidate_process.h"
#include "worker/protocol.h"
#include "worker/sandbox.h"
#include "worker/syscall_policy.h"

namespace accelopt::worker {
namespace {

constexpr int kRequestFd = 0;
constexpr int kReplyFd = 3;
// A candidate's reply header (JSON) is read up to this size; strings in it
// are cut to kMaxReplyString. Arrays travel as blobs, outside the header.
constexpr size_t kMaxReplyHeader = 16u << 20;
constexpr size_t kMaxReplyString = 256u << 10;

// Empties the scratch directory without following any link in it (a link
// planted by a candidate is removed, never its target). Refuses a scratch
// path that is itself a link or not a directory.
bool ClearScratch(const std::string& scratch, std::string* error) {
  if (scratch.empty()) return true;
  struct stat st{};
  if (lstat(scratch.c_str(), &st) != 0) {
    if (errno != ENOENT || mkdir(scratch.c_str(), 0700) != 0) {
      *error = "scratch " + scratch + ": " + std::strerror(errno);
      return false;
    }
    return true;
  }
  if (!S_ISDIR(st.st_mode)) {
    *error = "scratch " + scratch + " is not a directory (a symbolic link?); refusing to use it";
    return false;
  }
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(scratch, ec)) {
    std::filesystem::remove_all(entry.path(), ec);  // never follows symbolic links
    if (ec) {
      *error = "cannot clear " + entry.path().string() + ": " + ec.message();
      return false;
    }
  }
  if (ec) *error = "cannot list scratch " + scratch + ": " + ec.message();
  return !ec;
}

void CapStrings(nlohmann::json* value) {
  if (value->is_string()) {
    auto& text = value->get_ref<std::string&>();
    if (text.size() > kMaxReplyString) {
      size_t cut = text.size() - kMaxReplyString;
      text.resize(kMaxReplyString);
      text += "... [" + std::to_string(cut) + " more bytes cut]";
    }
  } else if (value->is_structured()) {
    for (auto& item : *value) CapStrings(&item);
  }
}

nlohmann::json ErrorReply(const std::string& kind, const std::string& message) {
  return {{"ok", false}, {"error", {{"kind", kind}, {"message", message}, {"traceback", ""}}},
          {"integrity", nlohmann::json::array()}};
}

void SetLimit(int resource, uint64_t bytes) {
  if (bytes == 0) return;
  rlimit current{};
  getrlimit(resource, &current);
  rlim_t value = current.rlim_max == RLIM_INFINITY ? bytes : std::min<rlim_t>(bytes, current.rlim_max);
  rlimit limit{value, value};
  setrlimit(resource, &limit);
}

// Body of a candidate process: limits, seccomp, then the Python call; the
// reply frame goes into `reply_fd` (a memfd the zygote forwards).
int CandidateBody(const WorkerMainOptions& options, const nlohmann::json& request, python::Packed message,
                  int reply_fd) {
  close(kRequestFd);
  close(kReplyFd);  // the candidate never writes to the host directly
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  const auto& limits = message.value["limits"];
  uint64_t memory = limits.value("memory_bytes", uint64_t{0});
  if (memory == 0) memory = options.memory_bytes;
  SetLimit(RLIMIT_AS, memory);
  SetLimit(RLIMIT_FSIZE, memory);  // scratch files and the reply memfd
  if (double cpu = limits.value("cpu_s", 0.0); cpu > 0) {
    rlimit limit{static_cast<rlim_t>(cpu) + 1, static_cast<rlim_t>(cpu) + 6};
    setrlimit(RLIMIT_CPU, &limit);
  }
  std::string scratch = message.value.value("scratch", "");
  if (!scratch.empty() && chdir(scratch.c_str()) != 0) return 72;
  std::vector<std::string> warnings;
  if (options.sandbox && !InstallCandidatePolicy(&warnings)) spdlog::debug("{}", warnings.back());
  python::Packed reply;
  try {
    reply = python::CallPacked("accelopt.sandbox.worker_entry", "handle", std::move(message));
  } catch (const python::PythonError& error) {
    reply = {};
    reply.value = ErrorReply("python_error", error.what());
    reply.value["error"]["traceback"] = error.traceback();
  } catch (const std::exception& error) {  // e.g. a result JSON cannot parse
    reply = {};
    reply.value = ErrorReply("worker_error", error.what());
  }
  (void)request;
  return WriteFrame(reply_fd, std::move(reply.value), reply.blobs) ? 0 : 76;
}

// Reads and checks the frame a candidate left in `memfd`. Returns false
// with *problem set when it is missing or malformed.
bool ReadCandidateReply(int memfd, nlohmann::json* header, off_t* blobs_at, uint64_t* blobs_size,
                        std::string* problem) {
  struct stat st{};
  if (fstat(memfd, &st) != 0 || st.st_size == 0) {
    *problem = "the candidate process wrote no reply";
    return false;
  }
  std::string head(std::min<size_t>(kMaxReplyHeader, static_cast<size_t>(st.st_size)), '\0');
  ssize_t got = pread(memfd, head.data(), head.size(), 0);
  size_t newline = got > 0 ? head.find('\n') : std::string::npos;
  if (newline == std::string::npos || newline >= static_cast<size_t>(got)) {
    *problem = "the candidate's reply header exceeds " + std::to_string(kMaxReplyHeader >> 20) + " MiB";
    return false;
  }
  head.resize(newline);
  *header = nlohmann::json::parse(head, nullptr, false);
  if (!header->is_object()) {
    *problem = "the candidate process wrote a malformed reply";
    return false;
  }
  *blobs_at = static_cast<off_t>(newline + 1);
  *blobs_size = static_cast<uint64_t>(st.st_size) - (newline + 1);
  uint64_t total = 0;
  try {
    for (uint64_t size : BlobSizes(*header, *blobs_size)) total += size;
  } catch (const std::invalid_argument& error) {
    *problem = std::string("the candidate's reply is malformed: ") + error.what();
    return false;
  }
  if (total != *blobs_size) {
    *problem = "the candidate's reply announces " + std::to_string(total) + " bytes of attachments but holds " +
               std::to_string(*blobs_size);
    return false;
  }
  return true;
}

bool SendFromFile(int out_fd, int in_fd, off_t offset, uint64_t size) {
  while (size > 0) {
    ssize_t sent = sendfile(out_fd, in_fd, &offset, std::min<uint64_t>(size, 1u << 30));
    if (sent < 0 && errno == EINTR) continue;
    if (sent <= 0) return false;
    size -= static_cast<uint64_t>(sent);
  }
  return true;
}

// Runs one request in a fresh candidate process and writes its reply (or
// why it has none) to the host. Returns false when the host is gone.
bool ServeOne(const WorkerMainOptions& options, const nlohmann::json& request, python::Packed message) {
  const double deadline_s = request.value("deadline_s", 0.0);
  nlohmann::json header;
  std::string problem;
  int memfd = memfd_create("accelopt-reply", MFD_CLOEXEC);
  off_t blobs_at = 0;
  uint64_t blobs_size = 0;
  if (memfd < 0) {
    header = ErrorReply("worker_error", std::string("memfd_create: ") + std::strerror(errno));
  } else if (std::string error; !ClearScratch(message.value.value("scratch", ""), &error)) {
    header = ErrorReply("worker_error", error);
  } else {
    double started = SteadyNowMs();
    pid_t child = -1;
    try {
      child = ForkWithPython([&] { return CandidateBody(options, request, std::move(message), memfd); });
    } catch (const std::exception& error) {
      header = ErrorReply("worker_error", error.what());
    }
    if (child > 0) {
      ChildEnd end = WaitForChild(child, deadline_s, started);
      if (end.timed_out || end.signal != 0 || end.exit_code != 0) {
        auto [kind, text] = ClassifyEnd(end, deadline_s);
        header = ErrorReply(kind, text);
        header["candidate_died"] = true;
      } else if (!ReadCandidateReply(memfd, &header, &blobs_at, &blobs_size, &problem)) {
        header = ErrorReply("crash", problem);
        header["candidate_died"] = true;
        blobs_size = 0;
      }
    }
  }
  CapStrings(&header);
  header.erase("restart");
  header["id"] = request.value("id", nlohmann::json());
  header["nonce"] = request.value("nonce", "");
  if (blobs_size == 0) header.erase("blobs");
  bool sent = WriteLine(kReplyFd, header.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)) &&
              SendFromFile(kReplyFd, memfd, blobs_at, blobs_size);
  if (memfd >= 0) close(memfd);
  return sent;
}

// Forks a child that installs the candidate policy and tries what it must
// refuse; the outcome becomes a startup warning when the policy cannot hold.
void ProbeCandidatePolicy(std::vector<std::string>* warnings) {
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) return;
  pid_t child = ForkWithPython([&] {
    close(pipe_fds[0]);
    std::vector<std::string> found;
    if (!InstallCandidatePolicy(&found)) {
      std::string text = found.empty() ? "no seccomp filter" : found.back();
      (void)!write(pipe_fds[1], text.data(), text.size());
      return 1;
    }
    int sock = socket(AF_INET, SOCK_STREAM, 0);
    if (sock >= 0 || errno != EPERM) {
      const char* text = "the seccomp filter did not refuse socket()";
      (void)!write(pipe_fds[1], text, std::strlen(text));
      return 2;
    }
    return 0;
  });
  close(pipe_fds[1]);
  char buffer[512];
  ssize_t n = read(pipe_fds[0], buffer, sizeof(buffer));
  close(pipe_fds[0]);
  ChildEnd end = WaitForChild(child, 30, SteadyNowMs());
  if (end.exit_code != 0) warnings->push_back(n > 0 ? std::string(buffer, static_cast<size_t>(n)) : "seccomp probe failed");
}

}  // namespace

int WorkerMain(const WorkerMainOptions& options) {
  CloseInheritedFds(kReplyFd + 1);
  DieWithParent(options.parent_pid);
  spdlog::set_pattern("%l %v");
  std::vector<std::string> warnings;
  ApplyResourceLimits(options.memory_bytes, options.cpu_seconds, &warnings);
  if (options.sandbox) EnterNamespaces(&warnings);  // from here on this process may be pid 1 of its namespace

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
    ProbeCandidatePolicy(&warnings);
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
    if (!request.is_object()) {
      nlohmann::json reply = ErrorReply("worker_error", "malformed request line");
      reply["id"] = nullptr;
      reply["nonce"] = "";
      if (!WriteLine(kReplyFd, reply.dump())) return 0;
      continue;
    }
    message.value = {{"module", request.value("module", "")},
                     {"function", request.value("function", "")},
                     {"arg", request.value("arg", nlohmann::json())},
                     {"packed", request.value("packed", false)},
                     {"scratch", request.value("scratch", options.scratch)},
                     {"limits", request.value("limits", nlohmann::json::object())}};
    if (!ServeOne(options, request, std::move(message))) return 0;
  }
  return 0;
}

}  // namespace accelopt::worker
