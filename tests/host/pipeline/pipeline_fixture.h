// pipeline_fixture.h - runs pipeline texts against the built-in and fake
// test plugins, in a temporary directory.
#pragma once

#include <catch2/catch.hpp>

#include "core/progress.h"
#include "core/run_dir.h"
#include "pipeline/executor.h"
#include "pipeline/loader.h"
#include "pipeline/validator.h"
#include "plugin/registry.h"
#include "support/test_support.h"

namespace accelopt::testing {

struct PipelineRun {
  RunResult result;
  std::filesystem::path run_dir;
};

class PipelineFixture {
 public:
  PipelineFixture() {
    registry_.LoadPlugins(nullptr);
    registry_.LoadPluginFile(std::filesystem::path(ACCELOPT_TEST_PLUGIN_DIR) / "fake_stages.so");
  }

  /// Loads + validates `yaml` (written as pipeline.yaml); throws ConfigError.
  Pipeline Load(const std::string& yaml, const std::vector<std::string>& sets = {}) {
    auto file = dir_.Write("pipeline.yaml", yaml);
    Pipeline pipeline = LoadPipeline(file, sets);
    stages_ = ValidatePipeline(pipeline, registry_);
    return pipeline;
  }

  PipelineRun Run(const std::string& yaml, const std::vector<std::string>& sets = {}) {
    Pipeline pipeline = Load(yaml, sets);
    RunDirectory run_dir = RunDirectory::Create(dir_.path() / ("run" + std::to_string(++runs_)), pipeline.name);
    Progress progress(false);
    Executor executor(pipeline, stages_, run_dir, progress);
    return {executor.Run(), run_dir.path()};
  }

  const TempDir& dir() const { return dir_; }
  StageRegistry& registry() { return registry_; }

 private:
  TempDir dir_;
  StageRegistry registry_;
  ResolvedStages stages_;
  int runs_ = 0;
};

}  // namespace accelopt::testing
