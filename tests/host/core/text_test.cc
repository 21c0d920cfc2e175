// The host's one duration parser and did-you-mean.
#include <catch2/catch.hpp>

#include "core/text.h"
#include "support/test_support.h"

using accelopt::ParseDuration;
using std::chrono::milliseconds;

TEST_CASE("durations: units, compound groups and plain seconds", "[core][duration]") {
  CHECK(ParseDuration("500ms") == milliseconds(500));
  CHECK(ParseDuration("30s") == milliseconds(30000));
  CHECK(ParseDuration("5m") == milliseconds(300000));
  CHECK(ParseDuration("2min") == milliseconds(120000));
  CHECK(ParseDuration("1h") == milliseconds(3600000));
  CHECK(ParseDuration("1m30s") == milliseconds(90000));
  CHECK(ParseDuration("1h 5m") == milliseconds(3900000));
  CHECK(ParseDuration("0.3s") == milliseconds(300));
  CHECK(ParseDuration("30") == milliseconds(30000));
  CHECK(ParseDuration("1.5") == milliseconds(1500));
}

TEST_CASE("durations: bad texts say why", "[core][duration]") {
  std::string why;
  CHECK_FALSE(ParseDuration("abc", &why));
  CHECK(why == "expected a number");
  CHECK_FALSE(ParseDuration("5 parsecs", &why));
  CHECK(why == "unknown unit 'parsecs'");
  CHECK_FALSE(ParseDuration("1m30", &why));
  CHECK(why == "missing unit");
  CHECK_FALSE(ParseDuration("-5s", &why));
  CHECK(why == "must not be negative");
  CHECK_FALSE(ParseDuration("", &why));
  CHECK(why == "empty");
}

TEST_CASE("edit distance and did-you-mean suggest only likely typos", "[core][text]") {
  using accelopt::DidYouMean;
  using accelopt::DidYouMeanSuffix;
  using accelopt::EditDistance;
  CHECK(EditDistance("", "") == 0);
  CHECK(EditDistance("kitten", "sitting") == 3);
  CHECK(EditDistance("abc", "") == 3);
  const std::vector<std::string> keys = {"with", "uses", "timeout", "retry"};
  CHECK(DidYouMean("wiht", keys) == std::optional<std::string>("with"));
  CHECK(DidYouMean("timout", keys) == std::optional<std::string>("timeout"));
  CHECK_FALSE(DidYouMean("completely_different", keys));
  CHECK(DidYouMeanSuffix("retyr", keys) == " (did you mean 'retry'?)");
  CHECK(DidYouMeanSuffix("zzzzzzzz", keys).empty());
}

TEST_CASE("WriteFileAtomic creates folders and replaces the whole file, ReadFile reads it back", "[core][text]") {
  accelopt::testing::TempDir dir;
  auto path = dir.path() / "a" / "b" / "out.txt";
  accelopt::WriteFileAtomic(path, "first version, longer");
  accelopt::WriteFileAtomic(path, "second");
  CHECK(accelopt::ReadFile(path) == "second");
  size_t files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(path.parent_path())) files += entry.is_regular_file();
  CHECK(files == 1);  // no temporary file left behind
  CHECK_THROWS_WITH(accelopt::ReadFile(dir.path() / "missing"), Catch::Contains("cannot read"));
}
