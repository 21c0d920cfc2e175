// The host's error types: locations, diagnostics, ConfigError, StageError.
#include <catch2/catch.hpp>

#include "core/errors.h"

using namespace accelopt;

TEST_CASE("source locations omit the parts they do not know", "[core][errors]") {
  CHECK(SourceLocation{"p.yaml", 3, 7}.ToString() == "p.yaml:3:7");
  CHECK(SourceLocation{"p.yaml", 3, 0}.ToString() == "p.yaml:3");
  CHECK(SourceLocation{"p.yaml", 0, 7}.ToString() == "p.yaml");  // a column without a line means nothing
  CHECK(SourceLocation{}.ToString() == "<input>");
  CHECK(Diagnostic{{"p.yaml", 2, 1}, "bad key"}.ToString() == "p.yaml:2:1: error: bad key");
}

TEST_CASE("a ConfigError keeps every diagnostic and prints one per line", "[core][errors]") {
  ConfigError error({{{"a.yaml", 1, 2}, "first"}, {{"b.yaml", 3, 0}, "second"}});
  REQUIRE(error.diagnostics().size() == 2);
  CHECK(error.diagnostics()[1].message == "second");
  CHECK(std::string(error.what()) == "a.yaml:1:2: error: first\nb.yaml:3: error: second");
  ConfigError single({"c.yaml", 5, 0}, "only");
  CHECK(std::string(single.what()) == "c.yaml:5: error: only");
}

TEST_CASE("a StageError carries its kind and details into JSON", "[core][errors]") {
  StageError error("timeout", "took too long", {{"limit_s", 10}});
  CHECK(error.kind() == "timeout");
  CHECK(error.details()["limit_s"] == 10);
  CHECK(error.ToJson() == nlohmann::json{{"kind", "timeout"}, {"message", "took too long"}, {"details", {{"limit_s", 10}}}});
  CHECK(StageError("script_error", "x").ToJson()["details"].is_null());
}
