// native:memory - the optimization memory. Policy (docs/optimize.md):
//   * items are experience items from native:summarize, oldest first;
//   * a new item replaces any older duplicate (same normalized title and
//     normalized after-snippet, or the same candidate id) - newest kept;
//   * capacity ExpN per case (scope "problem") or overall (scope "shared");
//     the oldest items are evicted first (FIFO);
//   * saved every call to <stage_dir>/memory.json and <run_dir>/memory.json;
//   * `load: FILE` starts from a saved memory.json (or a bare list of items).
#include <algorithm>
#include <filesystem>

#include "stages.h"

namespace fs = std::filesystem;

namespace accelopt_optimize {
namespace {

std::string Lower(std::string text) {
  for (auto& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

std::string DuplicateKey(const json& item) {
  return HashHex(NormalizeSource(Lower(item.value("title", ""))) + "|" + NormalizeSource(item.value("after", "")));
}

json LoadMemoryFile(const std::string& path) {
  json loaded = json::parse(ReadText(path), nullptr, false);
  if (loaded.is_discarded()) throw StageFailure("config_error", "memory file " + path + " is not valid JSON");
  if (loaded.is_array()) return {{"items", loaded}};
  if (!loaded.is_object() || !loaded.contains("items") || !loaded["items"].is_array()) {
    throw StageFailure("config_error", "memory file " + path + " must be a memory.json object with an `items` list, or a list of items");
  }
  return loaded;
}

}  // namespace

json RunMemory(StageContext& ctx) {
  const json& with = ctx.With();
  const int capacity = std::max<int>(0, with.value("capacity", 16));
  const std::string scope = with.value("scope", "problem");
  if (scope != "problem" && scope != "shared") throw StageFailure("config_error", "scope must be problem or shared, got '" + scope + "'");
  json memory = with.value("memory", json());
  const std::string load = with.value("load", "");
  if (!memory.is_object() && !load.empty()) {
    memory = LoadMemoryFile(load);
    ctx.Info("memory: loaded " + std::to_string(memory["items"].size()) + " items from " + load);
  }
  json items = ListParam(memory, "items");
  const json added = ListParam(with.value("add", json()), "items");
  int duplicates = 0;
  for (const auto& item : added) {
    if (!item.is_object() || item.value("title", "").empty() || item.value("title", "") == "No optimization found") continue;
    const std::string key = DuplicateKey(item);
    const std::string id = item.value("id", "");
    json kept = json::array();
    for (auto& old : items) {
      bool duplicate = DuplicateKey(old) == key || (!id.empty() && old.value("id", "") == id);
      if (duplicate) ++duplicates;
      else kept.push_back(std::move(old));
    }
    kept.push_back(item);
    items = std::move(kept);
  }
  // Capacity: evict the oldest per case (problem scope) or overall (shared scope).
  int evicted = 0;
  std::map<std::string, int> remaining;
  for (const auto& item : items) ++remaining[scope == "shared" ? "" : item.value("case_name", "")];
  json trimmed = json::array();
  for (auto& item : items) {
    int& count = remaining[scope == "shared" ? "" : item.value("case_name", "")];
    if (count > capacity) {
      --count;
      ++evicted;
      continue;
    }
    trimmed.push_back(std::move(item));
  }
  json out = {{"version", 1}, {"capacity", capacity}, {"scope", scope}, {"policy", "fifo-newest-kept-dedup"},
              {"iteration", with.value("iteration", json())}, {"items", trimmed}};
  WriteJson(fs::path(ctx.StageDir()) / "memory.json", out);
  WriteJson(fs::path(ctx.RunDir()) / "memory.json", out);
  ctx.Info("memory: " + std::to_string(trimmed.size()) + " items (" + std::to_string(added.size()) + " new, " +
           std::to_string(duplicates) + " duplicates replaced, " + std::to_string(evicted) + " evicted)");
  return {{"memory", out},
          {"path", (fs::path(ctx.RunDir()) / "memory.json").string()},
          {"added", added.size()},
          {"duplicates_replaced", duplicates},
          {"evicted", evicted}};
}

}  // namespace accelopt_optimize
