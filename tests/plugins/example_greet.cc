// The worked example of docs/plugins.md and docs/extending.md ("Native stage"),
// built and run by the tests so that the documented code keeps working.
#include <filesystem>
#include <string>

#include "accelopt/plugin_sdk.hpp"

namespace {

constexpr const char* kGreetParams = R"JSON({
  "who": {"type": "string", "default": "world", "doc": "whom to greet"},
  "tone": {"type": "string", "default": "warm", "enum": ["warm", "dry"], "doc": "how"}
})JSON";

constexpr const char* kGreetOutputs = R"JSON({
  "greeting": {"type": "string", "doc": "the greeting"},
  "file": {"type": "string", "doc": "greeting.json in the stage directory"}
})JSON";

nlohmann::json RunGreet(accelopt::sdk::StageContext& ctx) {
  const std::string who = ctx.Param<std::string>("who");  // "world" unless set: the schema's default
  if (who.empty()) throw accelopt::sdk::StageFailure("config_error", "who must not be empty");
  const std::string greeting = (ctx.Param<std::string>("tone") == "warm" ? "hello " : "hi ") + who;
  const std::filesystem::path file = std::filesystem::path(ctx.StageDir()) / "greeting.json";
  accelopt::sdk::WriteJsonFile(file, {{"greeting", greeting}});  // atomic; io_error on failure
  ctx.Info("greeted " + who);
  return {{"greeting", greeting}, {"file", file.string()}};
}

const AccelStageDescriptor kStages[] = {
    ACCELOPT_STAGE_WITH_OUTPUTS("example_greet", "Greets somebody (the SDK's worked example).", kGreetParams,
                                kGreetOutputs, RunGreet),
};

}  // namespace

ACCELOPT_EXPORT_PLUGIN("example_greet", "1.0.0", kStages)
