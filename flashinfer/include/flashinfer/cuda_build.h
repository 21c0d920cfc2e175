// flashinfer/cuda_build.h - building FIB's `cuda`/`cpp` solutions (binding
// tvm-ffi, the default) with the machine's CUDA toolkit against the host's
// tvm-ffi shim (flashinfer/shim; docs/flashinfer.md), and running a built
// library through the CUDA driver API in a separate process
// (accelopt-fib-cuda-run).
#pragma once

#include <string>
#include <vector>

#include "flashinfer/model.h"

namespace accelopt::fib {

/// Where the CUDA toolkit is. Searched in this order, nothing hard-coded:
/// $ACCELOPT_NVCC, $CUDACXX, `nvcc` on PATH, $CUDA_HOME/bin, $CUDA_PATH/bin,
/// then the toolkit's standard install prefixes (/usr/local/cuda, the newest
/// /usr/local/cuda-<version>, /opt/cuda).
struct CudaToolkit {
  std::string nvcc;     ///< "" when none was found
  std::string root;     ///< the toolkit folder (nvcc's ../)
  std::string version;  ///< "13.0" from `nvcc --version`
  std::string searched; ///< where it looked (for the error message)
};
CudaToolkit FindCudaToolkit();

/// The folder of the shim headers (tvm/ffi/..., dlpack/dlpack.h).
std::string ShimIncludeDir();

/// The build's sandbox launcher (accelopt-fib-sandbox): $ACCELOPT_FIB_SANDBOX,
/// else the one built with this library.
std::string BuildSandbox();

struct CudaBuildOptions {
  std::string arch = "sm_90a";  ///< nvcc -arch (the GPU machine's H100/H200 is sm_90a)
  double timeout_s = 300;
  std::vector<std::string> extra_flags;
  std::string sandbox;  ///< the launcher ("": BuildSandbox())
};

struct CudaBuild {
  bool ok = false;
  std::string library;  ///< the built .so
  std::string symbol;   ///< accelopt_fib_export_<entry symbol>
  std::string log;      ///< the compiler's output, or why nothing ran
  std::string command;  ///< the nvcc command line (run inside the sandbox)
  /// Nothing was built for a reason of this machine, not the solution's:
  /// no nvcc, or no sandbox (the launcher missing, or no Landlock).
  bool no_toolkit = false;
  double seconds = 0;
};

/// Writes the solution's sources under `dir`/src and builds
/// `dir`/out/solution.so: nvcc -shared over the .cu files and the
/// .cpp/.cc/.cxx/.c files, -I the shim and the sources, -lcuda -lcublas
/// (FIB's TVM-FFI builder links both whatever `dependencies` says; the
/// driver library from the toolkit's stubs). nvcc (and the nm that checks
/// the export) run under accelopt-fib-sandbox: they may execute and read
/// the toolkit and the system's compilers and libraries, read /usr/include,
/// the shim and `dir`/src, write only `dir`/out, and get an allow-listed
/// environment; any other file is EACCES (docs/flashinfer.md). A solution
/// whose binding is `torch` is refused (not built here). A result whose
/// `ok` is false with `no_toolkit` false is FIB's COMPILE_ERROR.
CudaBuild BuildCudaSolution(const Solution& solution, const std::string& dir, const CudaBuildOptions& options = {});

/// Runs argv with stdout and stderr into one string; returns the exit
/// status (-1 spawn failure, 124 timeout: the process group is killed).
int RunProcess(const std::vector<std::string>& argv, double timeout_s, std::string* output,
               const std::string& cwd = "");

}  // namespace accelopt::fib
