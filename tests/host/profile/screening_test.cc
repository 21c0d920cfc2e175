// native:profile's screen-then-confirm (plugins/profile/screening.h) on the
// clip fixture (tests/fixtures/screen_confirm): a kernel that drops the clip is
// right on seed 0 and on any hidden set, wrong on seed 21. Every profile call
// goes through the split harness with its hidden set
// (accelopt.sandbox.trusted.run_unisolated), counted by a stand-in for the
// worker pool's isolated_call service.
#include <catch2/catch.hpp>

#include <mutex>

#include "host/optimize/optimize_fixture.h"
#include "plugin/host_services.h"
#include "python/interpreter.h"

using namespace accelopt::testing;
using namespace accelopt::testing::optimize;
using nlohmann::json;

namespace {

// Installs a counting isolated_call for the scope of the object.
class CountingCalls {
 public:
  CountingCalls() {
    accelopt::GlobalHostServices().isolated_call = [this](const std::string& module, const std::string& function,
                                                          const json& arg, const json&) {
      REQUIRE(module == "accelopt.profile");
      REQUIRE(function == "profile_kernel");
      {
        std::lock_guard<std::mutex> lock(mutex_);
        requests_.push_back(arg);
      }
      return accelopt::python::CallJson("accelopt.sandbox.trusted", "run_unisolated", arg);
    };
  }
  ~CountingCalls() { accelopt::GlobalHostServices().isolated_call = nullptr; }
  std::vector<json> Requests() {
    std::lock_guard<std::mutex> lock(mutex_);
    return requests_;
  }

 private:
  std::mutex mutex_;
  std::vector<json> requests_;
};

std::string Fixture(const std::string& name) { return SourcePath("tests/fixtures/screen_confirm/" + name).string(); }

json With(const std::string& kernel, int screen_seeds, const json& confirm_below_ms) {
  json with = {{"kernel", Fixture("kernels/" + kernel)}, {"reference", Fixture("reference/clip_M256_N512_numpy.py")},
               {"backend", "emulator"}, {"screen_seeds", screen_seeds}, {"case", {{"case_name", "clip_small"}}}};
  if (!confirm_below_ms.is_null()) with["confirm_below_ms"] = confirm_below_ms;
  return with;
}

const json kAllSeeds = {0, 21, 42, 63, 84};

}  // namespace

TEST_CASE("screen then confirm: a kernel right on the screen's seed and a hidden set but wrong on seed 21 fails its confirmation",
          "[profile][screen]") {
  TempDir dir;
  CountingCalls calls;
  // Its screened latency beats the threshold (the baseline's, 0.036 ms), so it is confirmed - and refused.
  json out = RunStage("profile", With("clip_noclip.py", 1, 1.0), dir.path());
  INFO(out.dump(2));
  const auto requests = calls.Requests();
  REQUIRE(requests.size() == 2);
  CHECK(requests[0]["seeds"] == json::array({0}));
  CHECK(requests[0].value("timing", true));
  CHECK(requests[1]["seeds"] == json::array({21, 42, 63, 84}));
  CHECK(requests[1]["timing"] == false);  // the latency is the screen's, from its hidden run
  CHECK(out["ok"] == false);
  CHECK(out["correct"] == false);
  CHECK(out["latency_ms"].is_null());
  CHECK(out["screened_latency_ms"].get<double>() > 0);
  CHECK(out["validation"] == "screened");
  CHECK(out["validated_seeds"] == json::array({0}));  // it passed the screen, nothing more
  CHECK(out["error"]["kind"] == "wrong_result");
  CHECK_THAT(out["error"]["message"].get<std::string>(), Catch::Contains("confirmation on seeds [21, 42, 63, 84] failed"));
  CHECK(out["confirm"]["correct"] == false);
  CHECK(out["screen"]["seeds"] == json::array({0}));
  // The screen's error (seed 0) and the confirm's (seed 21, where it stopped).
  REQUIRE(out["rel_errors"].size() == 2);
  CHECK(out["rel_errors"][1].get<double>() > 1.0);
}

TEST_CASE("screen then confirm: a screened candidate that does not beat the threshold is not confirmed (one call)",
          "[profile][screen]") {
  TempDir dir;
  CountingCalls calls;
  json out = RunStage("profile", With("clip_noclip.py", 1, 0.001), dir.path());
  INFO(out.dump(2));
  REQUIRE(calls.Requests().size() == 1);
  CHECK(calls.Requests()[0]["seeds"] == json::array({0}));
  CHECK(out["ok"] == true);
  CHECK(out["latency_ms"].get<double>() > 0.001);
  CHECK(out["validation"] == "screened");
  CHECK(out["validated_seeds"] == json::array({0}));
  CHECK_FALSE(out.contains("confirm"));
}

TEST_CASE("screen then confirm: a correct kernel below the threshold (or with none) is confirmed on every seed",
          "[profile][screen]") {
  TempDir dir;
  CountingCalls calls;
  json out = RunStage("profile", With("clip_0.py", 1, nullptr), dir.path());
  INFO(out.dump(2));
  REQUIRE(calls.Requests().size() == 2);
  CHECK(out["ok"] == true);
  CHECK(out["validation"] == "confirmed");
  CHECK(out["validated_seeds"] == kAllSeeds);
  CHECK(out["rel_errors"].size() == 5);
  CHECK(out["confirm"]["correct"] == true);
  CHECK(out["confirm"]["below_ms"].is_null());
  CHECK(out["latency_ms"].get<double>() > 0);

  // Two screen seeds: the confirm has the other three.
  json two = RunStage("profile", With("clip_0.py", 2, 1.0), dir.path());
  REQUIRE(calls.Requests().size() == 4);
  CHECK(calls.Requests()[2]["seeds"] == json::array({0, 21}));
  CHECK(calls.Requests()[3]["seeds"] == json::array({42, 63, 84}));
  CHECK(two["validation"] == "confirmed");
  CHECK(two["confirm"]["below_ms"] == 1.0);
}

