#include "cli/run_record.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <exception>

#include <spdlog/spdlog.h>

namespace accelopt::cli {

// The texts a signal handler writes, prepared in advance.
struct RunRecord::Emergency {
  std::string tmp_path;
  std::string final_path;
  std::string interrupted;
  std::string crashed;
};

namespace {

std::atomic<const RunRecord::Emergency*> g_armed{nullptr};
std::atomic<bool>* g_cancel = nullptr;

// Async-signal-safe: unlink, open, write, fsync, close and rename only. The
// temporary is created afresh (O_EXCL | O_NOFOLLOW): a symlink planted under
// its name is removed, never written through.
void WriteNow(const std::string& tmp, const std::string& final_path, const std::string& text) {
  ::unlink(tmp.c_str());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) return;
  const char* data = text.data();
  size_t left = text.size();
  while (left > 0) {
    ssize_t n = ::write(fd, data, left);
    if (n <= 0) break;
    data += n;
    left -= static_cast<size_t>(n);
  }
  ::fsync(fd);
  ::close(fd);
  if (left == 0) ::rename(tmp.c_str(), final_path.c_str());
}

void WriteArmed(bool interrupted) {
  const RunRecord::Emergency* armed = g_armed.exchange(nullptr);
  if (armed == nullptr) return;
  WriteNow(armed->tmp_path, armed->final_path, interrupted ? armed->interrupted : armed->crashed);
}

extern "C" void OnStopSignal(int) {
  if (g_cancel != nullptr && !g_cancel->exchange(true)) return;  // first: stop gracefully
  WriteArmed(true);                                              // second: leave now
  ::_exit(130);
}

extern "C" void OnFatalSignal(int signal_number) {
  WriteArmed(false);
  ::signal(signal_number, SIG_DFL);
  ::raise(signal_number);
}

void OnTerminate() {
  WriteArmed(false);
  std::abort();
}

}  // namespace

RunRecord::RunRecord(const RunDirectory& run_dir, nlohmann::json running) : run_dir_(run_dir), json_(std::move(running)) {
  json_["status"] = "running";
  run_dir_.WriteJson("run.json", json_);
  Refresh();
}

RunRecord::~RunRecord() {
  if (!finished_) {
    Finish("failed", {{"kind", "internal_error"}, {"message", "the run ended before its result was recorded"}});
  }
}

void RunRecord::Refresh() {
  if (finished_) return;
  auto prepared = std::make_unique<Emergency>();
  prepared->final_path = (run_dir_.path() / "run.json").string();
  prepared->tmp_path = prepared->final_path + ".emergency";
  nlohmann::json copy = json_;
  copy["status"] = "interrupted";
  copy["error"] = {{"kind", "interrupted"}, {"message", "second SIGINT/SIGTERM: the host exited at once (code 130); "
                                                         "see journal.jsonl and stages/*/status.json for what finished"}};
  prepared->interrupted = copy.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  copy["status"] = "crashed";
  copy["error"] = {{"kind", "crash"}, {"message", "the host died of a fatal signal or an unhandled exception; "
                                                  "see journal.jsonl and stages/*/status.json for what finished"}};
  prepared->crashed = copy.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  g_armed.store(prepared.get());
  prepared_.push_back(std::move(prepared));
}

void RunRecord::Finish(const std::string& status, const nlohmann::json& error) {
  finished_ = true;
  json_["status"] = status;
  json_["finished_at"] = UtcNowIso();
  if (!error.is_null()) json_["error"] = error;
  // Still armed while writing: a second Ctrl-C in the middle replaces the
  // half-done write with its own final text instead of leaving "running".
  try {
    run_dir_.WriteJson("run.json", json_);
  } catch (const std::exception& e) {
    spdlog::error("cannot write run.json: {}", e.what());
  }
  g_armed.store(nullptr);
}

void InstallSignalHandlers(std::atomic<bool>* cancel) {
  g_cancel = cancel;
  struct sigaction stop {};
  stop.sa_handler = OnStopSignal;
  sigemptyset(&stop.sa_mask);
  ::sigaction(SIGINT, &stop, nullptr);
  ::sigaction(SIGTERM, &stop, nullptr);
  struct sigaction fatal {};
  fatal.sa_handler = OnFatalSignal;
  fatal.sa_flags = SA_RESETHAND;
  sigemptyset(&fatal.sa_mask);
  for (int signal_number : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) ::sigaction(signal_number, &fatal, nullptr);
  std::set_terminate(OnTerminate);
}

}  // namespace accelopt::cli
