// FIB names that become path components (issue 34): a definition's name or
// op_type, a solution's name, definition or author that is an absolute path,
// holds "..", a separator or a NUL byte is refused where it is read (with its
// file and field), by `flashinfer validate`, and again where a path is built;
// an evaluation never writes outside its run (docs/flashinfer.md, "Names").
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "flashinfer/model.h"
#include "flashinfer/trace_set.h"
#include "support/test_support.h"

using namespace accelopt::fib;
using accelopt::testing::RunHost;
using accelopt::testing::SourcePath;
using accelopt::testing::TempDir;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

fs::path CopyFixture(const TempDir& dir) {
  fs::path root = dir.path() / "set";
  fs::copy(SourcePath("tests/fixtures/flashinfer"), root, fs::copy_options::recursive);
  return root;
}

void Put(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

json RmsSolution(const std::string& name, const std::string& author) {
  return {{"name", name},
          {"definition", "rmsnorm_h16"},
          {"author", author},
          {"spec", {{"language", "python"}, {"target_hardware", {"cpu"}}, {"entry_point", "main.py::run"},
                    {"destination_passing_style", false}}},
          {"sources",
           {{{"path", "main.py"},
             {"content", "import torch\n\ndef run(x, w):\n    x32 = x.float()\n    return (x32 * torch.rsqrt("
                         "x32.square().mean(-1, keepdim=True) + 1e-6) * w.float()).to(x.dtype)\n"}}}}};
}

const Problem* ErrorAt(const Problems& problems, const std::string& file, const std::string& field) {
  for (const auto& p : problems)
    if (p.level == Problem::kError && p.file == file && p.field == field) return &p;
  std::string all;
  for (const auto& p : problems) all += "\n  " + p.file + ": " + p.field + ": " + p.message;
  UNSCOPED_INFO("problems:" << all);
  return nullptr;
}

}  // namespace

TEST_CASE("fib names: hostile names are refused with their file and field, in the loader and in validate",
          "[flashinfer]") {
  TempDir dir;
  fs::path root = CopyFixture(dir);
  const std::string sol = "solutions/evil/rmsnorm/rmsnorm_h16/";
  Put(root / sol / "up.json", RmsSolution("up", "../../../../escape").dump(2));
  Put(root / sol / "abs.json", RmsSolution("abs", "/tmp/accelopt-escape").dump(2));
  Put(root / sol / "nul.json", RmsSolution("nul", std::string("evil\0x", 6)).dump(2));
  Put(root / sol / "sep.json", RmsSolution("a/b", "evil").dump(2));
  json def = json::parse(std::ifstream(root / "definitions/rmsnorm/rmsnorm_h16.json"));
  def["name"] = "rmsnorm_h16_copy";
  def["op_type"] = "../../escape";
  Put(root / "definitions/rmsnorm/rmsnorm_h16_copy.json", def.dump(2));
  def["name"] = "..";
  def["op_type"] = "rmsnorm";
  Put(root / "definitions/rmsnorm/dots.json", def.dump(2));

  TraceSet set = LoadTraceSet(root.string());
  for (const char* name : {"up", "abs", "nul", "a/b"}) CHECK(set.FindSolution(name) == nullptr);
  CHECK(set.FindDefinition("rmsnorm_h16_copy") == nullptr);
  CHECK(set.FindDefinition("..") == nullptr);
  Problems problems = Validate(set);
  const Problem* p = ErrorAt(problems, sol + "up.json", "author");
  REQUIRE(p);
  CHECK(p->message.find("..") != std::string::npos);
  CHECK(ErrorAt(problems, sol + "abs.json", "author"));
  CHECK(ErrorAt(problems, sol + "nul.json", "author"));
  CHECK(ErrorAt(problems, sol + "sep.json", "name"));
  CHECK(ErrorAt(problems, "definitions/rmsnorm/rmsnorm_h16_copy.json", "op_type"));
  CHECK(ErrorAt(problems, "definitions/rmsnorm/dots.json", "name"));

  auto result = RunHost({"flashinfer", "validate", root.string(), "--errors-only"});
  INFO(result.output);
  CHECK(result.exit_code == 2);
  CHECK(result.output.find(sol + "up.json: author: error: ") != std::string::npos);
  CHECK(result.output.find("definitions/rmsnorm/rmsnorm_h16_copy.json: op_type: error: ") != std::string::npos);

  // Paths built from names check them again (a name that did not come through the loader).
  Solution s;
  s.name = "x";
  s.definition = "rmsnorm_h16";
  s.author = "../up";
  CHECK_THROWS_WITH(set.SolutionPath(s), Catch::Contains("author"));
  Definition d = *set.FindDefinition("rmsnorm_h16");
  CHECK_THROWS_WITH(set.TracePath("/abs", d), Catch::Contains("author"));
  d.op_type = "..";
  CHECK_THROWS_WITH(set.TracePath("ok", d), Catch::Contains("op_type"));
}

TEST_CASE("flashinfer-profile: a solution whose author is a path writes no trace outside the run", "[flashinfer][e2e]") {
  if (std::system("/usr/bin/python3.11 -c 'import torch' >/dev/null 2>&1") != 0) {
    WARN(std::string("skipped: ") + "no python3-torch for /usr/bin/python3.11");
    return;
  }
  TempDir dir;
  fs::path root = CopyFixture(dir);
  fs::path run = dir.path() / "a" / "b" / "run";
  // RUN_DIR/traces/<author>/rmsnorm/rmsnorm_h16.jsonl with author ../../../../outside is dir/outside/...
  Put(root / "solutions/evil/rmsnorm/rmsnorm_h16/evil.json", RmsSolution("evil", "../../../../outside").dump(2));
  Put(root / "solutions/evil/rmsnorm/rmsnorm_h16/fine.json", RmsSolution("fine", "evil").dump(2));
  auto result = RunHost({"run", SourcePath("pipelines/flashinfer-profile.yaml").string(), "--run-dir", run.string(),
                         "--set", "vars.trace_set=" + root.string(), "--set", "vars.definitions=[rmsnorm_h16]",
                         "--set", "vars.languages=[python]", "--set", "vars.max_workloads=1", "--set", "vars.trials=1",
                         "--set", "vars.warmup=0", "--set", "vars.iterations=1", "--set", "vars.cold_cache=false",
                         "--set", "vars.isolation=inprocess"});
  INFO(result.output);
  CHECK(result.exit_code == 0);
  CHECK_FALSE(fs::exists(dir.path() / "outside"));
  for (const auto& entry : fs::recursive_directory_iterator(dir.path())) {
    if (entry.path().extension() != ".jsonl") continue;
    std::string p = entry.path().string();
    CHECK((p.rfind(run.string() + "/", 0) == 0 || p.rfind(root.string() + "/", 0) == 0));
  }
  CHECK(fs::exists(run / "traces/evil/rmsnorm/rmsnorm_h16.jsonl"));  // the well-named solution of the same author
  CHECK(result.output.find("author") != std::string::npos);           // the refusal is reported
}
