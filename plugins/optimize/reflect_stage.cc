// native:reflect - the agent loop's reflexion step in LLM mode (docs/search.md,
// "Reflexion"): after an attempt that failed or came out slower than the best,
// the model is asked (prompts reflect_system / reflect_user) for the lesson in
// one or two sentences. native:agent_step stores it in lessons.json in place of
// its template lesson; without an LLM, or when the call fails or the reply holds
// no usable sentence, there is no reflection and the template lesson stays.
#include <cctype>
#include <regex>

#include "prompt_data.h"
#include "stages.h"

namespace fs = std::filesystem;

namespace accelopt_optimize {
namespace {

constexpr size_t kMaxLessonChars = 400;

// The attempt's own text: the picked plan without the context native:agent_pick appended.
std::string AttemptText(const json& plan) {
  std::string text = plan.value("attempt_text", plan.value("text", ""));
  return text.size() > 1500 ? text.substr(0, 1500) + "\n[...]" : text;
}

std::string FirstLines(const std::string& text, int max_lines) {
  std::string out;
  int lines = 0;
  for (size_t start = 0; start < text.size() && lines < max_lines; ++lines) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    out += text.substr(start, end - start) + "\n";
    start = end + 1;
  }
  return out;
}

}  // namespace

std::string ReflectionLesson(const std::string& reply) {
  // Prose outside code blocks, label and emphasis removed, whitespace collapsed.
  std::string prose;
  bool in_code = false;
  for (size_t start = 0; start <= reply.size();) {
    size_t end = reply.find('\n', start);
    if (end == std::string::npos) end = reply.size();
    std::string line = reply.substr(start, end - start);
    start = end + 1;
    const size_t first = line.find_first_not_of(" \t");
    if (first != std::string::npos && (line.compare(first, 3, "```") == 0 || line.compare(first, 3, "~~~") == 0)) {
      in_code = !in_code;
      continue;
    }
    if (!in_code) prose += line + " ";
    if (end == reply.size()) break;
  }
  prose = std::regex_replace(prose, std::regex(R"(\*\*|__|`|^#+\s*)"), "");
  prose = std::regex_replace(prose, std::regex(R"(\s+)"), " ");
  prose = std::regex_replace(prose, std::regex(R"(^\s*(lesson|reflection)\s*:\s*)", std::regex::icase), "");
  while (!prose.empty() && (prose.back() == ' ')) prose.pop_back();
  while (!prose.empty() && (prose.front() == ' ' || prose.front() == '-')) prose.erase(prose.begin());
  // At most two sentences and kMaxLessonChars characters.
  size_t cut = std::string::npos;
  int sentences = 0;
  for (size_t i = 0; i < prose.size(); ++i) {
    if ((prose[i] == '.' || prose[i] == '!' || prose[i] == '?') && (i + 1 == prose.size() || prose[i + 1] == ' ')) {
      if (++sentences == 2) {
        cut = i + 1;
        break;
      }
    }
  }
  if (cut != std::string::npos) prose = prose.substr(0, cut);
  if (prose.size() > kMaxLessonChars) prose = prose.substr(0, kMaxLessonChars - 3) + "...";
  // A usable lesson has words: at least a few letters.
  int letters = 0;
  for (char ch : prose) letters += std::isalpha(static_cast<unsigned char>(ch)) ? 1 : 0;
  return letters >= 8 ? prose : "";
}

