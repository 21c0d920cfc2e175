// The C++ plugin SDK in-process: typed parameters with schema defaults, the
// atomic checked WriteFile and ReadText, the shared number and parallel-for
// helpers, and host-table growth (ACCEL_HOST_API_HAS).
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <fstream>
#include <functional>
#include <mutex>
#include <set>
#include <thread>

#include "accelopt/plugin_sdk.hpp"
#include "support/test_support.h"

using accelopt::sdk::StageContext;
using accelopt::sdk::StageFailure;
using nlohmann::json;

namespace {

constexpr const char* kSchema = R"JSON({
  "seeds": {"type": "array", "default": [0, 21, 42]},
  "timing": {"type": "boolean", "default": true},
  "name": {"type": "string"},
  "count": {"type": "integer", "default": 3},
  "ratio": {"type": "number", "default": 0.5}
})JSON";

StageContext Context(const json& with, const AccelHostApi* host = nullptr) {
  return StageContext(host, {{"with", with}}, kSchema);
}

StageFailure FailureOf(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const StageFailure& failure) {
    return failure;
  }
  FAIL("expected StageFailure");
  return StageFailure("", "");
}

json Echo(StageContext& ctx) {
  return {{"seeds", ctx.Param<json>("seeds")}, {"count", ctx.Param<int>("count")}, {"name", ctx.OptionalParam<std::string>("name").value_or("-")}};
}

}  // namespace

TEST_CASE("Param reads `with`, else the schema's default, typed", "[plugin][sdk]") {
  auto ctx = Context({{"count", 7}, {"name", "silu"}, {"timing", nullptr}});
  CHECK(ctx.Param<int>("count") == 7);
  CHECK(ctx.Param<std::string>("name") == "silu");
  CHECK(ctx.Param<std::vector<int>>("seeds") == std::vector<int>{0, 21, 42});  // from the schema
  CHECK(ctx.Param<bool>("timing") == true);  // null counts as not given
  CHECK(ctx.Param<double>("ratio") == 0.5);
  CHECK(ctx.Param<double>("count") == 7.0);  // an integer is a number
  CHECK(ctx.OptionalParam<std::string>("name") == std::optional<std::string>("silu"));
  CHECK_FALSE(Context(json::object()).OptionalParam<std::string>("name"));
  CHECK(Context({{"count", 4.0}}).Param<int64_t>("count") == 4);  // a whole float is an integer
}

TEST_CASE("Param refuses missing and mistyped values with config_error", "[plugin][sdk]") {
  auto missing = FailureOf([] { Context(json::object()).Param<std::string>("name"); });
  CHECK(missing.kind == "config_error");
  CHECK(std::string(missing.what()) == "parameter `name` is required (it has no value and no default)");
  auto mistyped = FailureOf([] { Context({{"count", "three"}}).Param<int>("count"); });
  CHECK(mistyped.kind == "config_error");
  CHECK(std::string(mistyped.what()) == "parameter `count` must be an integer, got string \"three\"");
  CHECK(mistyped.details["parameter"] == "count");
  CHECK(FailureOf([] { Context({{"count", 2.5}}).Param<int>("count"); }).kind == "config_error");
  CHECK(FailureOf([] { Context({{"count", 300}}).Param<int8_t>("count"); }).kind == "config_error");
  CHECK(FailureOf([] { Context({{"count", -1}}).Param<uint32_t>("count"); }).kind == "config_error");
  CHECK(FailureOf([] { Context({{"timing", 1}}).Param<bool>("timing"); }).kind == "config_error");
  CHECK(FailureOf([] { Context({{"name", 5}}).OptionalParam<std::string>("name"); }).kind == "config_error");
  CHECK(FailureOf([] { Context({{"seeds", "x"}}).Param<std::vector<int>>("seeds"); }).kind == "config_error");
}

TEST_CASE("a stage registered with ACCELOPT_STAGE gets its schema's defaults", "[plugin][sdk]") {
  static const AccelStageDescriptor stage = ACCELOPT_STAGE("echo", "Echo.", kSchema, Echo);
  AccelHostApi host{};
  char* output = nullptr;
  char* error = nullptr;
  REQUIRE(stage.run(&host, R"({"with": {"name": "x"}})", &output, &error) == 0);
  CHECK(json::parse(output) == json{{"seeds", {0, 21, 42}}, {"count", 3}, {"name", "x"}});
  stage.free_string(output);
  REQUIRE(stage.run(&host, R"({"with": {"count": "many"}})", &output, &error) != 0);
  CHECK(json::parse(error)["kind"] == "config_error");
  stage.free_string(error);
}

TEST_CASE("WriteFile replaces a file atomically and creates its folders", "[plugin][sdk]") {
  accelopt::testing::TempDir dir;
  auto path = dir.path() / "stage" / "nested" / "profile.json";
  accelopt::sdk::WriteJsonFile(path, {{"a", 1}});
  accelopt::sdk::WriteFile(path, "replaced");
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(text == "replaced");
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0644);
  size_t entries = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(path.parent_path())) ++entries;
  CHECK(entries == 1);  // no temporary file left
}

TEST_CASE("WriteFile failures are io_error stage failures naming the path", "[plugin][sdk]") {
  accelopt::testing::TempDir dir;
  auto blocker = dir.Write("file", "x");  // a file where a folder is needed
  auto failure = FailureOf([&] { accelopt::sdk::WriteFile(blocker / "sub" / "out.txt", "y"); });
  CHECK(failure.kind == "io_error");
  CHECK_THAT(failure.what(), Catch::Contains((blocker / "sub" / "out.txt").string()));
  CHECK(failure.details["path"] == (blocker / "sub" / "out.txt").string());
  if (::geteuid() != 0) {  // root writes anywhere
    auto locked = dir.path() / "locked";
    std::filesystem::create_directory(locked);
    ::chmod(locked.c_str(), 0500);
    CHECK(FailureOf([&] { accelopt::sdk::WriteFile(locked / "out.txt", "y"); }).kind == "io_error");
    ::chmod(locked.c_str(), 0700);
  }
}

