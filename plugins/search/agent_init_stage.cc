// native:agent_init - the reflexion agent loop's state: per problem the
// current and the best kernel (the baseline), counters, the attempt history
// and the lessons (optionally continued from lessons.json of an earlier run).
#include "agent_stages.h"

namespace accelopt_search {

json AgentBeam(const json& state) {
  json beam = json::array();
  for (const auto& [case_name, c] : state["cases"].items()) {
    if (!c.value("done", false)) beam.push_back(c["current"]);
  }
  return beam;
}

json AgentBest(const json& state) {
  json best = json::object();
  for (const auto& [case_name, c] : state["cases"].items()) best[case_name] = c["best"];
  return best;
}

json RunAgentInit(StageContext& ctx) {
  const json& with = ctx.With();
  const json beam = ListParam(with.value("beam", json()), "beam");
  json earlier = json::object();
  const std::string path = with.value("lessons", std::string());
  if (!path.empty()) {
    json loaded = json::parse(ReadText(path), nullptr, false);
    if (!loaded.is_object() || !loaded.contains("cases")) {
      throw StageFailure("config_error", "lessons file " + path + " is not a lessons.json of an earlier agent run");
    }
    earlier = loaded["cases"];
  }
  json state = {{"cases", json::object()}, {"done", false}};
  for (const auto& member : beam) {
    const std::string case_name = member.value("case_name", "");
    const auto latency = Number(member, "latency_ms");
    if (case_name.empty() || !latency) continue;
    json lessons = earlier.contains(case_name) && earlier[case_name].is_array() ? earlier[case_name] : json::array();
    state["cases"][case_name] = {{"current", member}, {"best", member}, {"best_latency_ms", *latency}, {"evaluations", 0},
                                 {"rounds", 0}, {"no_improve", 0}, {"done", false}, {"lessons", lessons},
                                 {"tried", json::array()}, {"picked", nullptr}, {"experiments", json::array()}};
  }
  state["done"] = state["cases"].empty();
  WriteAgentFiles(ctx.RunDir(), state);
  ctx.Info("agent loop over " + std::to_string(state["cases"].size()) + " problem(s)" +
           (earlier.empty() ? "" : ", lessons of an earlier run loaded"));
  return {{"state", state}, {"beam", AgentBeam(state)}, {"best", AgentBest(state)}};
}

}  // namespace accelopt_search
