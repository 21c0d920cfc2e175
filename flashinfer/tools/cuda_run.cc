// accelopt-fib-cuda-run - runs one trial of a built FIB cuda/cpp solution
// (flashinfer/cuda_build.h) through the CUDA driver API, in its own process
// (docs/flashinfer.md). libcuda.so.1 is loaded at run time: where it is
// absent or no device answers, the runner says so ("no_device") instead of
// failing to start.
//
//   accelopt-fib-cuda-run --probe           {"device": bool, "name"?, "message"?}; exit 0 with a device, else 3
//   accelopt-fib-cuda-run REQUEST.json      one trial; prints one JSON object
//
// REQUEST: {"library", "symbol", "out_dir",
//           "args": [{"kind": "tensor", "code", "bits", "shape", "file"?, "output": bool} |
//                    {"kind": "int"|"float"|"bool", "value"}],
//           "timing": {"warmup": 10, "iterations": 50, "flush": true}}
// Inputs are uploaded from their files; outputs are allocated uninitialised
// (FIB's torch.empty). The solution is called once (its outputs are written
// to first_<i>.bin), then warm-up calls, then timed calls each between two
// CUDA events on the runner's stream, the L2 (2 x its size) zeroed with
// cuMemsetD8Async before every call (FIB's cold_l2_cache); the last call's
// outputs go to after_<i>.bin and the inputs, read back, to input_after_<i>.bin.
// Result: {"status": "ok", "median_ms", "samples_ms", "name"} or
// {"status": "no_device"|"runtime_error"|"load_error", "message"}.
#include <dlfcn.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

using nlohmann::json;

namespace {

// The driver API, declared here (no cuda.h needed to build the runner).
using CUresult = int;
using CUdevice = int;
using CUcontext = void*;
using CUstream = void*;
using CUevent = void*;
using CUdeviceptr = unsigned long long;
constexpr int kL2CacheSize = 38;  // CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE

struct Driver {
  void* lib = nullptr;
  CUresult (*cuInit)(unsigned) = nullptr;
  CUresult (*cuDeviceGetCount)(int*) = nullptr;
  CUresult (*cuDeviceGet)(CUdevice*, int) = nullptr;
  CUresult (*cuDeviceGetName)(char*, int, CUdevice) = nullptr;
  CUresult (*cuDeviceGetAttribute)(int*, int, CUdevice) = nullptr;
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext*, CUdevice) = nullptr;
  CUresult (*cuCtxSetCurrent)(CUcontext) = nullptr;
  CUresult (*cuStreamCreate)(CUstream*, unsigned) = nullptr;
  CUresult (*cuStreamSynchronize)(CUstream) = nullptr;
  CUresult (*cuMemAlloc)(CUdeviceptr*, size_t) = nullptr;
  CUresult (*cuMemcpyHtoD)(CUdeviceptr, const void*, size_t) = nullptr;
  CUresult (*cuMemcpyDtoH)(void*, CUdeviceptr, size_t) = nullptr;
  CUresult (*cuMemsetD8Async)(CUdeviceptr, unsigned char, size_t, CUstream) = nullptr;
  CUresult (*cuEventCreate)(CUevent*, unsigned) = nullptr;
  CUresult (*cuEventRecord)(CUevent, CUstream) = nullptr;
  CUresult (*cuEventSynchronize)(CUevent) = nullptr;
  CUresult (*cuEventElapsedTime)(float*, CUevent, CUevent) = nullptr;
  CUresult (*cuGetErrorString)(CUresult, const char**) = nullptr;

  std::string Load() {
    lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) return std::string("no CUDA driver: ") + dlerror();
    auto get = [this](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
      return fn != nullptr;
    };
    bool ok = get(cuInit, "cuInit") && get(cuDeviceGetCount, "cuDeviceGetCount") && get(cuDeviceGet, "cuDeviceGet") &&
              get(cuDeviceGetName, "cuDeviceGetName") && get(cuDeviceGetAttribute, "cuDeviceGetAttribute") &&
              get(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain") && get(cuCtxSetCurrent, "cuCtxSetCurrent") &&
              get(cuStreamCreate, "cuStreamCreate") && get(cuStreamSynchronize, "cuStreamSynchronize") &&
              get(cuMemAlloc, "cuMemAlloc_v2") && get(cuMemcpyHtoD, "cuMemcpyHtoD_v2") &&
              get(cuMemcpyDtoH, "cuMemcpyDtoH_v2") && get(cuMemsetD8Async, "cuMemsetD8Async") &&
              get(cuEventCreate, "cuEventCreate") && get(cuEventRecord, "cuEventRecord") &&
              get(cuEventSynchronize, "cuEventSynchronize") && get(cuEventElapsedTime, "cuEventElapsedTime");
    get(cuGetErrorString, "cuGetErrorString");  // optional: error numbers otherwise
    return ok ? "" : "libcuda.so.1 lacks a driver API function this runner needs";
  }
  std::string Error(CUresult rc) const {
    const char* text = nullptr;
    if (cuGetErrorString) cuGetErrorString(rc, &text);
    return text ? text : "CUDA error " + std::to_string(rc);
  }
};

