// Tests for host/src/cli/text_table: aligned terminal tables and bars.
#include <catch2/catch.hpp>

#include "cli/text_table.h"

using namespace accelopt::cli;

TEST_CASE("tables align columns, right-align numbers and count UTF-8 as one cell", "[cli]") {
  std::string table = FormatTable({"ID", "MS"}, {{"a·b", "1.5"}, {"long-name", "10"}}, {1});
  CHECK(table == "ID          MS\n"
                 "---------  ---\n"
                 "a·b        1.5\n"
                 "long-name   10\n");
}

TEST_CASE("bars are proportional, padded and empty for missing values", "[cli]") {
  CHECK(Bar(1.0, 1.0, 4) == "████");
  CHECK(Bar(0.5, 1.0, 4) == "██  ");
  CHECK(Bar(0.5625, 1.0, 2) == "█▏");
  CHECK(Bar(std::nullopt, 1.0, 4).empty());
  CHECK(Bar(2.0, 0.0, 4).empty());
  CHECK(Number(std::nullopt) == "-");
  CHECK(Number(1.23456, 3, "x") == "1.23x");
  CHECK(Duration(4.25) == "4.2s");
  CHECK(Duration(3723) == "1h02m03s");
}
