// Frames over a pipe (host/src/worker/protocol.h): JSON header + raw blobs.
#include <fcntl.h>
#include <unistd.h>

#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "worker/protocol.h"

using accelopt::worker::BlobSizes;
using accelopt::worker::LineReader;
using accelopt::worker::WriteFrame;
using nlohmann::json;

TEST_CASE("a frame carries a JSON header and raw blobs larger than the pipe", "[worker][protocol]") {
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  std::string big(3 << 20, '\0');  // 3 MiB with every byte value, newlines included
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 131 % 256);
  std::vector<std::string> blobs = {"", big, std::string("\n\n{x}\n")};
  std::thread writer([&] {
    CHECK(WriteFrame(fds[1], {{"id", 7}}, blobs));
    CHECK(WriteFrame(fds[1], {{"id", 8}, {"blobs", {99}}}, std::vector<std::string>{}));  // a stale list is dropped
    close(fds[1]);
  });
  LineReader reader(fds[0]);
  std::string line;
  REQUIRE(reader.ReadLine(&line, 5000) == LineReader::kLine);
  json header = json::parse(line);
  CHECK(header["id"] == 7);
  auto sizes = BlobSizes(header, 1ull << 30);
  REQUIRE(sizes == std::vector<uint64_t>{0, big.size(), 6});
  for (size_t i = 0; i < sizes.size(); ++i) {
    std::string bytes;
    REQUIRE(reader.ReadExact(&bytes, sizes[i], 5000) == LineReader::kLine);
    CHECK(bytes == blobs[i]);
  }
  REQUIRE(reader.ReadLine(&line, 5000) == LineReader::kLine);
  CHECK(json::parse(line) == json{{"id", 8}});
  std::string rest;
  CHECK(reader.ReadExact(&rest, 1, 5000) == LineReader::kEof);
  writer.join();
  close(fds[0]);
}

TEST_CASE("blob lists that are malformed or too large are refused", "[worker][protocol]") {
  CHECK(BlobSizes(json{{"id", 1}}, 10).empty());
  CHECK_THROWS_AS(BlobSizes(json{{"blobs", {-1}}}, 10), std::invalid_argument);
  CHECK_THROWS_AS(BlobSizes(json{{"blobs", "12"}}, 10), std::invalid_argument);
  CHECK_THROWS_AS(BlobSizes(json{{"blobs", {6, 6}}}, 10), std::invalid_argument);
  CHECK(BlobSizes(json{{"blobs", {4, 6}}}, 10) == std::vector<uint64_t>{4, 6});
}

TEST_CASE("reading a blob times out when the writer stalls", "[worker][protocol]") {
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  REQUIRE(write(fds[1], "abc", 3) == 3);
  LineReader reader(fds[0]);
  std::string bytes;
  CHECK(reader.ReadExact(&bytes, 10, 50) == LineReader::kTimeout);
  close(fds[1]);
  close(fds[0]);
}

TEST_CASE("over-long lines are cut before they are buffered and the rest is counted", "[worker][protocol]") {
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  std::thread writer([&] {
    std::string flood(8 << 20, 'x');  // 8 MiB without a newline, then more lines
    std::string text = "short\n" + flood + "\nafter\n" + std::string(100, 'y') + "tail\n";
    size_t done = 0;
    while (done < text.size()) {
      ssize_t n = write(fds[1], text.data() + done, text.size() - done);
      if (n <= 0) break;
      done += static_cast<size_t>(n);
    }
    close(fds[1]);
  });
  LineReader reader(fds[0]);
  reader.set_max_line(1000);
  std::string line;
  REQUIRE(reader.ReadLine(&line, 5000) == LineReader::kLine);
  CHECK(line == "short");
  REQUIRE(reader.ReadLine(&line, 5000) == LineReader::kLine);
  CHECK(line == std::string(1000, 'x'));
  REQUIRE(reader.ReadLine(&line, 5000) == LineReader::kLine);
  CHECK(line == "after");
  CHECK(reader.discarded() == (8u << 20) - 1000);
  REQUIRE(reader.ReadLine(&line, 5000) == LineReader::kLine);
  CHECK(line == std::string(100, 'y') + "tail");
  CHECK(reader.ReadLine(&line, 5000) == LineReader::kEof);
  writer.join();
  close(fds[0]);
}
