// ReadRegularFile: regular files only, a size cap, messages without the path.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include "core/bounded_file.h"
#include "support/test_support.h"

using accelopt::ReadRegularFile;

TEST_CASE("a regular file within the cap is read whole", "[core][bounded_file]") {
  accelopt::testing::TempDir dir;
  auto path = dir.Write("p.yaml", std::string("a\0b", 3));
  CHECK(ReadRegularFile(path, 3, "pipeline files") == std::string("a\0b", 3));
  CHECK(ReadRegularFile(dir.Write("empty", ""), 0, "pipeline files").empty());
}

TEST_CASE("a file over the cap is refused before it is read", "[core][bounded_file]") {
  accelopt::testing::TempDir dir;
  auto path = dir.Write("big", std::string(11, 'x'));
  CHECK_THROWS_WITH(ReadRegularFile(path, 10, "pipeline files"),
                    "file of 11 bytes exceeds the limit of 10 bytes for pipeline files");
}

TEST_CASE("devices, folders, pipes and missing files are refused", "[core][bounded_file]") {
  accelopt::testing::TempDir dir;
  CHECK_THROWS_WITH(ReadRegularFile("/dev/zero", 1 << 20, "Lua scripts"),
                    "not a regular file (a device); Lua scripts are read from regular files only");
  CHECK_THROWS_WITH(ReadRegularFile(dir.path(), 1 << 20, "pipeline files"), Catch::Contains("(a directory)"));
  auto fifo = dir.path() / "fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK_THROWS_WITH(ReadRegularFile(fifo, 1 << 20, "pipeline files"), Catch::Contains("(a pipe)"));  // without blocking
  CHECK_THROWS_WITH(ReadRegularFile(dir.path() / "missing", 1 << 20, "pipeline files"),
                    "cannot read: No such file or directory");
}
