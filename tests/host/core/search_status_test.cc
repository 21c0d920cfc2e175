// Tests for host/src/core/search_status: the search line of the live progress.
#include <catch2/catch.hpp>

#include <cmath>

#include "core/search_status.h"

using accelopt::SearchStatus;
using nlohmann::json;

TEST_CASE("the budget is exact where planned and extrapolated for later iterations", "[core][progress]") {
  SearchStatus status;
  auto t0 = SearchStatus::Clock::now();
  status.Start("optimize", 3, t0);
  status.BeginIteration(0);
  CHECK_FALSE(status.Budget());
  CHECK_THAT(status.Line(t0), Catch::Contains("optimize 1/3 · 0/? candidates"));
  status.ItemsPlanned(4);
  CHECK(*status.Budget() == 12);  // 4 now, 4 per later iteration
  CHECK_FALSE(status.BudgetExact());
  for (int i = 0; i < 4; ++i) status.ItemDone();
  status.EndIteration();
  status.BeginIteration(1);
  CHECK(*status.Budget() == 12);  // not planned yet: as many as the last iteration
  status.ItemsPlanned(10);
  CHECK(*status.Budget() == 4 + 10 + 10);
  for (int i = 0; i < 10; ++i) status.ItemDone();
  status.EndIteration();
  status.BeginIteration(2);
  status.ItemsPlanned(6);
  CHECK(*status.Budget() == 20);
  CHECK(status.BudgetExact());
  CHECK_THAT(status.Line(t0), Catch::Contains("3/3 · 14/20 candidates"));
}

TEST_CASE("a declared budget caps the estimate and the ETA of a long loop", "[core][progress]") {
  // A budgeted graph search: up to 90 rounds of 22 candidates, but 440 candidates in all.
  SearchStatus status;
  auto t0 = SearchStatus::Clock::now();
  status.Start("search", 90, t0, 440);
  status.BeginIteration(0);
  CHECK(*status.Budget() == 440);  // known before any round is planned
  status.ItemsPlanned(22);
  CHECK(*status.Budget() == 440);  // 22 x 90 = 1980 without the cap
  for (int i = 0; i < 22; ++i) status.ItemDone();
  // 22 candidates in 220 s, 418 left at 10 s each.
  CHECK(*status.EtaSeconds(t0 + std::chrono::seconds(220)) == Approx(4180.0));
  CHECK_THAT(status.Line(t0 + std::chrono::seconds(220)), Catch::Contains("1/90 · 22/≈440 candidates"));
  // Late rounds plan fewer candidates: the extrapolation falls below the cap.
  status.EndIteration();
  status.BeginIteration(88);
  status.ItemsPlanned(2);
  CHECK(*status.Budget() == 22 + 2 + 2);
}

TEST_CASE("a round that evaluates nothing does not end the estimate", "[core][progress]") {
  // Graph search: rounds whose moves all led to known states (transpositions) profile nothing.
  SearchStatus status;
  auto t0 = SearchStatus::Clock::now();
  status.Start("search", 90, t0, 40);
  status.BeginIteration(0);
  status.ItemsPlanned(3);
  for (int i = 0; i < 3; ++i) status.ItemDone();
  status.EndIteration();
  status.BeginIteration(1);
  status.ItemsPlanned(2);
  for (int i = 0; i < 2; ++i) status.ItemDone();
  status.EndIteration();
  status.BeginIteration(2);  // planned 0 ...
  status.EndIteration();     // ... and evaluated 0
  status.BeginIteration(3);
  // 5 in 3 rounds, 2 per round on average: capped by the budget of 40, not "5/~5"
  CHECK(*status.Budget() == 40);
  CHECK_THAT(status.Line(t0 + std::chrono::seconds(50)), Catch::Contains("4/90 · 5/≈40 candidates"));
  // right after a round that evaluated nothing there is no per-candidate ETA (issue 36, item 9) ...
  CHECK_FALSE(status.EtaSeconds(t0 + std::chrono::seconds(50)));
  status.ItemsPlanned(2);  // ... until candidates come again
  CHECK(*status.EtaSeconds(t0 + std::chrono::seconds(50)) == Approx(350.0));
  // without a declared budget: the average per round over the rounds left
  SearchStatus open;
  open.Start("search", 6, t0, std::nullopt);
  open.BeginIteration(0);
  open.ItemsPlanned(4);
  for (int i = 0; i < 4; ++i) open.ItemDone();
  open.EndIteration();
  open.BeginIteration(1);
  open.EndIteration();
  open.BeginIteration(2);
  CHECK(*open.Budget() == 4 + 2 + 3 * 2);  // 2 per round now and in the 3 rounds after
}