TEST_CASE("ReadText gives the whole file, bytes as they are, or an io_error naming the path", "[plugin][sdk]") {
  accelopt::testing::TempDir dir;
  const std::string bytes = std::string("line 1\r\nline 2\0tail", 20);
  auto path = dir.Write("data.bin", bytes);
  CHECK(accelopt::sdk::ReadText(path) == bytes);
  auto failure = FailureOf([&] { accelopt::sdk::ReadText(dir.path() / "missing.txt"); });
  CHECK(failure.kind == "io_error");
  CHECK_THAT(failure.what(), Catch::Contains("cannot read") && Catch::Contains("missing.txt"));
  CHECK(failure.details["path"] == (dir.path() / "missing.txt").string());
}

TEST_CASE("Number reads numeric fields only; Fixed prints fixed decimals", "[plugin][sdk]") {
  const json object = {{"a", 1.5}, {"b", 3}, {"c", "2"}, {"d", nullptr}, {"e", true}};
  CHECK(accelopt::sdk::Number(object, "a") == 1.5);
  CHECK(accelopt::sdk::Number(object, "b") == 3.0);
  CHECK_FALSE(accelopt::sdk::Number(object, "c").has_value());  // a string is not a number
  CHECK_FALSE(accelopt::sdk::Number(object, "d").has_value());
  CHECK_FALSE(accelopt::sdk::Number(object, "e").has_value());  // nor is a boolean
  CHECK_FALSE(accelopt::sdk::Number(object, "missing").has_value());
  CHECK_FALSE(accelopt::sdk::Number(json::array({1, 2}), "a").has_value());
  CHECK(accelopt::sdk::Fixed(1.23456) == "1.235");
  CHECK(accelopt::sdk::Fixed(2.0, 1) == "2.0");
}

TEST_CASE("ParallelFor calls every index exactly once on at most the threads asked for", "[plugin][sdk]") {
  for (int threads : {0, 1, 3, 64}) {
    for (size_t n : {size_t{0}, size_t{1}, size_t{2}, size_t{100}}) {
      std::vector<std::atomic<int>> calls(n);
      std::mutex mutex;
      std::set<std::thread::id> ids;
      accelopt::sdk::ParallelFor(n, threads, [&](size_t i) {
        calls[i].fetch_add(1);
        std::lock_guard<std::mutex> lock(mutex);
        ids.insert(std::this_thread::get_id());
      });
      for (size_t i = 0; i < n; ++i) CHECK(calls[i].load() == 1);
      CHECK(ids.size() <= static_cast<size_t>(std::max(1, threads)));
      if (n > 0 && (threads <= 1 || n == 1)) CHECK(ids == std::set<std::thread::id>{std::this_thread::get_id()});  // no thread started
    }
  }
}

TEST_CASE("ListParam takes a list, null, or a stage's outputs holding the list", "[plugin][sdk]") {
  const json list = json::array({1, 2});
  CHECK(accelopt::sdk::ListParam(list, "records") == list);
  CHECK(accelopt::sdk::ListParam(json{{"records", list}, {"other", 3}}, "records") == list);
  CHECK(accelopt::sdk::ListParam(nullptr, "records") == json::array());
  CHECK(accelopt::sdk::ListParam(json{{"records", "not a list"}}, "records") == json::array());
  CHECK(accelopt::sdk::ListParam(json{{"beam", list}}, "records") == json::array());
}

TEST_CASE("ValidatedForResult refuses a screened record only", "[plugin][sdk]") {
  CHECK(accelopt::sdk::ValidatedForResult(json{{"latency_ms", 1.0}}));
  CHECK(accelopt::sdk::ValidatedForResult(json{{"validation", "full"}}));
  CHECK(accelopt::sdk::ValidatedForResult(json{{"validation", "confirmed"}}));
  CHECK(accelopt::sdk::ValidatedForResult(json{{"validation", nullptr}}));
  CHECK_FALSE(accelopt::sdk::ValidatedForResult(json{{"validation", "screened"}}));
}

TEST_CASE("ACCEL_HOST_API_HAS follows the host's table size and version", "[plugin][sdk][abi]") {
  AccelHostApi host{};
  host.python_call_args = [](void*, const char*, const char*, const char*, const char*, char**) -> char* { return nullptr; };
  host.api_version = 3;
  host.struct_size = sizeof(AccelHostApi);
  CHECK(ACCEL_HOST_API_HAS(&host, python_call_args));
  CHECK(ACCEL_HOST_API_HAS(&host, log) == false);  // inside the table but not set
  host.struct_size = offsetof(AccelHostApi, python_call_args);  // an older, smaller table
  CHECK_FALSE(ACCEL_HOST_API_HAS(&host, python_call_args));
  auto failure = FailureOf([&] { StageContext(&host, {{"with", json::object()}}).PythonCallArgs("m", "f", json::array()); });
  CHECK(failure.kind == "python_error");
  host.api_version = 2;  // before struct_size: the version's fixed layout decides
  host.struct_size = 0;
  CHECK(ACCEL_HOST_API_HAS(&host, python_call_args));
  host.api_version = 1;
  CHECK_FALSE(ACCEL_HOST_API_HAS(&host, python_call_args));
}