TEST_CASE("screen_seeds 0 (the default) or at least the number of seeds profiles every seed in one call", "[profile][screen]") {
  TempDir dir;
  CountingCalls calls;
  json out = RunStage("profile", With("clip_noclip.py", 0, 1.0), dir.path());
  REQUIRE(calls.Requests().size() == 1);
  CHECK(calls.Requests()[0]["seeds"] == kAllSeeds);
  CHECK(out["validation"] == "full");
  CHECK(out["validated_seeds"] == json::array());  // it failed (seed 21)
  CHECK(out["error"]["kind"] == "wrong_result");
  json all = RunStage("profile", With("clip_0.py", 5, nullptr), dir.path());
  REQUIRE(calls.Requests().size() == 2);
  CHECK(all["validation"] == "full");
  CHECK(all["validated_seeds"] == kAllSeeds);
}

TEST_CASE("screen then confirm: bad screen_seeds or confirm_below_ms are configuration errors", "[profile][screen]") {
  TempDir dir;
  CountingCalls calls;
  CHECK_THROWS_WITH(RunStage("profile", With("clip_0.py", -1, nullptr), dir.path()), Catch::Contains("screen_seeds must be >= 0"));
  CHECK_THROWS_WITH(RunStage("profile", With("clip_0.py", 1, "fast"), dir.path()),
                    Catch::Contains("confirm_below_ms must be a number"));
  CHECK(calls.Requests().empty());
}

TEST_CASE("hidden_reuse: the screens of one reference share a hidden set, a confirmation draws its own", "[profile][screen]") {
  TempDir dir;
  CountingCalls calls;
  json with = With("clip_0.py", 1, 0.001);  // below no latency: screens only
  with["hidden_reuse"] = 3;
  json first = RunStage("profile", with, dir.path());
  json second = RunStage("profile", with, dir.path());
  json third = RunStage("profile", with, dir.path());
  json fourth = RunStage("profile", with, dir.path());
  INFO(second.dump(2));
  REQUIRE(calls.Requests().size() == 4);
  CHECK(calls.Requests()[0]["hidden_reuse"] == 3);
  CHECK(first["timings"]["hidden_reused"] == false);
  CHECK(second["timings"]["hidden_reused"] == true);
  CHECK(third["timings"]["hidden_reused"] == true);
  CHECK(fourth["timings"]["hidden_reused"] == false);  // served its 3 calls: a fresh set
  CHECK(second["latency_ms"] == first["latency_ms"]);
  // A confirmation: the request carries no hidden_reuse, and its set is fresh.
  with["confirm_below_ms"] = 1.0;
  json confirmed = RunStage("profile", with, dir.path());
  REQUIRE(calls.Requests().size() == 6);
  CHECK(calls.Requests()[4]["hidden_reuse"] == 3);
  CHECK_FALSE(calls.Requests()[5].contains("hidden_reuse"));
  CHECK(confirmed["validation"] == "confirmed");
  CHECK(confirmed["confirm"]["timings"]["hidden_reused"] == false);
  // The default: a fresh set for every call.
  json plain = RunStage("profile", With("clip_0.py", 1, 0.001), dir.path());
  CHECK_FALSE(calls.Requests()[6].contains("hidden_reuse"));
  CHECK(plain["timings"]["hidden_reused"] == false);
  with["hidden_reuse"] = 0;
  CHECK_THROWS_WITH(RunStage("profile", with, dir.path()), Catch::Contains("hidden_reuse must be in 1..64"));
}

TEST_CASE("screen_hidden_only: the screen runs the hidden set alone, its confirmation every published seed",
          "[profile][screen]") {
  TempDir dir;
  CountingCalls calls;
  json with = With("clip_noclip.py", 1, 1.0);  // below the threshold: confirmed, and refused on seed 21
  with["screen_hidden_only"] = true;
  json out = RunStage("profile", with, dir.path());
  INFO(out.dump(2));
  const auto requests = calls.Requests();
  REQUIRE(requests.size() == 2);
  CHECK(requests[0]["seeds"] == json::array());
  CHECK(requests[0]["hidden_only"] == true);
  CHECK(requests[1]["seeds"] == kAllSeeds);
  CHECK_FALSE(requests[1].contains("hidden_only"));
  CHECK(out["screen"]["seeds"] == json::array());
  CHECK(out["correct"] == false);
  CHECK(out["error"]["kind"] == "wrong_result");
  CHECK_THAT(out["error"]["message"].get<std::string>(), Catch::Contains("confirmation on seeds [0, 21, 42, 63, 84] failed"));

  // A screen that is not confirmed: correct on the hidden set, no published seed validated.
  json quick = With("clip_0.py", 1, 0.001);
  quick["screen_hidden_only"] = true;
  json thrown = RunStage("profile", quick, dir.path());
  REQUIRE(calls.Requests().size() == 3);
  CHECK(thrown["ok"] == true);
  CHECK(thrown["validation"] == "screened");
  CHECK(thrown["validated_seeds"] == json::array());
  CHECK(thrown["latency_ms"].get<double>() > 0);
  CHECK(thrown["rel_errors"] == json::array());

  // In-process isolation has no hidden set: screen_seeds applies.
  json inprocess = With("clip_0.py", 1, 0.001);
  inprocess["screen_hidden_only"] = true;
  inprocess["isolation"] = "inprocess";
  json plain = RunStage("profile", inprocess, dir.path());
  CHECK(plain["screen"]["seeds"] == json::array({0}));
}
