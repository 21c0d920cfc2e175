#include "core/digest.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <memory>
#include <stdexcept>

#include <openssl/evp.h>

namespace accelopt {
namespace {

using MdContext = std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)>;

MdContext NewContext() {
  MdContext ctx(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1) throw std::runtime_error("SHA-256: cannot initialise OpenSSL");
  return ctx;
}

std::string Finish(EVP_MD_CTX* ctx) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  if (EVP_DigestFinal_ex(ctx, digest, &size) != 1) throw std::runtime_error("SHA-256: OpenSSL failed");
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(size * 2);
  for (unsigned int i = 0; i < size; ++i) {
    out += kHex[digest[i] >> 4];
    out += kHex[digest[i] & 0xF];
  }
  return out;
}

}  // namespace

std::string Sha256Hex(std::string_view data) {
  MdContext ctx = NewContext();
  if (EVP_DigestUpdate(ctx.get(), data.data(), data.size()) != 1) throw std::runtime_error("SHA-256: OpenSSL failed");
  return Finish(ctx.get());
}

std::optional<std::string> Sha256OfFile(const std::filesystem::path& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::unique_ptr<int, void (*)(int*)> guard(&fd, [](int* f) { ::close(*f); });
  MdContext ctx = NewContext();
  char buffer[65536];
  while (true) {
    ssize_t n = ::read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return std::nullopt;
    if (n == 0) break;
    if (EVP_DigestUpdate(ctx.get(), buffer, static_cast<size_t>(n)) != 1) return std::nullopt;
  }
  return Finish(ctx.get());
}

}  // namespace accelopt
