#include "cli/run_services.h"

#include "plugin/host_services.h"

namespace accelopt::cli {
namespace {

class NoServices : public RunServices {
 public:
  ~NoServices() override { GlobalHostServices() = HostServices{}; }
};

}  // namespace

std::unique_ptr<RunServices> StartRunServices(const Pipeline& pipeline, const RunDirectory& run_dir,
                                              const ServiceOptions& options) {
  // LLM endpoints (issue: optimization loop) and the worker pool (issue:
  // isolated evaluation) are installed here as they land.
  return std::make_unique<NoServices>();
}

}  // namespace accelopt::cli
