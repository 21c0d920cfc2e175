#include "worker/worker_main.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>

#include <spdlog/spdlog.h>

#include "python/interpreter.h"
#include "worker/candidate_process.h"
#include "worker/content_check.h"
#include "worker/identity_check.h"
#include "worker/prefault.h"
#include "worker/protocol.h"
#include "worker/shared_fds.h"
#include "worker/sandbox.h"
#include "worker/syscall_policy.h"

namespace accelopt::worker {
namespace {

constexpr int kRequestFd = 0;
constexpr int kReplyFd = 3;
// The host's descriptor channel (a SOCK_SEQPACKET socket): sealed input memfds
// arrive on it and sealed reply memfds leave on it. Absent under Slurm.
constexpr int kChannelFd = 4;
// How long a request's descriptors may lag behind its line.
constexpr long kFdWaitMs = 30000;
// A candidate's reply header (JSON) is read up to this size; strings in it
// are cut to kMaxReplyString. Arrays travel as blobs, outside the header.
constexpr size_t kMaxReplyHeader = 16u << 20;
constexpr size_t kMaxReplyString = 256u << 10;

// Rule R5's baseline, taken in the worker after its imports (identity_check.h).
std::shared_ptr<const NamespaceSnapshot> g_identity;
// The cost model's content digest as identities, taken in the worker after
// its imports (content_check.h); null: the digest runs in Python instead.
std::shared_ptr<const ContentSnapshot> g_content;
// The pages a kernel run writes, faulted in by every spare (prefault.h).
std::vector<PageRange> g_written_pages;
// Candidate processes killed after their reply, reaped once the next
// candidate runs (their teardown, ~3 ms, overlaps the host's judging).
std::vector<pid_t> g_to_reap;
// The hardware profile (neuron backend, docs/trainium.md): candidates may
// start the SDK's compiler processes, so every process of a candidate is
// killed before its reply leaves, and no spare is forked ahead (it would be
// killed with them).
bool g_hardware = false;
// This worker is pid 1 of its own PID namespace (kill(-1) reaches exactly
// its candidates' processes).
bool g_pid_namespace = false;
// kChannelFd when the host gave this worker a descriptor channel, else -1.
int g_channel = -1;

bool Hardware(const WorkerMainOptions& options) { return options.backend == "neuron"; }

// ACCELOPT_WORKER_TIMING=1: the worker and each candidate process log where
// a candidate's time goes, one stderr line each ("stages <who>: <stage>
// <ms since the previous mark>..."; the host logs them at debug level).
// Read by hand when tuning (docs/isolation.md, Benchmarks).
class Stages {
 public:
  void Start() {
    const char* on = std::getenv("ACCELOPT_WORKER_TIMING");
    on_ = on != nullptr && std::string(on) == "1";
    text_.clear();
    last_ = SteadyNowMs();
  }
  void Mark(const char* stage) {
    if (!on_) return;
    double now = SteadyNowMs();
    char item[64];
    std::snprintf(item, sizeof(item), " %s %.3f", stage, now - last_);
    text_ += item;
    last_ = now;
  }
  void Flush(const char* who) {
    rusage usage{};
    if (on_) getrusage(RUSAGE_SELF, &usage);
    if (on_) std::fprintf(stderr, "stages %s:%s minflt %ld\n", who, text_.c_str(), usage.ru_minflt);
    text_.clear();
  }

