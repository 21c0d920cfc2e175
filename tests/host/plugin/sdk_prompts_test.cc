// accelopt/sdk/prompts.hpp: the one prompt renderer of both optimize loops (docs/prompts.md).
#include <catch2/catch.hpp>

#include "accelopt/sdk/prompts.hpp"
#include "support/test_support.h"

using accelopt::sdk::Prompts;
using nlohmann::json;

TEST_CASE("sdk Prompts: values are text, never templates; no HTML escaping", "[sdk][prompts]") {
  accelopt::testing::TempDir dir;
  dir.Write("user.mustache", "code:\n{{kernel_code}}\nspeedup {{speedup}}x\n");
  Prompts prompts(dir.path());
  // A kernel whose text holds mustache and format slots reaches the model unchanged.
  const std::string kernel = "f\"{x}\" if a < b && c > d else '{{speedup}}'";
  std::string out = prompts.Render("user", {{"kernel_code", kernel}, {"speedup", 1.5}});
  CHECK(out == "code:\n" + kernel + "\nspeedup 1.5x\n");
  CHECK_THROWS_WITH(prompts.Render("missing", json::object()), Catch::Contains("missing prompt template"));
}

TEST_CASE("sdk Prompts: every FlashInfer-Bench template renders with its values filled", "[sdk][prompts][flashinfer]") {
  Prompts prompts(accelopt::testing::SourcePath("prompts/fib"));
  const json values = {{"language", "python"}, {"language_facts", "FACTS"}, {"definition_str", "Name: d"},
                       {"kernel_code", "def run(): pass"}, {"profile", "latency: 1\n"}, {"problem_code", "Name: d"},
                       {"optimization_plan", "PLAN"}, {"slow_kernel", "SLOW"}, {"fast_kernel", "FAST"}, {"speedup", "2.0"}};
  for (const char* name : {"planner_system", "planner_user", "executor_system", "executor_user", "summarizer_system", "summarizer_user"}) {
    std::string out = prompts.Render(name, values);
    INFO(name);
    CHECK_THAT(out, !Catch::Contains("{{") && !Catch::Contains("{language"));
    CHECK(out.size() > 20);
  }
  CHECK_THAT(prompts.Render("summarizer_user", values), Catch::Contains("(2.0x faster)"));
}