struct DLDevice {
  int32_t device_type, device_id;
};
struct DLDataType {
  uint8_t code, bits;
  uint16_t lanes;
};
struct DLTensor {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;
  uint64_t byte_offset;
};
struct AccelFibArg {
  int32_t kind;
  const DLTensor* tensor;
  int64_t i;
  double d;
};
using ExportFn = int (*)(const AccelFibArg*, int32_t, char*, size_t);
using SetStreamFn = void (*)(void*);

[[noreturn]] void Answer(const json& j, int code) {
  std::cout << j.dump() << std::endl;
  std::exit(code);
}

// The first device, its name and the driver; exits with no_device when there is none.
CUdevice OpenDevice(Driver& d, std::string* name) {
  std::string error = d.Load();
  if (!error.empty()) Answer({{"status", "no_device"}, {"device", false}, {"message", error}}, 3);
  CUresult rc = d.cuInit(0);
  int count = 0;
  if (rc == 0) rc = d.cuDeviceGetCount(&count);
  if (rc != 0 || count == 0)
    Answer({{"status", "no_device"}, {"device", false},
            {"message", rc != 0 ? "cuInit: " + d.Error(rc) : std::string("no CUDA device")}},
           3);
  CUdevice dev = 0;
  d.cuDeviceGet(&dev, 0);
  char buf[256] = {0};
  d.cuDeviceGetName(buf, sizeof(buf), dev);
  *name = buf;
  return dev;
}