TEST_CASE("the ETA is the time per candidate so far times the candidates left", "[core][progress]") {
  SearchStatus status;
  auto t0 = SearchStatus::Clock::now();
  status.Start("optimize", 2, t0);
  status.BeginIteration(0);
  status.ItemsPlanned(5);
  CHECK_FALSE(status.EtaSeconds(t0 + std::chrono::seconds(5)));  // nothing evaluated yet
  for (int i = 0; i < 5; ++i) status.ItemDone();
  // 5 candidates in 10 s, 5 more expected: 10 s left.
  CHECK(*status.EtaSeconds(t0 + std::chrono::seconds(10)) == Approx(10.0));
  CHECK_THAT(status.Line(t0 + std::chrono::seconds(10)), Catch::EndsWith("ETA 0m10s"));
}

TEST_CASE("a resumed run's reused candidates count as evaluated but not in the ETA's rate", "[core][progress]") {
  SearchStatus status;
  auto t0 = SearchStatus::Clock::now();
  status.Start("search", 2, t0, 20);
  status.BeginIteration(0);
  status.ItemsPlanned(10);
  for (int i = 0; i < 10; ++i) status.ItemDone(/*reused=*/true);  // replayed in no time
  status.EndIteration();
  CHECK(status.evaluated() == 10);
  CHECK_FALSE(status.EtaSeconds(t0 + std::chrono::milliseconds(50)));  // no fresh candidate yet
  status.BeginIteration(1);
  status.ItemsPlanned(10);
  for (int i = 0; i < 2; ++i) status.ItemDone();
  // 2 fresh candidates in 20 s, 8 left: 80 s (the 10 reused ones would have made it 13 s).
  CHECK(*status.EtaSeconds(t0 + std::chrono::seconds(20)) == Approx(80.0));
}

TEST_CASE("the best speedup comes from the carry's best map", "[core][progress]") {
  json carry = {{"best", {{"silu", {{"latency_ms", 0.04}, {"baseline_latency_ms", 0.05}}},
                          {"adamw", {{"speedup_vs_baseline", 1.0}}},
                          {"broken", "not an entry"}}}};
  auto [best, geomean] = accelopt::BestSpeedups(carry);
  CHECK(*best == Approx(1.25));
  CHECK(*geomean == Approx(std::sqrt(1.25)));
  CHECK_FALSE(accelopt::BestSpeedups(json::object()).first);
  SearchStatus status;
  status.Start("optimize", 1, SearchStatus::Clock::now());
  status.Carry(carry);
  CHECK_THAT(status.Line(SearchStatus::Clock::now()), Catch::Contains("best 1.250x (geomean 1.118x)"));
}

TEST_CASE("the search's own budget_left bounds the budget: a finished problem's budget is not waited for",
          "[core][progress]") {
  // Graph search, 4 problems x 40: one problem ran out of moves at 39 evaluations (issue 36, item 9).
  SearchStatus status;
  auto t0 = SearchStatus::Clock::now();
  status.Start("search", 90, t0, 160);
  status.BeginIteration(0);
  status.ItemsPlanned(8);
  for (int i = 0; i < 8; ++i) status.ItemDone();
  status.Carry({{"budget_left", 120}});  // mcgs_select: budget - evaluations of the problems not done
  CHECK(*status.Budget() == 128);
  status.EndIteration();
  status.BeginIteration(1);
  status.Carry({{"budget_left", 0}});  // every problem done (one exhausted): nothing more will come
  CHECK(*status.Budget() == 8);
  CHECK_THAT(status.Line(t0 + std::chrono::seconds(8)), Catch::Contains("8/8 candidates"));
}

TEST_CASE("after a round that evaluated nothing the line says so instead of a per-candidate ETA",
          "[core][progress]") {
  SearchStatus status;
  auto t0 = SearchStatus::Clock::now();
  status.Start("search", 90, t0, 160);
  status.BeginIteration(0);
  status.ItemsPlanned(159);
  for (int i = 0; i < 159; ++i) status.ItemDone();
  status.EndIteration();
  status.BeginIteration(1);  // only transpositions: nothing planned ...
  status.EndIteration();     // ... nothing evaluated
  status.BeginIteration(2);
  const std::string line = status.Line(t0 + std::chrono::seconds(159));
  CHECK_THAT(line, Catch::Contains("3/90 · 159/≈160 candidates"));
  CHECK_THAT(line, !Catch::Contains("ETA 0m01s"));
  CHECK_THAT(line, Catch::Contains("no new candidate in the last round"));
  status.ItemsPlanned(1);  // a candidate again: the ETA comes back
  CHECK(status.EtaSeconds(t0 + std::chrono::seconds(159)).has_value());
}
