#include <catch2/catch.hpp>

#include "accelopt/plugin_api.h"
#include "core/errors.h"
#include "support/test_support.h"
#include "plugin/plugin_loader.h"
#include "plugin/registry.h"

using namespace accelopt;
using accelopt::testing::ReadJson;

static std::filesystem::path TestPlugin(const std::string& name) {
  return std::filesystem::path(ACCELOPT_TEST_PLUGIN_DIR) / (name + ".so");
}

TEST_CASE("a plugin is loaded and its stages run through the C ABI", "[plugin]") {
  LoadedPlugin plugin = LoadPlugin(TestPlugin("fake_stages"));
  CHECK(plugin.name == "fake_stages");
  REQUIRE(plugin.stages.size() == 10);
  auto add = plugin.stages[3];
  CHECK(add->Uses() == "native:test_add");
  CHECK(add->Params()["a"]["required"] == true);
  StageInvocation invocation;
  invocation.with = {{"a", 2}, {"b", 40}};
  CHECK(add->Run(invocation)["sum"] == 42);
}

TEST_CASE("a stage failure crosses the ABI as a StageError with its kind", "[plugin]") {
  LoadedPlugin plugin = LoadPlugin(TestPlugin("fake_stages"));
  StageInvocation invocation;
  invocation.with = {{"fail", true}, {"kind", "compile_error"}};
  try {
    plugin.stages[4]->Run(invocation);
    FAIL("expected StageError");
  } catch (const StageError& error) {
    CHECK(error.kind() == "compile_error");
    CHECK(std::string(error.what()) == "asked to fail");
  }
}

TEST_CASE("a plugin built for another API version is refused with a clear message", "[plugin]") {
  try {
    LoadPlugin(TestPlugin("wrong_api_version"));
    FAIL("expected ConfigError");
  } catch (const ConfigError& error) {
    std::string message = error.what();
    CHECK_THAT(message, Catch::Contains("wrong_api_version.so"));
    CHECK_THAT(message, Catch::Contains("built for plugin API version 42"));
    CHECK_THAT(message, Catch::Contains("this host speaks versions 1 to " + std::to_string(ACCELOPT_PLUGIN_API_VERSION)));
  }
}

TEST_CASE("a library without the entry point is not a plugin", "[plugin]") {
  CHECK_THROWS_WITH(LoadPlugin(TestPlugin("no_entry_point")), Catch::Contains("missing symbol accelopt_plugin_info"));
  CHECK_THROWS_WITH(LoadPlugin(TestPlugin("does_not_exist")), Catch::Contains("cannot load plugin"));
}

TEST_CASE("plugins on ACCELOPT_PLUGIN_PATH are found, broken ones are skipped with a warning", "[plugin]") {
  ::setenv("ACCELOPT_PLUGIN_PATH", ACCELOPT_TEST_PLUGIN_DIR, 1);
  StageRegistry registry;
  std::vector<std::string> warnings;
  registry.LoadPlugins(&warnings);
  ::unsetenv("ACCELOPT_PLUGIN_PATH");
  CHECK(registry.FindNative("test_echo") != nullptr);
  CHECK(registry.FindNative("profile") != nullptr);  // built-in plugin folder
  CHECK(registry.FindNative("test_grown_first") != nullptr);  // a grown stage descriptor
  CHECK(warnings.size() == 3);  // wrong API version, no entry point, a stage_size too small
}

TEST_CASE("a stage name registered twice refuses the second plugin, naming both files", "[plugin]") {
  accelopt::testing::TempDir dir;
  auto copy = dir.path() / "fake_stages_copy.so";
  std::filesystem::copy_file(TestPlugin("fake_stages"), copy);
  StageRegistry registry;
  registry.LoadPluginFile(TestPlugin("fake_stages"));
  try {
    registry.LoadPluginFile(copy);
    FAIL("expected ConfigError");
  } catch (const ConfigError& error) {
    std::string message = error.what();
    CHECK_THAT(message, Catch::Contains(copy.string() + ": error: stage 'native:test_echo' of this plugin is already registered by " +
                                        TestPlugin("fake_stages").string()));
  }
  CHECK(registry.FindNative("test_echo")->Origin() == TestPlugin("fake_stages").string());
  CHECK(registry.plugins().size() == 1);
}

