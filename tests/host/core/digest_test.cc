#include <catch2/catch.hpp>

#include <filesystem>

#include "core/digest.h"
#include "support/test_support.h"

using accelopt::Sha256Hex;
using accelopt::Sha256OfFile;

TEST_CASE("SHA-256 of text and files", "[core][digest]") {
  CHECK(Sha256Hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(Sha256Hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  accelopt::testing::TempDir dir;
  auto file = dir.Write("f.txt", std::string(200000, 'a'));
  CHECK(Sha256OfFile(file) == Sha256Hex(std::string(200000, 'a')));
  CHECK_FALSE(Sha256OfFile(dir.path() / "missing").has_value());
  std::filesystem::create_symlink(file, dir.path() / "link");
  CHECK_FALSE(Sha256OfFile(dir.path() / "link").has_value());  // a symlink is not followed
}
