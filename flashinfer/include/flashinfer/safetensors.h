// flashinfer/safetensors.h - a reader of the safetensors format (FIB's
// workload blobs; flashinfer-facts §1.2): 8 bytes little-endian header length n, n bytes
// of JSON {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__"?},
// then the raw row-major little-endian bytes (offsets relative to the end of
// the header).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace accelopt::fib {

struct SafetensorsEntry {
  std::string dtype;       ///< as written: F32, F16, BF16, F8_E4M3, I64, BOOL, U8, ...
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  ///< byte offsets relative to the data section
};

struct SafetensorsFile {
  std::string path;
  uint64_t data_start = 0;  ///< absolute offset of the data section (8 + header length)
  std::map<std::string, SafetensorsEntry> tensors;
  std::map<std::string, std::string> metadata;

  /// Reads the header of `path`. Throws std::runtime_error with the reason:
  /// missing file, a Git-LFS pointer instead of the data, a header that is
  /// not JSON, offsets outside the file or sizes that disagree with the shape.
  static SafetensorsFile Open(const std::string& path);
  /// The raw bytes of tensor `key` (throws std::out_of_range for an unknown key).
  std::vector<uint8_t> Read(const std::string& key) const;
};

/// FIB's dtype for a safetensors dtype (F32 -> float32, BF16 -> bfloat16,
/// F8_E4M3 -> float8_e4m3fn, BOOL -> bool, ...); nullopt when FIB has none (U8, F64, ...).
std::optional<std::string> FibDType(const std::string& safetensors_dtype);
/// Bytes per element of a safetensors dtype (0 when unknown).
size_t SafetensorsDTypeSize(const std::string& safetensors_dtype);

/// True when the file at `path` starts like a Git-LFS pointer
/// ("version https://git-lfs.github.com/spec/v1").
bool IsLfsPointer(const std::string& path);

}  // namespace accelopt::fib
