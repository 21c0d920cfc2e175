// flashinfer/src/safetensors.cc - the safetensors reader (safetensors.h).
#include "flashinfer/safetensors.h"

#include <fstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

namespace accelopt::fib {

namespace {

const std::map<std::string, std::pair<std::string, size_t>>& DTypeTable() {
  static const std::map<std::string, std::pair<std::string, size_t>> kTable = {
      {"F32", {"float32", 4}},       {"F16", {"float16", 2}},     {"BF16", {"bfloat16", 2}},
      {"F8_E4M3", {"float8_e4m3fn", 1}}, {"F8_E5M2", {"float8_e5m2", 1}}, {"I64", {"int64", 8}},
      {"I32", {"int32", 4}},         {"I16", {"int16", 2}},       {"I8", {"int8", 1}},
      {"BOOL", {"bool", 1}},         {"U8", {"", 1}},             {"U16", {"", 2}},
      {"U32", {"", 4}},              {"U64", {"", 8}},            {"F64", {"", 8}},
  };
  return kTable;
}

}  // namespace

std::optional<std::string> FibDType(const std::string& dtype) {
  auto it = DTypeTable().find(dtype);
  if (it == DTypeTable().end() || it->second.first.empty()) return std::nullopt;
  return it->second.first;
}

size_t SafetensorsDTypeSize(const std::string& dtype) {
  auto it = DTypeTable().find(dtype);
  return it == DTypeTable().end() ? 0 : it->second.second;
}

bool IsLfsPointer(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string head(40, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<size_t>(in.gcount()));
  return head.rfind("version https://git-lfs", 0) == 0;
}

SafetensorsFile SafetensorsFile::Open(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw std::runtime_error("cannot open " + path);
  const uint64_t size = static_cast<uint64_t>(in.tellg());
  in.seekg(0);
  if (IsLfsPointer(path))
    throw std::runtime_error(path + " is a Git-LFS pointer, not the data (run `git lfs pull --include " + path +
                             "` in the trace set)");
  unsigned char raw[8];
  if (size < 8 || !in.read(reinterpret_cast<char*>(raw), 8)) throw std::runtime_error(path + ": shorter than 8 bytes");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | raw[i];
  if (n > size - 8 || n > (100u << 20)) throw std::runtime_error(path + ": header length " + std::to_string(n) + " exceeds the file");
  std::string header(n, '\0');
  in.read(header.data(), static_cast<std::streamsize>(n));
  auto j = nlohmann::json::parse(header, nullptr, false);
  if (!j.is_object()) throw std::runtime_error(path + ": the header is not a JSON object");
  SafetensorsFile file;
  file.path = path;
  file.data_start = 8 + n;
  const uint64_t data_size = size - file.data_start;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (it.value().is_object())
        for (auto m = it.value().begin(); m != it.value().end(); ++m)
          if (m.value().is_string()) file.metadata[m.key()] = m.value().get<std::string>();
      continue;
    }
    const auto& t = it.value();
    if (!t.is_object() || !t.contains("dtype") || !t.contains("shape") || !t.contains("data_offsets"))
      throw std::runtime_error(path + ": tensor '" + it.key() + "' lacks dtype, shape or data_offsets");
    SafetensorsEntry entry;
    try {
      entry.dtype = t["dtype"].get<std::string>();
      entry.shape = t["shape"].get<std::vector<int64_t>>();
      auto offsets = t["data_offsets"].get<std::vector<uint64_t>>();
      if (offsets.size() != 2) throw std::runtime_error("data_offsets must have two items");
      entry.begin = offsets[0];
      entry.end = offsets[1];
    } catch (const std::exception& error) {
      throw std::runtime_error(path + ": tensor '" + it.key() + "': " + error.what());
    }
    if (entry.begin > entry.end || entry.end > data_size)
      throw std::runtime_error(path + ": tensor '" + it.key() + "' lies outside the file");
    if (size_t item = SafetensorsDTypeSize(entry.dtype); item != 0) {
      uint64_t count = 1;
      for (int64_t d : entry.shape) {
        if (d < 0) throw std::runtime_error(path + ": tensor '" + it.key() + "' has a negative dimension");
        count *= static_cast<uint64_t>(d);
      }
      if (count * item != entry.end - entry.begin)
        throw std::runtime_error(path + ": tensor '" + it.key() + "' holds " + std::to_string(entry.end - entry.begin) +
                                 " bytes, its shape and dtype need " + std::to_string(count * item));
    }
    file.tensors[it.key()] = entry;
  }
  return file;
}

std::vector<uint8_t> SafetensorsFile::Read(const std::string& key) const {
  const SafetensorsEntry& entry = tensors.at(key);
  std::ifstream in(path, std::ios::binary);
  std::vector<uint8_t> out(entry.end - entry.begin);
  in.seekg(static_cast<std::streamoff>(data_start + entry.begin));
  if (!in.read(reinterpret_cast<char*>(out.data()), static_cast<std::streamsize>(out.size())))
    throw std::runtime_error(path + ": cannot read tensor '" + key + "'");
  return out;
}

}  // namespace accelopt::fib
