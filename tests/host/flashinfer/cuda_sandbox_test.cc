// CUDA solutions are built by nvcc in a sandbox (issue 34): the toolkit and
// the solution's sources read-only, only the build's output folder writable,
// nothing else of the file system readable, and an allow-listed environment
// (docs/flashinfer.md, "The CUDA build's sandbox"). A source that includes a
// host file fails to build and the file's contents appear nowhere.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "flashinfer/cuda_build.h"
#include "flashinfer/model.h"
#include "support/test_support.h"

using accelopt::testing::TempDir;
namespace fib = accelopt::fib;
namespace fs = std::filesystem;

namespace {

fib::Solution CudaSolution(const std::string& code) {
  fib::Solution s;
  s.name = "probe";
  s.definition = "gemm_n8_k16";
  s.author = "tests";
  s.spec.language = "cuda";
  s.spec.target_hardware = {"NVIDIA_H100"};
  s.spec.entry_point = "kernel.cu::run";
  s.sources = {{"kernel.cu", code}};
  return s;
}

std::string Slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Every file under `dir` (the build folder) and the log: none may hold `secret`.
void CheckNowhere(const fib::CudaBuild& build, const fs::path& dir, const std::string& secret) {
  CHECK(build.log.find(secret) == std::string::npos);
  CHECK(build.command.find(secret) == std::string::npos);
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    if (!entry.is_regular_file()) continue;
    INFO(entry.path());
    CHECK(Slurp(entry.path()).find(secret) == std::string::npos);
  }
}

bool HaveNvcc() { return !fib::FindCudaToolkit().nvcc.empty(); }

}  // namespace

TEST_CASE("fib CUDA build: a source that includes a file outside the allowed folders fails, its contents unseen",
          "[flashinfer]") {
  if (!HaveNvcc()) {
    WARN(std::string("skipped: ") + "no CUDA toolkit (nvcc) on this machine");
    return;
  }
  TempDir dir;
  const std::string secret = "ACCELOPT_SECRET_5f3a9c is not C++";
  fs::path file = dir.Write("elsewhere/secret.h", secret + "\n");
  fib::CudaBuild built = fib::BuildCudaSolution(
      CudaSolution("#include \"" + file.string() + "\"\n#include \"/etc/hostname\"\nint x;\n"),
      (dir.path() / "build").string());
  INFO(built.command << "\n" << built.log);
  CHECK_FALSE(built.ok);
  CHECK_FALSE(built.no_toolkit);
  CHECK(built.log.find(file.string()) != std::string::npos);  // the error names the file
  CHECK(built.log.find("Permission denied") != std::string::npos);
  CheckNowhere(built, dir.path() / "build", "ACCELOPT_SECRET_5f3a9c");
  std::string hostname = Slurp("/etc/hostname");
  while (!hostname.empty() && (hostname.back() == '\n' || hostname.back() == ' ')) hostname.pop_back();
  if (hostname.size() >= 6) CheckNowhere(built, dir.path() / "build", hostname);
}

TEST_CASE("fib CUDA build: the assembler cannot embed a host file either", "[flashinfer]") {
  if (!HaveNvcc()) {
    WARN(std::string("skipped: ") + "no CUDA toolkit (nvcc) on this machine");
    return;
  }
  TempDir dir;
  fs::path file = dir.Write("elsewhere/blob.bin", "ACCELOPT_SECRET_77e1\n");
  fib::CudaBuild built = fib::BuildCudaSolution(
      CudaSolution("__asm__(\".section .rodata\\n.incbin \\\"" + file.string() + "\\\"\\n.text\");\nint x;\n"),
      (dir.path() / "build").string());
  INFO(built.command << "\n" << built.log);
  CHECK_FALSE(built.ok);
  CHECK_FALSE(built.no_toolkit);
  CheckNowhere(built, dir.path() / "build", "ACCELOPT_SECRET_77e1");
}

TEST_CASE("fib CUDA build: nvcc runs with an allow-listed environment, not the host's", "[flashinfer]") {
  if (!HaveNvcc()) {
    WARN(std::string("skipped: ") + "no CUDA toolkit (nvcc) on this machine");
    return;
  }
  // nvcc adds $NVCC_APPEND_FLAGS to its command line: the host's environment steering the build.
  const char* old = std::getenv("NVCC_APPEND_FLAGS");
  std::string saved = old ? old : "";
  setenv("NVCC_APPEND_FLAGS", "-DACCELOPT_HOST_ENV_LEAKED=1", 1);
  TempDir dir;
  fib::CudaBuild built = fib::BuildCudaSolution(
      CudaSolution("#ifdef ACCELOPT_HOST_ENV_LEAKED\n#error the host environment reached nvcc\n#endif\n"
                   "#include \"no_such_header_here.h\"\n"),
      (dir.path() / "build").string());
  if (old) setenv("NVCC_APPEND_FLAGS", saved.c_str(), 1);
  else unsetenv("NVCC_APPEND_FLAGS");
  INFO(built.command << "\n" << built.log);
  CHECK_FALSE(built.ok);
  CHECK(built.log.find("the host environment reached nvcc") == std::string::npos);
  CHECK(built.log.find("no_such_header_here.h") != std::string::npos);
}
