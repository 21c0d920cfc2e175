#include <catch2/catch.hpp>

#include <thread>
#include <vector>

#include "llm/usage_ledger.h"

using namespace accelopt::llm;

TEST_CASE("usage_ledger: cost arithmetic", "[llm]") {
  CHECK(EstimateCostUsd(0, 0, 3.0, 15.0) == 0.0);
  CHECK(EstimateCostUsd(1000000, 0, 3.0, 15.0) == Approx(3.0));
  CHECK(EstimateCostUsd(0, 1000000, 3.0, 15.0) == Approx(15.0));
  CHECK(EstimateCostUsd(12345, 6789, 0.15, 0.6) == Approx(12345 * 0.15e-6 + 6789 * 0.6e-6));
}

TEST_CASE("usage_ledger: totals per stage, model, endpoint and run", "[llm]") {
  UsageLedger ledger;
  CHECK(ledger.RecordSuccess("plan", "big", "default", 2000, 500, 3.0, 15.0, 1, 1200) == Approx(0.0135));
  ledger.RecordSuccess("plan", "big", "default", 1000, 100, 3.0, 15.0, 2, 800);
  ledger.RecordSuccess("execute", "small", "cheap", 4000, 4000, 0.1, 0.4, 1, 300, /*replayed=*/true);
  ledger.RecordFailure("execute", "small", "cheap", 3);

  UsageTotals plan = ledger.ForStage("plan");
  CHECK(plan.requests == 2);
  CHECK(plan.prompt_tokens == 3000);
  CHECK(plan.completion_tokens == 600);
  CHECK(plan.attempts == 3);
  CHECK(plan.latency_ms == 2000);
  CHECK(plan.cost_usd == Approx(3000 * 3e-6 + 600 * 15e-6));

  UsageTotals small = ledger.ForModel("small");
  CHECK(small.requests == 1);
  CHECK(small.failed_requests == 1);
  CHECK(small.replayed_requests == 1);
  CHECK(small.attempts == 4);
  CHECK(small.cost_usd == Approx(4000 * 0.1e-6 + 4000 * 0.4e-6));

  UsageTotals total = ledger.Total();
  CHECK(total.requests == 3);
  CHECK(total.failed_requests == 1);
  CHECK(total.cost_usd == Approx(plan.cost_usd + small.cost_usd));
  CHECK(ledger.ForStage("nope").requests == 0);

  nlohmann::json summary = ledger.Summary();
  CHECK(summary["total"]["requests"] == 3);
  CHECK(summary["total"]["total_tokens"] == 3000 + 600 + 8000);
  CHECK(summary["by_stage"]["plan"]["prompt_tokens"] == 3000);
  CHECK(summary["by_model"]["big"]["requests"] == 2);
  CHECK(summary["by_endpoint"]["cheap"]["failed_requests"] == 1);
  CHECK(summary["by_stage"]["execute"]["cost_usd"].get<double>() == Approx(small.cost_usd));
}

TEST_CASE("usage_ledger: concurrent recording is exact", "[llm]") {
  UsageLedger ledger;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&ledger, t] {
      for (int i = 0; i < 500; ++i) ledger.RecordSuccess("s" + std::to_string(t % 2), "m", "", 10, 1, 1.0, 1.0);
    });
  }
  for (auto& thread : threads) thread.join();
  CHECK(ledger.Total().requests == 2000);
  CHECK(ledger.Total().prompt_tokens == 20000);
  CHECK(ledger.ForStage("s0").requests == 1000);
  CHECK(ledger.Summary()["by_endpoint"].contains("(none)"));
}
