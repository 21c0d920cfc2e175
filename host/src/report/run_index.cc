#include "report/run_index.h"

#include <sys/stat.h>

#include <algorithm>
#include <set>
#include <system_error>

#include <SQLiteCpp/SQLiteCpp.h>

namespace fs = std::filesystem;
using nlohmann::json;

namespace accelopt::report {
namespace {

constexpr int kSchemaVersion = 1;

const char* kSchema = R"SQL(
CREATE TABLE IF NOT EXISTS runs (
  id TEXT PRIMARY KEY,
  dir TEXT NOT NULL,
  name TEXT NOT NULL DEFAULT '',
  pipeline TEXT NOT NULL DEFAULT '',
  kind TEXT NOT NULL DEFAULT '',
  status TEXT NOT NULL DEFAULT '',
  started_at TEXT NOT NULL DEFAULT '',
  finished_at TEXT NOT NULL DEFAULT '',
  duration_s REAL,
  geomean_speedup REAL,
  candidates INTEGER,
  report TEXT NOT NULL DEFAULT '',
  run_json_mtime INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS problems (
  run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  case_name TEXT NOT NULL,
  problem TEXT NOT NULL DEFAULT '',
  baseline_ms REAL,
  best_ms REAL,
  speedup REAL,
  status TEXT NOT NULL DEFAULT '',
  PRIMARY KEY (run_id, case_name)
);
CREATE INDEX IF NOT EXISTS runs_by_start ON runs(started_at);
)SQL";

json Optional(const std::optional<double>& value) { return value ? json(*value) : json(nullptr); }

std::optional<double> Number(const json& object, const char* key) {
  auto it = object.find(key);
  if (it == object.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

std::string Text(const json& object, const char* key) {
  auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
}

void BindOptional(SQLite::Statement& statement, int index, const std::optional<double>& value) {
  if (value) statement.bind(index, *value);
  else statement.bind(index);
}

std::optional<double> ColumnOptional(const SQLite::Column& column) {
  if (column.isNull()) return std::nullopt;
  return column.getDouble();
}

}  // namespace

json IndexedRun::ToJson() const {
  json out = {{"id", id}, {"dir", dir}, {"name", name}, {"pipeline", pipeline}, {"kind", kind}, {"status", status},
              {"started_at", started_at}, {"finished_at", finished_at}, {"duration_s", Optional(duration_s)},
              {"geomean_speedup", Optional(geomean_speedup)},
              {"candidates", candidates ? json(*candidates) : json(nullptr)},
              {"report", report.empty() ? json(nullptr) : json(report)}};
  json list = json::array();
  for (const auto& p : problems) {
    list.push_back({{"case_name", p.case_name}, {"problem", p.problem}, {"baseline_ms", Optional(p.baseline_ms)},
                    {"best_ms", Optional(p.best_ms)}, {"speedup", Optional(p.speedup)}, {"status", p.status}});
  }
  out["problems"] = list;
  return out;
}

IndexedRun IndexedRun::FromJson(const json& value) {
  IndexedRun run;
  if (!value.is_object()) return run;
  run.id = Text(value, "id");
  run.dir = Text(value, "dir");
  run.name = Text(value, "name");
  run.pipeline = Text(value, "pipeline");
  run.kind = Text(value, "kind");
  run.status = Text(value, "status");
  run.started_at = Text(value, "started_at");
  run.finished_at = Text(value, "finished_at");
  run.duration_s = Number(value, "duration_s");
  run.geomean_speedup = Number(value, "geomean_speedup");
  if (auto candidates = Number(value, "candidates")) run.candidates = static_cast<int64_t>(*candidates);
  run.report = Text(value, "report");
  if (auto it = value.find("problems"); it != value.end() && it->is_array()) {
    for (const auto& p : *it) {
      if (!p.is_object()) continue;
      run.problems.push_back({Text(p, "case_name"), Text(p, "problem"), Number(p, "baseline_ms"), Number(p, "best_ms"),
                              Number(p, "speedup"), Text(p, "status")});
    }
  }
  return run;
}

fs::path IndexFile(const fs::path& root) { return root / "index.sqlite"; }

namespace {

// The index and its rollback journal must be regular files or absent: a link
// planted at index.sqlite would make `runs` write its tables into another
// database, a FIFO would hang it (issue 34). SQLite's OPEN_NOFOLLOW closes the
// window between this check and the open for the database file itself.
void RefuseLinks(const fs::path& file) {
  for (const std::string suffix : {"", "-journal", "-wal", "-shm"}) {
    const fs::path path = file.string() + suffix;
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0) continue;  // absent: created as a regular file
    if (S_ISLNK(st.st_mode)) {
      throw std::runtime_error(path.string() + ": refusing a symlink (the run index is never opened through a link)");
    }
    if (!S_ISREG(st.st_mode)) throw std::runtime_error(path.string() + ": not a regular file");
  }
}

}  // namespace

RunIndex::RunIndex(const fs::path& file) {
  RefuseLinks(file);
  db_ = std::make_unique<SQLite::Database>(file.string(),
                                           SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE | SQLite::OPEN_NOFOLLOW);
  db_->setBusyTimeout(10000);
  db_->exec("PRAGMA foreign_keys = ON");
  const int version = db_->execAndGet("PRAGMA user_version").getInt();
  if (version > kSchemaVersion) {
    throw SQLite::Exception(file.string() + ": index schema version " + std::to_string(version) +
                            " is newer than this host's (" + std::to_string(kSchemaVersion) + ")");
  }
  SQLite::Transaction transaction(*db_);
  db_->exec(kSchema);
  db_->exec("PRAGMA user_version = " + std::to_string(kSchemaVersion));
  transaction.commit();
}

RunIndex::~RunIndex() = default;

void RunIndex::Upsert(const IndexedRun& run) {
  SQLite::Transaction transaction(*db_);
  SQLite::Statement remove(*db_, "DELETE FROM problems WHERE run_id = ?");
  remove.bind(1, run.id);
  remove.exec();
  SQLite::Statement insert(*db_,
                           "INSERT OR REPLACE INTO runs (id, dir, name, pipeline, kind, status, started_at, finished_at, "
                           "duration_s, geomean_speedup, candidates, report, run_json_mtime) "
                           "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  insert.bind(1, run.id);
  insert.bind(2, run.dir);
  insert.bind(3, run.name);
  insert.bind(4, run.pipeline);
  insert.bind(5, run.kind);
  insert.bind(6, run.status);
  insert.bind(7, run.started_at);
  insert.bind(8, run.finished_at);
  BindOptional(insert, 9, run.duration_s);
  BindOptional(insert, 10, run.geomean_speedup);
  if (run.candidates) insert.bind(11, static_cast<int64_t>(*run.candidates));
  else insert.bind(11);
  insert.bind(12, run.report);
  insert.bind(13, static_cast<int64_t>(run.run_json_mtime));
  insert.exec();
  SQLite::Statement problem(*db_,
                            "INSERT OR REPLACE INTO problems (run_id, case_name, problem, baseline_ms, best_ms, speedup, status) "
                            "VALUES (?, ?, ?, ?, ?, ?, ?)");
  for (const auto& p : run.problems) {
    problem.reset();
    problem.clearBindings();
    problem.bind(1, run.id);
    problem.bind(2, p.case_name);
    problem.bind(3, p.problem);
    BindOptional(problem, 4, p.baseline_ms);
    BindOptional(problem, 5, p.best_ms);
    BindOptional(problem, 6, p.speedup);
    problem.bind(7, p.status);
    problem.exec();
  }
  transaction.commit();
}

void RunIndex::Remove(const std::string& id) {
  SQLite::Transaction transaction(*db_);
  SQLite::Statement problems(*db_, "DELETE FROM problems WHERE run_id = ?");
  problems.bind(1, id);
  problems.exec();
  SQLite::Statement runs(*db_, "DELETE FROM runs WHERE id = ?");
  runs.bind(1, id);
  runs.exec();
  transaction.commit();
}

void RunIndex::Clear() {
  SQLite::Transaction transaction(*db_);
  db_->exec("DELETE FROM problems; DELETE FROM runs;");
  transaction.commit();
}

std::vector<IndexedRun> RunIndex::Query(const std::string& where, const std::string& id) const {
  std::vector<IndexedRun> runs;
  SQLite::Statement query(*db_,
                          "SELECT id, dir, name, pipeline, kind, status, started_at, finished_at, duration_s, geomean_speedup, "
                          "candidates, report, run_json_mtime FROM runs " + where + " ORDER BY started_at DESC, id DESC");
  if (!id.empty()) query.bind(1, id);
  while (query.executeStep()) {
    IndexedRun run;
    run.id = query.getColumn(0).getString();
    run.dir = query.getColumn(1).getString();
    run.name = query.getColumn(2).getString();
    run.pipeline = query.getColumn(3).getString();
    run.kind = query.getColumn(4).getString();
    run.status = query.getColumn(5).getString();
    run.started_at = query.getColumn(6).getString();
    run.finished_at = query.getColumn(7).getString();
    run.duration_s = ColumnOptional(query.getColumn(8));
    run.geomean_speedup = ColumnOptional(query.getColumn(9));
    if (!query.getColumn(10).isNull()) run.candidates = query.getColumn(10).getInt64();
    run.report = query.getColumn(11).getString();
    run.run_json_mtime = query.getColumn(12).getInt64();
    runs.push_back(std::move(run));
  }
  SQLite::Statement problems(*db_,
                             "SELECT case_name, problem, baseline_ms, best_ms, speedup, status FROM problems "
                             "WHERE run_id = ? ORDER BY rowid");
  for (auto& run : runs) {
    problems.reset();
    problems.bind(1, run.id);
    while (problems.executeStep()) {
      run.problems.push_back({problems.getColumn(0).getString(), problems.getColumn(1).getString(),
                              ColumnOptional(problems.getColumn(2)), ColumnOptional(problems.getColumn(3)),
                              ColumnOptional(problems.getColumn(4)), problems.getColumn(5).getString()});
    }
  }
  return runs;
}

std::vector<IndexedRun> RunIndex::List() const { return Query("", ""); }

std::optional<IndexedRun> RunIndex::Find(const std::string& id) const {
  auto runs = Query("WHERE id = ?", id);
  if (runs.empty()) return std::nullopt;
  return runs.front();
}

int64_t RunJsonMtime(const fs::path& run_dir) {
  std::error_code error;
  auto time = fs::last_write_time(run_dir / "run.json", error);
  if (error) return 0;
  return std::chrono::duration_cast<std::chrono::nanoseconds>(time.time_since_epoch()).count();
}

std::vector<fs::path> FindRunDirs(const fs::path& root) {
  std::vector<fs::path> dirs;
  std::error_code error;
  for (fs::directory_iterator it(root, error), end; !error && it != end; it.increment(error)) {
    std::error_code status_error;
    if (it->is_directory(status_error) && !it->is_symlink(status_error) && fs::is_regular_file(it->path() / "run.json", status_error)) {
      dirs.push_back(it->path());
    }
  }
  std::sort(dirs.begin(), dirs.end());
  return dirs;
}

SyncStats SyncIndex(RunIndex& index, const fs::path& root, const std::function<IndexedRun(const fs::path&)>& summarize,
                    bool rebuild, std::vector<std::string>* errors) {
  SyncStats stats;
  if (rebuild) index.Clear();
  std::set<std::string> present;
  for (const auto& dir : FindRunDirs(root)) {
    const std::string id = dir.filename().string();
    present.insert(id);
    const int64_t mtime = RunJsonMtime(dir);
    auto existing = index.Find(id);
    const std::string absolute = fs::absolute(dir).lexically_normal().string();
    if (existing && existing->run_json_mtime == mtime && existing->dir == absolute) {
      ++stats.unchanged;
      continue;
    }
    try {
      IndexedRun run = summarize(dir);
      run.id = id;
      run.dir = absolute;
      run.run_json_mtime = mtime;
      index.Upsert(run);
      ++(existing ? stats.updated : stats.added);
    } catch (const std::exception& error) {
      if (errors) errors->push_back(dir.string() + ": " + error.what());
    }
  }
  for (const auto& run : index.List()) {
    if (!present.count(run.id)) {
      index.Remove(run.id);
      ++stats.removed;
    }
  }
  return stats;
}

}  // namespace accelopt::report
