// accelopt-fib-sandbox - runs one program (nvcc, nm) for the CUDA build of a
// FIB solution confined by Landlock (docs/flashinfer.md, "The CUDA build's
// sandbox"):
//
//   accelopt-fib-sandbox [--exec DIR]... [--read PATH]... [--write PATH]...
//                        [--env NAME=VALUE]... [--cpu-seconds N] -- PROGRAM [ARG]...
//
// The program and everything it starts may execute and read beneath the
// --exec paths, only read beneath the --read paths, read and write (never
// execute) beneath the --write paths; every other path is EACCES. Its
// environment is exactly the --env entries. Inherited descriptors above
// stderr are closed, core dumps are off and --cpu-seconds caps its CPU
// time. It uses the worker sandbox's own functions (host/src/worker/sandbox.h),
// applied here, in a single-threaded process, before the exec. Without
// Landlock it refuses to run the program (exit 125): a build is never run
// unconfined.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "worker/sandbox.h"

namespace {

constexpr int kSandboxFailed = 125;

[[noreturn]] void Usage(const char* why) {
  std::fprintf(stderr,
               "accelopt-fib-sandbox: %s\nusage: accelopt-fib-sandbox [--exec DIR]... [--read PATH]... "
               "[--write PATH]... [--env NAME=VALUE]... [--cpu-seconds N] -- PROGRAM [ARG]...\n",
               why);
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> exec_paths, read_paths, write_paths, env;
  uint64_t cpu_seconds = 0;
  int i = 1;
  for (; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if (i + 1 >= argc) Usage(("missing value after " + arg).c_str());
    std::string value = argv[++i];
    if (arg == "--exec") exec_paths.push_back(value);
    else if (arg == "--read") read_paths.push_back(value);
    else if (arg == "--write") write_paths.push_back(value);
    else if (arg == "--env") {
      if (value.find('=') == std::string::npos) Usage(("--env needs NAME=VALUE, got " + value).c_str());
      env.push_back(value);
    } else if (arg == "--cpu-seconds") {
      char* end = nullptr;
      cpu_seconds = std::strtoull(value.c_str(), &end, 10);
      if (end == nullptr || *end != '\0') Usage(("--cpu-seconds needs an integer, got " + value).c_str());
    } else {
      Usage(("unknown option " + arg).c_str());
    }
  }
  if (i >= argc) Usage("no program to run");
  if (argv[i][0] != '/') Usage("the program must be an absolute path (no PATH search outside the sandbox)");

  std::vector<std::string> warnings;
  accelopt::worker::CloseInheritedFds(3);
  accelopt::worker::ApplyResourceLimits(0, cpu_seconds, &warnings);
  if (!accelopt::worker::RestrictFileSystemWithExec(read_paths, write_paths, exec_paths, &warnings)) {
    std::string text;
    for (const auto& w : warnings) text += (text.empty() ? "" : "; ") + w;
    std::fprintf(stderr, "accelopt-fib-sandbox: cannot confine the build, not running it: %s\n", text.c_str());
    return kSandboxFailed;
  }

  std::vector<char*> envp;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  execve(argv[i], argv + i, envp.data());
  std::fprintf(stderr, "accelopt-fib-sandbox: cannot run %s: %s\n", argv[i], std::strerror(errno));
  return errno == ENOENT ? 127 : 126;
}
