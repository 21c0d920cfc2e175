// The run journal: header, durable appends, torn lines, versions, output hashes.
#include <catch2/catch.hpp>

#include <fstream>

#include "core/journal.h"
#include "support/test_support.h"

using namespace accelopt;
using nlohmann::json;

TEST_CASE("a new journal starts with its version header and events get a timestamp", "[core][journal]") {
  testing::TempDir dir;
  auto path = dir.path() / "journal.jsonl";
  {
    Journal journal(path);
    journal.Append({{"event", "run_started"}});
  }
  std::ifstream in(path);
  std::string header, event;
  std::getline(in, header);
  std::getline(in, event);
  CHECK(json::parse(header) == json{{"journal", "accelopt"}, {"version", Journal::kVersion}});
  CHECK(json::parse(event)["event"] == "run_started");
  CHECK(json::parse(event)["ts"].is_string());
  auto events = Journal::Read(path);
  REQUIRE(events.size() == 1);
  CHECK(events[0]["event"] == "run_started");
}

TEST_CASE("reopening a journal appends and a torn last line is skipped", "[core][journal]") {
  testing::TempDir dir;
  auto path = dir.path() / "journal.jsonl";
  Journal(path).Append({{"event", "a"}});
  Journal(path).Append({{"event", "b"}});
  std::ofstream(path, std::ios::app) << "{\"event\": \"tor";  // a crash in the middle of a write
  auto events = Journal::Read(path);
  REQUIRE(events.size() == 2);
  CHECK(events[0]["event"] == "a");
  CHECK(events[1]["event"] == "b");
}

TEST_CASE("journals of other versions or formats are refused", "[core][journal]") {
  testing::TempDir dir;
  auto future = dir.Write("future.jsonl", "{\"journal\": \"accelopt\", \"version\": 99}\n");
  CHECK_THROWS_WITH(Journal::Read(future), Catch::Contains("journal version 99 is not supported"));
  CHECK_THROWS_WITH(Journal{future}, Catch::Contains("journal version 99 is not supported"));
  auto other = dir.Write("other.jsonl", "{\"hello\": 1}\n");
  CHECK_THROWS_WITH(Journal::Read(other), Catch::Contains("not an accelopt journal"));
  auto empty = dir.Write("empty.jsonl", "");
  CHECK_THROWS_WITH(Journal::Read(empty), Catch::Contains("empty journal"));
  CHECK_THROWS_WITH(Journal::Read(dir.path() / "missing.jsonl"), Catch::Contains("cannot read"));
}

TEST_CASE("OutputHashes keeps the latest hash journaled per directory", "[core][journal]") {
  std::vector<json> events = {
      {{"event", "stage_finished"}, {"dir", "stages/01-a"}, {"outputs_sha256", "old"}},
      {{"event", "item_finished"}, {"dir", "stages/02-b/item-0000"}, {"outputs_sha256", "x"}},
      {{"event", "stage_finished"}, {"dir", "stages/01-a"}, {"outputs_sha256", "new"}},
      {{"event", "stage_finished"}, {"dir", "stages/03-c"}},  // no outputs written
  };
  auto hashes = Journal::OutputHashes(events);
  CHECK(hashes.size() == 2);
  CHECK(hashes["stages/01-a"] == "new");
  CHECK(hashes["stages/02-b/item-0000"] == "x");
}