 private:
  bool on_ = false;
  std::string text_;
  double last_ = 0;
};
Stages g_stages;

// Hardware profile: SIGKILLs every process a candidate started (all of the
// worker's PID namespace but the worker, else the candidate's process
// group) and reaps them, so nothing in the sandbox runs while the host reads
// the candidate's files.
void KillCandidateTree(pid_t candidate) {
  if (g_pid_namespace) {
    kill(-1, SIGKILL);
  } else if (candidate > 0) {
    kill(-candidate, SIGKILL);
    kill(candidate, SIGKILL);
  }
  int status = 0;
  while (true) {
    pid_t reaped = waitpid(-1, &status, 0);
    if (reaped < 0 && errno == EINTR) continue;
    if (reaped < 0) break;  // ECHILD: every child is gone
  }
}

void ReapKilled() {
  for (pid_t pid : g_to_reap) {
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  }
  g_to_reap.clear();
}

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
int CandidateBody(const WorkerMainOptions& options, python::Packed message, int reply_fd, int done_fd) {
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
  python::PackedView reply;  // outputs go into the reply frame straight from the kernel's arrays
  g_stages.Mark("setup");
  try {
    reply = python::CallPackedView(accelopt::api::kWorkerHandle, std::move(message));
  } catch (const python::PythonError& error) {
    reply = {};
    reply.value = ErrorReply("python_error", error.what());
    reply.value["error"]["traceback"] = error.traceback();
  } catch (const std::exception& error) {  // e.g. a result JSON cannot parse
    reply = {};
    reply.value = ErrorReply("worker_error", error.what());
  }
  // Rule R5 (identity) and the cost model's content, each checked in C++
  // first; only a difference calls Python for the details (or the verdict:
  // an equal value in a new object passes the digest).
  auto add_changes = [&reply](const accelopt::api::Entry& entry) {
    try {
      nlohmann::json changes = python::CallJson(entry, nullptr);
      auto& integrity = reply.value["integrity"];
      if (!integrity.is_array()) integrity = nlohmann::json::array();
      for (auto& change : changes) integrity.push_back(std::move(change));
    } catch (const std::exception& error) {
      reply.value["integrity"].push_back(std::string("integrity check failed: ") + error.what());
    }
  };
  g_stages.Mark("handle");
  if (g_identity && !g_identity->Unchanged()) add_changes(accelopt::api::kWorkerIdentityChanges);
  g_stages.Mark("identity");
  if (g_content && !g_content->Unchanged()) add_changes(accelopt::api::kWorkerDigestChanges);
  g_stages.Mark("content");
  if (!WriteFrame(reply_fd, std::move(reply.value), reply.blobs)) return 76;
  g_stages.Mark("reply");
  g_stages.Flush("candidate");
  // The worker may forward the reply now. Wait here to be stopped and
  // killed: an exit would make the worker wait for this process's teardown.
  if (write(done_fd, "d", 1) != 1) return 0;
  // Stop now, while this process still has the CPU: the worker stops it
  // anyway (StopOrReap), but a process asleep in pause() must first be
  // scheduled again to enter the stop, and on a busy machine the worker
  // waited for that. (The seccomp filter lets a process signal itself.)
  kill(getpid(), SIGSTOP);
  while (true) pause();
}

// Reads and checks the frame a candidate left in `memfd`. Returns false
// with *problem set when it is missing or malformed.
bool ReadCandidateReply(int memfd, nlohmann::json* header, off_t* blobs_at, uint64_t* blobs_size,
                        std::string* problem) {
  struct stat st{};
  if (fstat(memfd, &st) != 0 || st.st_size == 0) {
    *problem = "candidate process exited with status 0 before answering";
    return false;
  }
  // The header only, read in growing steps: the attachments after it go to
  // the host by sendfile and are never copied here (and every page this
  // process writes is a copy-on-write fault while a spare shares its heap).
  const size_t limit = std::min<size_t>(kMaxReplyHeader, static_cast<size_t>(st.st_size));
  std::string head;
  size_t newline = std::string::npos;
  for (size_t want = std::min<size_t>(limit, 64u << 10); newline == std::string::npos; want = std::min(limit, want * 4)) {
    size_t have = head.size();
    head.resize(want);
    ssize_t got = pread(memfd, head.data() + have, want - have, static_cast<off_t>(have));
    if (got <= 0) break;
    head.resize(have + static_cast<size_t>(got));
    newline = head.find('\n', have);
    if (head.size() >= limit) break;
  }
  if (newline == std::string::npos) {
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

// A candidate process forked before its request arrives, while the
// previous candidate still runs, so the fork is off the request's critical
// path. It seals itself and waits for its one request. With
// ACCELOPT_SPARE_WARM_UP=1 it first runs a trusted warm-up kernel that
// faults in the copy-on-write pages a kernel run writes (~700 faults of
// 5-10 us each on our VMs); off by default: on 2 cores it competes with
// the running candidate and measured slower (docs/isolation.md, Benchmarks).
struct Spare {
  pid_t pid = -1;
  int request_fd = -1;  // write end of the pipe its request frame goes through
  int reply_fd = -1;    // memfd it writes its reply frame into
  int done_fd = -1;     // read end of the pipe it writes one byte to once its reply is complete
  int fd_channel = -1;  // socket its request's sealed input memfds go through
};

// Closes every descriptor but stdout, stderr and `keep` (the host's pipes,
// and another candidate's reply memfd the worker held at the fork).
void CloseAllBut(std::vector<int> keep) {
  keep.push_back(1);
  keep.push_back(2);
  std::sort(keep.begin(), keep.end());
  unsigned next = 0;
  for (int fd : keep) {
    if (static_cast<unsigned>(fd) > next) syscall(SYS_close_range, next, static_cast<unsigned>(fd) - 1, 0u);
    next = static_cast<unsigned>(fd) + 1;
  }
  syscall(SYS_close_range, next, ~0u, 0u);
}

int SpareBody(const WorkerMainOptions& options, int request_fd, int reply_fd, int done_fd, int fd_channel) {
  g_stages.Start();
  CloseAllBut({request_fd, reply_fd, done_fd, fd_channel});  // never the host's pipes or another candidate's reply
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (g_hardware) setpgid(0, 0);  // its compiler processes form one group (KillCandidateTree)
  PrefaultPages(g_written_pages);  // copy-on-write broken now, while the previous candidate runs
  g_stages.Mark("prefault");
  // Warm up only while idle: with its request already waiting it would only delay it.
  const char* warm = std::getenv("ACCELOPT_SPARE_WARM_UP");
  pollfd pending{request_fd, POLLIN, 0};
  if (warm != nullptr && std::string(warm) == "1" && poll(&pending, 1, 0) == 0) {
    try {
      python::CallJson(accelopt::api::kWorkerWarmUp, nullptr);
      if (g_identity) g_identity->Unchanged();
      if (g_content) g_content->Unchanged();
    } catch (const std::exception&) {  // only speed is lost
    }
  }
  // Sealed before it can receive anything: from here on every system call
  // goes through the candidate allow-list (and its compilation by libseccomp,
  // ~ms, is off the request's critical path).
  std::vector<std::string> warnings;
  const char* audit = std::getenv("ACCELOPT_SECCOMP_AUDIT");
  SyscallProfile profile = g_hardware ? SyscallProfile::kHardware : SyscallProfile::kEmulator;
  if (options.sandbox &&
      !InstallCandidatePolicy(profile, audit != nullptr && std::string(audit) == "1", g_pid_namespace, &warnings))
    spdlog::debug("{}", warnings.back());
  g_stages.Mark("seccomp");
  g_stages.Flush("spare");
  LineReader reader(request_fd);
  std::string line;
  if (reader.ReadLine(&line, -1) != LineReader::kLine) return 0;  // retired unused
  python::Packed message;
  message.value = nlohmann::json::parse(line, nullptr, false);
  if (!message.value.is_object()) return 73;
  std::vector<uint64_t> sizes;
  try {
    sizes = BlobSizes(message.value, UINT64_MAX);
  } catch (const std::invalid_argument&) {
    return 73;
  }
  for (uint64_t size : sizes) {
    message.blobs.emplace_back();
    if (reader.ReadExact(&message.blobs.back(), size, -1) != LineReader::kLine) return 73;
  }
  close(request_fd);
  if (message.value.contains("shared")) {
    // The inputs: sealed memfds, mapped by worker_entry (read-only, shared with the host).
    auto& shared = message.value["shared"];
    std::vector<UniqueFd> fds;
    std::string why;
    if (!shared.is_object() || !shared["memfds"].is_number_unsigned() ||
        !RecvFds(fd_channel, shared["memfds"].get<size_t>(), "", kFdWaitMs, &fds, &why))
      return 73;
    nlohmann::json numbers = nlohmann::json::array();
    for (auto& fd : fds) numbers.push_back(fd.Release());  // this process's until it exits
    shared["memfds"] = std::move(numbers);
  }
  close(fd_channel);
  g_stages.Start();  // from the request on
  message.value.erase("blobs");
  return CandidateBody(options, std::move(message), reply_fd, done_fd);
}

void Retire(Spare* spare) {
  if (spare->request_fd >= 0) close(spare->request_fd);
  if (spare->reply_fd >= 0) close(spare->reply_fd);
  if (spare->done_fd >= 0) close(spare->done_fd);
  if (spare->fd_channel >= 0) close(spare->fd_channel);
  if (spare->pid > 0) {
    kill(spare->pid, SIGKILL);
    WaitForChild(spare->pid, 0, SteadyNowMs());
  }
  *spare = Spare{};
}

// Forks a spare; throws std::runtime_error when the system refuses.
Spare ForkSpare(const WorkerMainOptions& options) {
  Spare spare;
  // Sealable: a reply that is sealed once its candidate stopped goes to the host as it is.
  spare.reply_fd = memfd_create("accelopt-reply", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  int fds[2], done[2], channel[2];
  if (spare.reply_fd < 0 || pipe2(fds, O_CLOEXEC) != 0) {
    std::string error = std::strerror(errno);
    Retire(&spare);
    throw std::runtime_error("cannot prepare a candidate process: " + error);
  }
  if (pipe2(done, O_CLOEXEC) != 0) {
    std::string error = std::strerror(errno);
    close(fds[0]);
    close(fds[1]);
    Retire(&spare);
    throw std::runtime_error("cannot prepare a candidate process: " + error);
  }
  try {
    MakeFdChannel(channel);
  } catch (const std::exception& e) {
    for (int fd : {fds[0], fds[1], done[0], done[1]}) close(fd);
    Retire(&spare);
    throw std::runtime_error(std::string("cannot prepare a candidate process: ") + e.what());
  }
  WidenPipe(fds[1]);
  try {
    spare.pid = ForkWithPython([&] {
      close(fds[1]);
      close(done[0]);
      close(channel[0]);
      return SpareBody(options, fds[0], spare.reply_fd, done[1], channel[1]);
    });
  } catch (...) {
    for (int fd : {fds[0], fds[1], done[0], done[1], channel[0], channel[1]}) close(fd);
    Retire(&spare);
    throw;
  }
  close(fds[0]);
  close(done[1]);
  close(channel[1]);
  spare.request_fd = fds[1];
  spare.done_fd = done[0];
  spare.fd_channel = channel[0];
  return spare;
}

// Hands the request to a spare (forking one if needed; a spare that died
// while idle is replaced once). Returns false with *error set on failure.
bool StartCandidate(const WorkerMainOptions& options, python::Packed& message, const std::vector<UniqueFd>& shared,
                    Spare* spare, std::string* error) {
  std::vector<int> shared_fds;
  for (const auto& fd : shared) shared_fds.push_back(fd.get());
  for (int attempt = 0; attempt < 2; ++attempt) {
    try {
      if (spare->pid <= 0) *spare = ForkSpare(options);
    } catch (const std::exception& e) {
      *error = e.what();
      return false;
    }
    bool sent = (shared_fds.empty() || SendFds(spare->fd_channel, shared_fds, "")) &&
                WriteFrame(spare->request_fd, message.value, message.blobs);
    close(spare->request_fd);
    spare->request_fd = -1;
    if (sent) {
      // The candidate holds its own copy now. Free the request's buffers before ServeOne
      // forks the next spare: that spare (the next pass's candidate) would inherit them as
      // resident pages, its own once this worker frees them (issue 14: rope's worker peak
      // held the previous pass's 256 MB of inputs; docs/benchmarks/candidate-memory.txt).
      message.blobs = {};
      return true;
    }
    close(spare->reply_fd);
    spare->reply_fd = -1;
    Retire(spare);  // it died before its request: replace it
  }
  *error = "candidate processes die before receiving their request";
  return false;
}

// Runs one request in a fresh candidate process and writes its reply (or
// why it has none) to the host. The next spare is forked as soon as this one
// took its request, so its fork overlaps this candidate's run. Returns false
// when the host is gone.
bool ServeOne(const WorkerMainOptions& options, const nlohmann::json& request, python::Packed message,
              const std::vector<UniqueFd>& shared, Spare* spare) {
  const double deadline_s = request.value("deadline_s", 0.0);
  nlohmann::json header;
  std::string problem;
  off_t blobs_at = 0;
  uint64_t blobs_size = 0;
  Spare current;
  pid_t stopped = -1;
  if (std::string error; !ClearScratch(message.value.value("scratch", ""), &error)) {
    header = ErrorReply("worker_error", error);
  } else if (!StartCandidate(options, message, shared, spare, &error)) {
    header = ErrorReply("worker_error", error);
  } else {
    double started = SteadyNowMs();
    g_stages.Mark("handed_over");
    current = *spare;
    *spare = Spare{};
    if (!g_hardware) {
      try {
        *spare = ForkSpare(options);
      } catch (const std::exception& fork_error) {
        spdlog::warn("{}", fork_error.what());  // the next request forks on demand
      }
    }
    g_stages.Mark("fork");
    ReapKilled();
    g_stages.Mark("reap");
    ChildEnd end = WaitForChild(current.pid, deadline_s, started, current.done_fd);
    g_stages.Mark("wait");
    if (g_hardware) {
      KillCandidateTree(current.pid);  // before the host reads what it left in scratch
    } else if (end.stopped) {
      stopped = current.pid;  // discarded once its reply is on its way
    }
    current.pid = -1;
    if (end.timed_out || end.signal != 0 || end.exit_code != 0) {
      auto [kind, text] = ClassifyEnd(end, deadline_s);
      header = ErrorReply(kind, text);
      header["candidate_died"] = true;
    } else if (!ReadCandidateReply(current.reply_fd, &header, &blobs_at, &blobs_size, &problem)) {
      header = ErrorReply("crash", problem);
      header["candidate_died"] = true;
      blobs_size = 0;
    }
  }
  CapStrings(&header);
  header.erase("restart");
  header.erase("reply_memfd");
  header["id"] = request.value("id", nlohmann::json());
  header["nonce"] = request.value("nonce", "");
  // The attachments stay where the candidate wrote them: its reply memfd, sealed
  // now that the candidate is stopped (a candidate that mapped it writable, or
  // sealed it against sealing, makes the seal fail: its bytes go by sendfile).
  std::string seal_problem;
  const auto& least = request.value("reply_memfd_min_bytes", nlohmann::json());
  bool hand_over = g_channel >= 0 && least.is_number_unsigned() && blobs_size > 0 &&
                   blobs_size >= least.get<uint64_t>() && !g_hardware && stopped > 0 &&
                   SealReadOnly(current.reply_fd, &seal_problem);
  if (hand_over) header["reply_memfd"] = {{"at", static_cast<uint64_t>(blobs_at)}};
  bool sent = hand_over ? SendFds(g_channel, {current.reply_fd}, header["nonce"].get<std::string>()) &&
                              WriteLine(kReplyFd, header.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace))
                        : WriteLine(kReplyFd, header.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)) &&
                              SendFromFile(kReplyFd, current.reply_fd, blobs_at, blobs_size);
  if (stopped > 0) {
    kill(stopped, SIGKILL);  // its teardown overlaps the host's judging; reaped at the next request
    g_to_reap.push_back(stopped);
  }
  g_stages.Mark("forward");
  Retire(&current);
  g_stages.Flush("worker");
  return sent;
}

// What the profile adds to Landlock's lists (accelopt.sandbox.hardware_profile):
// the user's ACCELOPT_SANDBOX_READ/WRITE, and for the hardware profile the
// Neuron paths and the executables candidates may start.
struct SandboxPaths {
  std::vector<std::string> read, write, exec;
};

SandboxPaths ProfilePaths(const WorkerMainOptions& options, const nlohmann::json& versions) {
  nlohmann::json paths;
  if (Hardware(options)) {
    nlohmann::json location = versions.contains("sdk") ? versions["sdk"].value("location", nlohmann::json()) : nullptr;
    paths = python::CallJson(accelopt::api::kHardwareNeuronPaths, location);
  } else {
    paths = python::CallJson(accelopt::api::kHardwareExtraPaths, nullptr);
  }
  SandboxPaths out;
  for (const auto& p : paths.value("read", nlohmann::json::array())) out.read.push_back(p.get<std::string>());
  for (const auto& p : paths.value("write", nlohmann::json::array())) out.write.push_back(p.get<std::string>());
  for (const auto& p : paths.value("exec", nlohmann::json::array())) out.exec.push_back(p.get<std::string>());
  return out;
}

// Forks a child that installs the candidate policy and tries what it must
// refuse; the outcome becomes a startup warning when the policy cannot hold.
void ProbeCandidatePolicy(std::vector<std::string>* warnings) {
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) return;
  pid_t child = ForkWithPython([&] {
    close(pipe_fds[0]);
    std::vector<std::string> found;
    if (!InstallCandidatePolicy(g_hardware ? SyscallProfile::kHardware : SyscallProfile::kEmulator, false, &found)) {
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
  struct stat channel{};
  if (fstat(kChannelFd, &channel) == 0 && S_ISSOCK(channel.st_mode)) g_channel = kChannelFd;
  CloseInheritedFds(g_channel >= 0 ? kChannelFd + 1 : kReplyFd + 1);
  DieWithParent(options.parent_pid);
  spdlog::set_pattern("%l %v");
  std::vector<std::string> warnings;
  ApplyResourceLimits(options.memory_bytes, options.cpu_seconds, &warnings);
  g_hardware = Hardware(options);
  if (options.sandbox) g_pid_namespace = EnterNamespaces(&warnings).pid;  // this process may now be pid 1 of its namespace
  if (g_hardware && !g_pid_namespace) prctl(PR_SET_CHILD_SUBREAPER, 1);  // orphaned compiler processes come back to us

  nlohmann::json versions;
  try {
    python::Initialize(options.python_paths);
    versions = python::CallJson(accelopt::api::kWorkerStartup,
                                {{"worker_id", options.id}, {"backend", options.backend}});
    const char* content = std::getenv("ACCELOPT_CONTENT_CHECK");  // "0": the digest in Python (A/B runs)
    if (content == nullptr || std::string(content) != "0") {
      try {
        g_content = ContentSnapshot::Take();
        // From here on candidates leave the digest to g_content (Python digests only on a difference).
        python::CallJson(accelopt::api::kWorkerNativeContentCheck, true);
      } catch (const std::exception& error) {  // only speed is lost: handle() keeps the digest
        g_content.reset();
        warnings.push_back(std::string("content check unavailable, the cost model is digested in Python: ") +
                           error.what());
      }
    }
    // Last: everything the worker imports or sets must be in the baseline,
    // or every candidate's check finds a difference and runs the slow
    // Python comparison (~3-10 ms).
    g_identity = NamespaceSnapshot::Take();
    const char* prefault = std::getenv("ACCELOPT_PREFAULT");
    if (!g_hardware && (prefault == nullptr || std::string(prefault) != "0")) {
      g_written_pages = LearnWrittenPages([] {  // needs /proc: before Landlock
        python::CallJson(accelopt::api::kWorkerWarmUp, nullptr);
        if (g_identity) g_identity->Unchanged();
        if (g_content) g_content->Unchanged();
      });
    }
  } catch (const std::exception& error) {
    nlohmann::json reply = {{"ready", false}, {"error", error.what()}};
    WriteLine(kReplyFd, reply.dump());
    return 71;
  }
  if (options.sandbox) {
    // Everything on sys.path: the host's own folder, ACCELOPT_PYTHON_PATH's
    // and the pipeline's python_path folders.
    std::vector<std::string> readable = {"/usr", "/lib", "/lib64", "/dev/urandom"};
    for (const auto& path : python::SysPathEntries(options.python_paths)) readable.push_back(path);
    std::vector<std::string> writable = {"/dev/null"};
    if (!options.scratch.empty()) writable.push_back(options.scratch);
    try {
      SandboxPaths extra = ProfilePaths(options, versions);
      readable.insert(readable.end(), extra.read.begin(), extra.read.end());
      writable.insert(writable.end(), extra.write.begin(), extra.write.end());
      if (g_hardware) {
        RestrictFileSystemWithExec(readable, writable, extra.exec, &warnings);
      } else {
        RestrictFileSystem(readable, writable, &warnings);
      }
    } catch (const std::exception& error) {
      nlohmann::json reply = {{"ready", false}, {"error", std::string("sandbox paths: ") + error.what()}};
      WriteLine(kReplyFd, reply.dump());
      return 71;
    }
    ProbeCandidatePolicy(&warnings);
  } else {
    warnings.push_back("sandbox disabled (--no-sandbox)");
  }
  // Both baselines must still hold here, in the state every candidate
  // starts from; else every candidate's check finds a difference and pays
  // the Python comparison (as once when a module imported after the baseline
  // added a name to its package).
  if (g_identity && !g_identity->Unchanged())
    warnings.push_back("integrity baseline: the worker changed a watched module after recording it; every "
                       "candidate's identity check takes the slow path");
  if (g_content && !g_content->Unchanged())
    warnings.push_back("integrity baseline: the cost model changed after its content was recorded; every "
                       "candidate's content check takes the slow path");
  Spare spare;
  try {
    if (!g_hardware) spare = ForkSpare(options);
  } catch (const std::exception& error) {
    warnings.push_back(error.what());
  }
  size_t prefault_bytes = 0;
  for (const auto& range : g_written_pages) prefault_bytes += range.bytes;
  nlohmann::json ready = {{"ready", true}, {"pid", getpid()}, {"warnings", warnings}, {"versions", versions},
                          {"prefault_bytes", prefault_bytes}};
  if (!WriteLine(kReplyFd, ready.dump())) return 0;

  LineReader reader(kRequestFd);
  std::string line;
  while (reader.ReadLine(&line, -1) == LineReader::kLine) {
    g_stages.Start();
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
    std::vector<UniqueFd> shared;
    if (request.contains("shared")) {
      // Its inputs: sealed memfds on the descriptor channel, tagged with the request's nonce.
      const auto& spec = request["shared"];
      std::string why = g_channel < 0 ? "this worker has no descriptor channel" : "";
      bool ok = why.empty() && spec.is_object() && spec.value("memfds", nlohmann::json()).is_number_unsigned() &&
                RecvFds(g_channel, spec["memfds"].get<size_t>(), request.value("nonce", ""), kFdWaitMs, &shared, &why);
      for (const auto& fd : shared) ok = ok && IsSealedReadOnly(fd.get(), &why);
      if (!ok) {
        nlohmann::json reply = ErrorReply("worker_error", "shared inputs: " + (why.empty() ? "malformed" : why));
        reply["id"] = request.value("id", nlohmann::json());
        reply["nonce"] = request.value("nonce", "");
        if (!WriteLine(kReplyFd, reply.dump())) return 0;
        continue;
      }
    }
    g_stages.Mark("read");
    message.value = {{"module", request.value("module", "")},
                     {"function", request.value("function", "")},
                     {"arg", request.value("arg", nlohmann::json())},
                     {"packed", request.value("packed", false)},
                     {"scratch", request.value("scratch", options.scratch)},
                     {"limits", request.value("limits", nlohmann::json::object())}};
    if (!shared.empty())
      message.value["shared"] = {{"memfds", shared.size()},
                                 {"blobs", request["shared"].value("blobs", nlohmann::json::array())}};
    if (!ServeOne(options, request, std::move(message), shared, &spare)) break;
  }
  Retire(&spare);
  ReapKilled();
  return 0;
}

}  // namespace accelopt::worker