std::vector<char> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<char>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void WriteFile(const std::string& path, const std::vector<char>& data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(data.data(), static_cast<std::streamsize>(data.size()));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: accelopt-fib-cuda-run --probe | REQUEST.json\n";
    return 2;
  }
  Driver d;
  std::string name;
  if (std::string(argv[1]) == "--probe") {
    OpenDevice(d, &name);
    Answer({{"device", true}, {"name", name}}, 0);
  }
  std::ifstream in(argv[1]);
  json req = json::parse(in, nullptr, false);
  if (!req.is_object()) Answer({{"status", "load_error"}, {"message", "malformed request"}}, 2);
  CUdevice dev = OpenDevice(d, &name);
  auto check = [&](CUresult rc, const char* what) {
    if (rc != 0) Answer({{"status", "runtime_error"}, {"message", std::string(what) + ": " + d.Error(rc)}}, 1);
  };
  CUcontext ctx = nullptr;
  check(d.cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
  check(d.cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
  CUstream stream = nullptr;
  check(d.cuStreamCreate(&stream, 0), "cuStreamCreate");

  void* lib = dlopen(req.value("library", "").c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) Answer({{"status", "load_error"}, {"message", std::string("dlopen: ") + dlerror()}}, 1);
  auto fn = reinterpret_cast<ExportFn>(dlsym(lib, req.value("symbol", "").c_str()));
  auto set_stream = reinterpret_cast<SetStreamFn>(dlsym(lib, "accelopt_fib_set_stream"));
  if (fn == nullptr) Answer({{"status", "load_error"}, {"message", "the library exports no " + req.value("symbol", "")}}, 1);
  if (set_stream) set_stream(stream);

  const json& args_json = req["args"];
  std::vector<std::vector<int64_t>> shapes(args_json.size());
  std::vector<DLTensor> tensors(args_json.size());
  std::vector<AccelFibArg> args(args_json.size());
  std::vector<CUdeviceptr> buffers(args_json.size(), 0);
  std::vector<size_t> sizes(args_json.size(), 0);
  for (size_t i = 0; i < args_json.size(); ++i) {
    const json& a = args_json[i];
    std::string kind = a.value("kind", "tensor");
    args[i] = {};
    if (kind != "tensor") {
      args[i].kind = kind == "int" ? 1 : kind == "float" ? 2 : 3;
      if (kind == "float") args[i].d = a["value"].get<double>();
      else args[i].i = kind == "bool" ? (a["value"].get<bool>() ? 1 : 0) : a["value"].get<int64_t>();
      continue;
    }
    shapes[i] = a["shape"].get<std::vector<int64_t>>();
    int bits = a.value("bits", 8);
    size_t count = 1;
    for (int64_t s : shapes[i]) count *= static_cast<size_t>(s);
    sizes[i] = (count * static_cast<size_t>(bits) + 7) / 8;
    check(d.cuMemAlloc(&buffers[i], std::max<size_t>(sizes[i], 1)), "cuMemAlloc");
    if (!a.value("output", false)) {
      std::vector<char> data = ReadFile(a.value("file", ""));
      if (data.size() != sizes[i])
        Answer({{"status", "load_error"}, {"message", "input " + std::to_string(i) + " file size mismatch"}}, 1);
      check(d.cuMemcpyHtoD(buffers[i], data.data(), data.size()), "cuMemcpyHtoD");
    }
    tensors[i] = DLTensor{reinterpret_cast<void*>(buffers[i]), {2, 0}, static_cast<int32_t>(shapes[i].size()),
                          {static_cast<uint8_t>(a.value("code", 2)), static_cast<uint8_t>(bits), 1},
                          shapes[i].data(), nullptr, 0};
    args[i].kind = 0;
    args[i].tensor = &tensors[i];
  }
  char error[4096] = {0};
  auto call = [&]() {
    if (fn(args.data(), static_cast<int32_t>(args.size()), error, sizeof(error)) != 0)
      Answer({{"status", "runtime_error"}, {"message", error}}, 1);
  };
  const std::string out_dir = req.value("out_dir", ".");
  auto dump = [&](const std::string& prefix, bool outputs) {
    for (size_t i = 0; i < args_json.size(); ++i) {
      if (!buffers[i] || args_json[i].value("output", false) != outputs) continue;
      std::vector<char> data(sizes[i]);
      check(d.cuMemcpyDtoH(data.data(), buffers[i], sizes[i]), "cuMemcpyDtoH");
      WriteFile(out_dir + "/" + prefix + std::to_string(i) + ".bin", data);
    }
  };
  call();
  check(d.cuStreamSynchronize(stream), "the solution's first call");
  dump("first_", true);

  const json timing = req.value("timing", json::object());
  int warmup = timing.value("warmup", 10), iterations = timing.value("iterations", 50);
  int l2 = 0;
  d.cuDeviceGetAttribute(&l2, kL2CacheSize, dev);
  size_t flush_bytes = timing.value("flush", true) ? std::max<size_t>(2 * static_cast<size_t>(l2), 1) : 0;
  CUdeviceptr flush = 0;
  if (flush_bytes) check(d.cuMemAlloc(&flush, flush_bytes), "cuMemAlloc (L2 flush buffer)");
  CUevent start = nullptr, end = nullptr;
  check(d.cuEventCreate(&start, 0), "cuEventCreate");
  check(d.cuEventCreate(&end, 0), "cuEventCreate");
  for (int i = 0; i < warmup; ++i) {
    if (flush) d.cuMemsetD8Async(flush, 0, flush_bytes, stream);
    call();
  }
  check(d.cuStreamSynchronize(stream), "warm-up");
  std::vector<double> samples;
  for (int i = 0; i < iterations; ++i) {
    if (flush) d.cuMemsetD8Async(flush, 0, flush_bytes, stream);
    check(d.cuEventRecord(start, stream), "cuEventRecord");
    call();
    check(d.cuEventRecord(end, stream), "cuEventRecord");
    check(d.cuEventSynchronize(end), "the solution's timed call");
    float ms = 0;
    check(d.cuEventElapsedTime(&ms, start, end), "cuEventElapsedTime");
    samples.push_back(ms);
  }
  dump("after_", true);
  dump("input_after_", false);
  std::vector<double> sorted = samples;
  std::sort(sorted.begin(), sorted.end());
  double median = sorted.empty() ? 0
                  : sorted.size() % 2 ? sorted[sorted.size() / 2]
                                      : (sorted[sorted.size() / 2 - 1] + sorted[sorted.size() / 2]) / 2;
  Answer({{"status", "ok"}, {"median_ms", median}, {"samples_ms", samples}, {"name", name}, {"l2_bytes", l2},
          {"method", "cuda_events+l2_flush"}},
         0);
}