TEST_CASE("a plugin of API version 1 still loads; its stages declare no outputs", "[plugin]") {
  LoadedPlugin plugin = LoadPlugin(TestPlugin("v1_plugin"));
  REQUIRE(plugin.stages.size() == 2);
  CHECK(plugin.stages[1]->Uses() == "native:test_v1_second");
  CHECK(plugin.stages[0]->Params()["x"]["type"] == "integer");
  CHECK(plugin.stages[0]->Outputs() == nlohmann::json::object());
  CHECK(plugin.stages[1]->Run(StageInvocation{})["old"] == true);
}

TEST_CASE("declared outputs and enums cross the ABI", "[plugin]") {
  LoadedPlugin plugin = LoadPlugin(TestPlugin("fake_stages"));
  CHECK(plugin.stages[3]->Outputs()["sum"]["type"] == "integer");
  CHECK(plugin.stages[8]->Params()["mode"]["enum"] == nlohmann::json::array({"fast", "slow"}));
}

TEST_CASE("the SDK's error path survives a message that is not UTF-8", "[plugin]") {
  LoadedPlugin plugin = LoadPlugin(TestPlugin("fake_stages"));
  REQUIRE(plugin.stages[7]->Uses() == "native:test_bad_utf8");
  try {
    plugin.stages[7]->Run(StageInvocation{});
    FAIL("expected StageError");
  } catch (const StageError& error) {
    CHECK(error.kind() == "boom");
    CHECK(std::string(error.what()) == "bad byte \xEF\xBF\xBD here");  // U+FFFD
    CHECK(error.details()["raw"] == "\xEF\xBF\xBD");
  }
}

TEST_CASE("plugins call Python with positional and keyword arguments", "[plugin][python]") {
  LoadedPlugin plugin = LoadPlugin(TestPlugin("fake_stages"));
  REQUIRE(plugin.stages[9]->Uses() == "native:test_python_args");
  StageInvocation invocation;
  invocation.with = {{"module", "json"}, {"function", "dumps"}, {"args", {{{"b", 1}, {"a", 2}}}},
                     {"kwargs", {{"sort_keys", true}}}};
  CHECK(plugin.stages[9]->Run(invocation)["result"] == "{\"a\": 2, \"b\": 1}");
  invocation.with = {{"module", "json"}, {"function", "loads"}, {"args", {"not json"}}};
  CHECK_THROWS_WITH(plugin.stages[9]->Run(invocation), Catch::Contains("JSONDecodeError"));
}

TEST_CASE("a plugin whose stage descriptor grew loads by its stage_size and the host lends its table size", "[plugin][abi]") {
  LoadedPlugin plugin = LoadPlugin(TestPlugin("grown_abi_plugin"));
  REQUIRE(plugin.stages.size() == 2);
  CHECK(plugin.stages[0]->Uses() == "native:test_grown_first");
  CHECK(plugin.stages[1]->Uses() == "native:test_grown_second");  // read at the plugin's stride, not the host's
  CHECK(plugin.stages[0]->Outputs().contains("struct_size"));
  CHECK(plugin.stages[1]->Params()["x"]["type"] == "integer");
  StageInvocation invocation;
  auto out = plugin.stages[1]->Run(invocation);
  CHECK(out["struct_size"] == sizeof(AccelHostApi));
  CHECK(out["has_python_call_args"] == true);
}

TEST_CASE("a stage_size smaller than any stage descriptor is refused", "[plugin][abi]") {
  CHECK_THROWS_WITH(LoadPlugin(TestPlugin("short_stage_size")),
                    Catch::Contains("declares stage_size 8, smaller than the smallest stage descriptor"));
}

TEST_CASE("the documented example plugin runs: schema defaults, enum, atomic file", "[plugin][sdk]") {
  LoadedPlugin plugin = LoadPlugin(TestPlugin("example_greet"));
  REQUIRE(plugin.stages.size() == 1);
  accelopt::testing::TempDir dir;
  StageInvocation invocation;
  invocation.stage_dir = dir.path();
  auto out = plugin.stages[0]->Run(invocation);  // no `with`: both defaults come from the schema
  CHECK(out["greeting"] == "hello world");
  CHECK(ReadJson(dir.path() / "greeting.json")["greeting"] == "hello world");
  invocation.with = {{"who", "Ada"}, {"tone", "dry"}};
  CHECK(plugin.stages[0]->Run(invocation)["greeting"] == "hi Ada");
  invocation.with = {{"who", ""}};
  CHECK_THROWS_WITH(plugin.stages[0]->Run(invocation), "who must not be empty");
}
