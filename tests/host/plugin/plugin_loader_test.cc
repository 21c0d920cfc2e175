#include <catch2/catch.hpp>

#include "core/errors.h"
#include "plugin/plugin_loader.h"
#include "plugin/registry.h"

using namespace accelopt;

static std::filesystem::path TestPlugin(const std::string& name) {
  return std::filesystem::path(ACCELOPT_TEST_PLUGIN_DIR) / (name + ".so");
}

TEST_CASE("a plugin is loaded and its stages run through the C ABI", "[plugin]") {
  LoadedPlugin plugin = LoadPlugin(TestPlugin("fake_stages"));
  CHECK(plugin.name == "fake_stages");
  REQUIRE(plugin.stages.size() == 7);
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
    CHECK_THAT(message, Catch::Contains("this host speaks version 1"));
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
  CHECK(warnings.size() == 2);                        // wrong API version + no entry point
}
