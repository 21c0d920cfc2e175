// flashinfer/src/cuda_build.cc - finding the CUDA toolkit and building
// solutions against the tvm-ffi shim (cuda_build.h).
#include "flashinfer/cuda_build.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "accelopt/sdk/nofollow.hpp"

extern char** environ;

namespace accelopt::fib {
namespace fs = std::filesystem;

namespace {

bool Executable(const fs::path& path) {
  std::error_code ec;
  return fs::is_regular_file(path, ec) && access(path.c_str(), X_OK) == 0;
}

std::string Env(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

}  // namespace

int RunProcess(const std::vector<std::string>& argv, double timeout_s, std::string* output, const std::string& cwd) {
  char tmpl[] = "/tmp/accelopt-fib-run-XXXXXX";
  int fd = mkstemp(tmpl);
  if (fd < 0) return -1;
  unlink(tmpl);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fd, 1);
  posix_spawn_file_actions_adddup2(&actions, fd, 2);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  if (!cwd.empty()) posix_spawn_file_actions_addchdir_np(&actions, cwd.c_str());
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  posix_spawnattr_setpgroup(&attr, 0);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  int rc = posix_spawnp(&pid, args[0], &actions, &attr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    close(fd);
    if (output) *output = "cannot start " + argv[0] + ": " + std::strerror(rc);
    return -1;
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  int status = 0;
  bool timed_out = false;
  while (true) {
    pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (done < 0 && errno != EINTR) break;
    if (std::chrono::steady_clock::now() > deadline) {
      kill(-pid, SIGKILL);
      waitpid(pid, &status, 0);
      timed_out = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (output) {
    output->clear();
    lseek(fd, 0, SEEK_SET);
    char buffer[65536];
    ssize_t n;
    while ((n = read(fd, buffer, sizeof(buffer))) > 0 && output->size() < (5u << 20)) output->append(buffer, n);
  }
  close(fd);
  if (timed_out) return 124;
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

CudaToolkit FindCudaToolkit() {
  CudaToolkit kit;
  std::vector<fs::path> candidates;
  auto add = [&](const fs::path& p) {
    candidates.push_back(p);
    kit.searched += (kit.searched.empty() ? "" : ", ") + p.string();
  };
  if (!Env("ACCELOPT_NVCC").empty()) add(Env("ACCELOPT_NVCC"));
  if (!Env("CUDACXX").empty()) add(Env("CUDACXX"));
  std::stringstream path(Env("PATH"));
  std::string dir;
  while (std::getline(path, dir, ':'))
    if (!dir.empty()) candidates.push_back(fs::path(dir) / "nvcc");
  kit.searched += (kit.searched.empty() ? "" : ", ") + std::string("nvcc on PATH");
  for (const char* var : {"CUDA_HOME", "CUDA_PATH", "CUDA_ROOT"})
    if (!Env(var).empty()) add(fs::path(Env(var)) / "bin" / "nvcc");
  // The toolkit installer's standard prefixes: /usr/local/cuda, else the newest /usr/local/cuda-X.Y.
  add("/usr/local/cuda/bin/nvcc");
  std::vector<fs::path> versioned;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/usr/local", ec))
    if (entry.path().filename().string().rfind("cuda-", 0) == 0) versioned.push_back(entry.path() / "bin" / "nvcc");
  std::sort(versioned.rbegin(), versioned.rend());
  for (const auto& p : versioned) add(p);
  add("/opt/cuda/bin/nvcc");
  for (const auto& candidate : candidates) {
    if (!Executable(candidate)) continue;
    kit.nvcc = fs::weakly_canonical(candidate, ec).string();
    kit.root = fs::path(kit.nvcc).parent_path().parent_path().string();
    std::string out;
    if (RunProcess({kit.nvcc, "--version"}, 30, &out) == 0) {
      std::smatch m;
      if (std::regex_search(out, m, std::regex("release ([0-9]+\\.[0-9]+)"))) kit.version = m[1];
    }
    return kit;
  }
  return kit;
}

std::string ShimIncludeDir() {
  if (!Env("ACCELOPT_FIB_SHIM_DIR").empty()) return Env("ACCELOPT_FIB_SHIM_DIR");
  return ACCELOPT_FIB_SHIM_DIR;
}

std::string BuildSandbox() {
  if (!Env("ACCELOPT_FIB_SANDBOX").empty()) return Env("ACCELOPT_FIB_SANDBOX");
  return ACCELOPT_FIB_SANDBOX;
}

namespace {

// The launcher's argv for `program` run confined (flashinfer/tools/build_sandbox.cc):
// the toolkit and the system's compilers executable, `read` readable, `write`
// writable, and an environment that names only the toolkit, the system's
// binaries and the build's own folders (no API key, no NVCC_*_FLAGS, no
// LD_PRELOAD from the host).
std::vector<std::string> Confined(const CudaToolkit& kit, const std::string& launcher,
                                  const std::vector<std::string>& read, const fs::path& write, double timeout_s,
                                  const std::vector<std::string>& program) {
  std::vector<std::string> argv = {launcher};
  std::vector<std::string> exec = {"/usr/bin", "/usr/lib", "/usr/lib64", "/usr/libexec", "/bin", "/lib", "/lib64"};
  if (!kit.root.empty()) exec.insert(exec.begin(), kit.root);
  for (const auto& p : exec) argv.insert(argv.end(), {"--exec", p});
  // The system headers, the loader's cache, then the build's own inputs.
  for (const auto& p : {std::string("/usr/include"), std::string("/etc/ld.so.cache")}) argv.insert(argv.end(), {"--read", p});
  for (const auto& p : read) argv.insert(argv.end(), {"--read", p});
  argv.insert(argv.end(), {"--write", write.string(), "--write", "/dev/null"});
  std::string path = (kit.root.empty() ? "" : kit.root + "/bin:") + "/usr/bin:/bin";
  for (const auto& e : {"PATH=" + path, "HOME=" + write.string(), "TMPDIR=" + (write / "tmp").string(),
                        std::string("LANG=C"), std::string("LC_ALL=C")})
    argv.insert(argv.end(), {"--env", e});
  argv.insert(argv.end(), {"--cpu-seconds", std::to_string(static_cast<long long>(timeout_s) + 1), "--"});
  argv.insert(argv.end(), program.begin(), program.end());
  return argv;
}

// The launcher refused to start the program (no Landlock): not the solution's fault.
bool SandboxRefused(int rc, const std::string& output) {
  return rc == 125 && output.find("accelopt-fib-sandbox:") != std::string::npos;
}

}  // namespace

CudaBuild BuildCudaSolution(const Solution& solution, const std::string& dir_text, const CudaBuildOptions& options) {
  CudaBuild build;
  auto start = std::chrono::steady_clock::now();
  auto finish = [&]() {
    build.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return build;
  };
  if (solution.spec.binding && *solution.spec.binding == "torch") {
    build.log = "binding torch (torch.utils.cpp_extension) is not built by accelopt-host; use binding tvm-ffi";
    return finish();
  }
  CudaToolkit kit = FindCudaToolkit();
  if (kit.nvcc.empty()) {
    build.no_toolkit = true;
    build.log = "no CUDA toolkit: nvcc not found (searched " + kit.searched + "; set ACCELOPT_NVCC or CUDA_HOME)";
    return finish();
  }
  std::string launcher = options.sandbox.empty() ? BuildSandbox() : options.sandbox;
  if (!Executable(launcher)) {
    build.no_toolkit = true;
    build.log = "the build sandbox " + launcher + " is missing: not building unconfined (set ACCELOPT_FIB_SANDBOX)";
    return finish();
  }
  // src/ holds the sources (read-only for the compiler), out/ is the only folder it may write.
  fs::path dir = fs::absolute(dir_text);
  fs::path src = dir / "src";
  fs::path out_dir = dir / "out";
  std::error_code ec;
  fs::create_directories(dir, ec);
  try {
    // Below the build folder nothing is followed: a planted src/ or out/ link is removed
    // itself, never its target (accelopt/sdk/nofollow.hpp, docs/isolation.md).
    accelopt::sdk::nofollow::Remove(dir, "src");
    accelopt::sdk::nofollow::Remove(dir, "out");
    accelopt::sdk::nofollow::EnsureDir(dir, "src", 0755);
    accelopt::sdk::nofollow::EnsureDir(dir, "out/tmp", 0755);
  } catch (const std::exception& error) {
    build.log = std::string("cannot prepare the build folder: ") + error.what();
    return finish();
  }
  std::vector<std::string> cuda_files, host_files;
  for (const auto& f : solution.sources) {
    fs::path rel = fs::path(f.path).lexically_normal();
    if (rel.is_absolute() || rel.string().rfind("..", 0) == 0) {
      build.log = "source path " + f.path + " leaves the solution's folder";
      return finish();
    }
    fs::path out = src / rel;
    try {
      accelopt::sdk::nofollow::WriteAtomic(dir, fs::path("src") / rel, f.content);
    } catch (const std::exception& error) {
      build.log = std::string("cannot write a source: ") + error.what();
      return finish();
    }
    std::string ext = rel.extension().string();
    if (ext == ".cu") cuda_files.push_back(out.string());
    if (ext == ".cpp" || ext == ".cc" || ext == ".cxx" || ext == ".c") host_files.push_back(out.string());
  }
  if (cuda_files.empty() && host_files.empty()) {
    build.log = "no .cu, .cpp, .cc, .cxx or .c source to build";
    return finish();
  }
  build.library = (out_dir / "solution.so").string();
  build.symbol = "accelopt_fib_export_" + solution.spec.EntrySymbol();
  std::vector<std::string> argv = {kit.nvcc, "-shared", "-Xcompiler", "-fPIC", "-std=c++17", "-O3",
                                   "-arch=" + options.arch, "-I" + ShimIncludeDir(), "-I" + src.string()};
  for (const auto& flag : options.extra_flags) argv.push_back(flag);
  for (const auto& f : cuda_files) argv.push_back(f);
  for (const auto& f : host_files) argv.push_back(f);
  argv.insert(argv.end(), {"-o", build.library, "-L" + kit.root + "/lib64", "-L" + kit.root + "/lib64/stubs", "-lcuda",
                           "-lcublas"});
  for (const auto& a : argv) build.command += (build.command.empty() ? "" : " ") + a;
  std::string out;
  int rc = RunProcess(Confined(kit, launcher, {ShimIncludeDir(), src.string()}, out_dir, options.timeout_s, argv),
                      options.timeout_s, &out, src.string());
  build.log = out;
  if (SandboxRefused(rc, out)) {
    build.no_toolkit = true;
    return finish();
  }
  if (rc == 124) {
    build.log += "\nnvcc timed out after " + std::to_string(static_cast<int>(options.timeout_s)) + " s";
    return finish();
  }
  if (rc != 0) {
    build.log += "\nnvcc exited with status " + std::to_string(rc);
    return finish();
  }
  // The entry symbol must be exported (FIB looks it up in the loaded module).
  // nm reads the library the solution's build made: confined as well.
  std::string nm_out;
  int nm_rc = RunProcess(Confined(kit, launcher, {}, out_dir, 60, {"/usr/bin/nm", "-D", "--defined-only", build.library}),
                         60, &nm_out);
  if (nm_rc == 0 && nm_out.find(build.symbol) == std::string::npos) {
    build.log += "\nthe library exports no " + solution.spec.EntrySymbol() + " (TVM_FFI_DLL_EXPORT_TYPED_FUNC(" +
                 solution.spec.EntrySymbol() + ", ...) missing)";
    return finish();
  }
  build.ok = true;
  return finish();
}

}  // namespace accelopt::fib
