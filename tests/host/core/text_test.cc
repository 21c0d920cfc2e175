// The host's one duration parser and did-you-mean.
#include <catch2/catch.hpp>

#include "core/text.h"

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
