// Sealed memfds over socket pairs (host/src/worker/shared_fds.h).
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "worker/shared_fds.h"

using namespace accelopt::worker;

namespace {

// A sealable memfd holding `text`.
UniqueFd MemfdWith(const std::string& text) {
  UniqueFd fd(memfd_create("test", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  REQUIRE(fd.get() >= 0);
  REQUIRE(write(fd.get(), text.data(), text.size()) == static_cast<ssize_t>(text.size()));
  return fd;
}

std::string Contents(int fd) {
  std::string out(4096, '\0');
  ssize_t n = pread(fd, out.data(), out.size(), 0);
  out.resize(n > 0 ? static_cast<size_t>(n) : 0);
  return out;
}

}  // namespace

TEST_CASE("descriptors cross a socket pair with their tag; stale messages are dropped", "[worker][shared]") {
  int channel[2];
  MakeFdChannel(channel);
  UniqueFd a(channel[0]), b(channel[1]);
  UniqueFd stale = MemfdWith("stale"), first = MemfdWith("first"), second = MemfdWith("second");
  REQUIRE(SendFds(a.get(), {stale.get()}, "old-nonce"));
  REQUIRE(SendFds(a.get(), {first.get(), second.get()}, "nonce"));
  std::vector<UniqueFd> got;
  std::string error;
  REQUIRE(RecvFds(b.get(), 2, "nonce", 1000, &got, &error));
  REQUIRE(got.size() == 2);
  CHECK(Contents(got[0].get()) == "first");
  CHECK(Contents(got[1].get()) == "second");
  CHECK(got[0].get() != first.get());  // the receiver's own descriptors

  // Nothing more arrives: a bounded wait fails; a wrong count fails.
  CHECK_FALSE(RecvFds(b.get(), 1, "nonce", 50, &got, &error));
  CHECK(error.find("in time") != std::string::npos);
  REQUIRE(SendFds(a.get(), {first.get()}, "n2"));
  CHECK_FALSE(RecvFds(b.get(), 2, "n2", 1000, &got, &error));
  CHECK(got.empty());
  // The peer gone: EOF, not a hang.
  a.Reset();
  CHECK_FALSE(RecvFds(b.get(), 1, "x", -1, &got, &error));
  CHECK(error.find("closed") != std::string::npos);
}

TEST_CASE("a memfd counts as sealed only with write, grow and shrink seals", "[worker][shared]") {
  UniqueFd fd = MemfdWith("data");
  std::string error;
  CHECK_FALSE(IsSealedReadOnly(fd.get(), &error));
  REQUIRE(fcntl(fd.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) == 0);
  CHECK_FALSE(IsSealedReadOnly(fd.get(), &error));
  REQUIRE(SealReadOnly(fd.get(), &error));
  CHECK(IsSealedReadOnly(fd.get(), &error));
  CHECK(write(fd.get(), "x", 1) < 0);
  CHECK(ftruncate(fd.get(), 0) != 0);
  CHECK(mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0) == MAP_FAILED);
  CHECK(Contents(fd.get()) == "data");

  int pipe_fds[2];
  REQUIRE(pipe(pipe_fds) == 0);
  UniqueFd r(pipe_fds[0]), w(pipe_fds[1]);
  CHECK_FALSE(IsSealedReadOnly(r.get(), &error));  // not a memfd at all
}

TEST_CASE("sealing fails while a writable shared mapping exists or F_SEAL_SEAL is set", "[worker][shared]") {
  std::string error;
  UniqueFd mapped = MemfdWith(std::string(4096, 'a'));
  void* view = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, mapped.get(), 0);
  REQUIRE(view != MAP_FAILED);
  CHECK_FALSE(SealReadOnly(mapped.get(), &error));  // EBUSY: its bytes could still change
  munmap(view, 4096);
  CHECK(SealReadOnly(mapped.get(), &error));

  UniqueFd locked = MemfdWith("x");
  REQUIRE(fcntl(locked.get(), F_ADD_SEALS, F_SEAL_SEAL) == 0);
  CHECK_FALSE(SealReadOnly(locked.get(), &error));

  UniqueFd plain(memfd_create("plain", MFD_CLOEXEC));  // created without MFD_ALLOW_SEALING
  CHECK_FALSE(SealReadOnly(plain.get(), &error));
}

TEST_CASE("shared ranges read back into blobs for workers without a channel", "[worker][shared]") {
  UniqueFd fd = MemfdWith("0123456789");
  nlohmann::json shared = {{"memfds", {fd.get()}}, {"blobs", {{0, 2, 3}, {0, 0, 0}, {0, 9, 1}}}};
  std::vector<std::string> blobs = ReadSharedRanges(shared);
  REQUIRE(blobs.size() == 3);
  CHECK(blobs[0] == "234");
  CHECK(blobs[1].empty());
  CHECK(blobs[2] == "9");
  CHECK_THROWS(ReadSharedRanges({{"memfds", {fd.get()}}, {"blobs", {{1, 0, 1}}}}));
  CHECK_THROWS(ReadSharedRanges({{"memfds", {fd.get()}}, {"blobs", {{0, 8, 5}}}}));
}