json RunReflect(StageContext& ctx) {
  const json& with = ctx.With();
  const json plans = ListParam(with.value("plans", json()), "plans");
  const json records = ListParam(with.value("records", json()), "records");
  const json failures = ListParam(with.value("failures", json()), "failures");
  const json best = with.value("best", json::object());
  const std::string endpoint = with.value("llm", "default");
  json reflections = json::object();
  json skipped = json::object();
  if (plans.empty()) return {{"reflections", reflections}, {"skipped", skipped}, {"usage", json::object()}};

  std::map<std::string, json> by_case;
  for (const auto& f : failures) by_case[f.value("case_name", "")] = f;
  for (const auto& r : records) by_case[r.value("case_name", "")] = r;  // a profiled record wins

  // The attempts that failed or came out slower than the best before this round.
  struct Attempt {
    std::string case_name;
    json data;
  };
  std::vector<Attempt> attempts;
  for (const auto& plan : plans) {
    const json parent = plan.value("candidate", json::object());
    const std::string case_name = parent.value("case_name", "");
    if (!by_case.count(case_name)) continue;
    const json& record = by_case[case_name];
    const json error = record.value("error", json::object());
    const std::string kind = error.is_object() ? error.value("kind", "") : "";
    const auto latency = Number(record, "latency_ms");
    const bool ok = record.value("status", "") == "ok" && latency && *latency > 0;
    const auto parent_ms = Number(parent, "latency_ms");
    const auto best_ms = best.contains(case_name) && best[case_name].is_object() ? Number(best[case_name], "latency_ms") : parent_ms;
    std::string outcome, error_text;
    if (!ok) {
      if (kind == "no_code_block" || kind == "unchanged" || kind == "repeat") continue;  // nothing new was tried
      outcome = "it failed (" + (kind.empty() ? std::string("error") : kind) + ")";
      error_text = error.is_object() ? error.value("message", "") : "";
      if (error_text.size() > 800) error_text = error_text.substr(0, 800) + " [...]";
    } else if (best_ms && *latency > *best_ms) {
      outcome = "it computed correct results but ran in " + Significant(*latency) + " ms, slower than the best kernel so far (" +
                Significant(*best_ms) + " ms, " + Fixed((*latency - *best_ms) / *best_ms * 100.0, 1) + " % slower)" +
                (parent_ms ? "; the kernel it started from ran in " + Significant(*parent_ms) + " ms" : "");
    } else {
      continue;  // an improvement: the template lesson says so
    }
    json data = {{"problem", record.value("problem", parent.value("problem", ""))},
                 {"case_name", case_name},
                 {"round", with.value("iteration", int64_t{0})},
                 {"plan", AttemptText(plan)},
                 {"outcome", outcome},
                 {"error", error_text}};
    const std::string diff = record.value("diff", std::string());
    if (!diff.empty()) data["diff"] = FirstLines(diff, 60);
    attempts.push_back({case_name, data});
  }
  if (attempts.empty() || !UseLlm(ctx, with.value("mode", "auto"), endpoint)) {
    for (const auto& a : attempts) skipped[a.case_name] = "no LLM: the template lesson is kept";
    return {{"reflections", reflections}, {"skipped", skipped}, {"usage", json::object()}};
  }

  Prompts prompts(with.value("prompts", ""), with.value("target", ""));
  const std::string system = prompts.Render("reflect_system", json::object());
  LlmCaller caller(ctx, endpoint, with);
  std::vector<json> results(attempts.size());
  const fs::path dir = ctx.StageDir();
  ParallelFor(attempts.size(), with.value("max_concurrency", 8), [&](size_t i) {
    const Attempt& a = attempts[i];
    try {
      json response = caller.Chat(a.case_name, system, prompts.Render("reflect_user", a.data), std::nullopt);
      const std::string reply = response.value("content", "");
      WriteText(dir / "replies" / (SafeName(a.case_name) + ".md"), reply);
      const std::string lesson = ReflectionLesson(reply);
      results[i] = lesson.empty() ? json{{"skipped", "the reply held no usable sentence: the template lesson is kept"}}
                                  : json{{"lesson", lesson}, {"source", "model"}};
    } catch (const std::exception& error) {
      results[i] = {{"skipped", std::string("the reflect call failed (") + error.what() + "): the template lesson is kept"}};
    }
  });
  for (size_t i = 0; i < attempts.size(); ++i) {
    if (results[i].contains("lesson")) {
      reflections[attempts[i].case_name] = results[i];
    } else {
      skipped[attempts[i].case_name] = results[i]["skipped"];
      ctx.Warn(attempts[i].case_name + ": " + results[i]["skipped"].get<std::string>());
    }
  }
  caller.Save(ctx, "reflect");
  ctx.Info(std::to_string(reflections.size()) + " lesson(s) written by the model" +
           (skipped.empty() ? "" : ", " + std::to_string(skipped.size()) + " left to the template"));
  return {{"reflections", reflections}, {"skipped", skipped}, {"usage", caller.UsageJson()}};
}

}  // namespace accelopt_optimize
