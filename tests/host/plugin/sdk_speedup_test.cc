// accelopt/sdk/speedup.hpp: Welch's interval of a latency ratio (docs/optimize.md,
// "Noise-aware speedups"). Expected figures computed by hand from the formula
// (log latencies, Welch-Satterthwaite df, Student t quantile).
#include <catch2/catch.hpp>

#include <stdexcept>

#include "accelopt/sdk/speedup.hpp"

using accelopt::sdk::EstimateSpeedup;

TEST_CASE("speedup interval: Welch's t interval on log latencies", "[sdk][speedup]") {
  // Both sides have the same spread of logs: df = 4, t(0.975, 4) = 2.776445.
  auto s = EstimateSpeedup({10, 11, 12}, {5, 5.5, 6});
  CHECK(s.measured);
  CHECK(s.speedup == Approx(2.0));
  CHECK(s.low == Approx(1.62648).epsilon(1e-5));
  CHECK(s.high == Approx(2.45930).epsilon(1e-5));
  CHECK(s.Faster());
  CHECK_FALSE(s.Slower());
  // The same pair the other way round is slower beyond the noise.
  auto back = EstimateSpeedup({5, 5.5, 6}, {10, 11, 12});
  CHECK(back.Slower());
  CHECK(back.low == Approx(1 / 2.45930).epsilon(1e-5));
}

TEST_CASE("speedup interval: jitter is within the noise, however large the point ratio", "[sdk][speedup]") {
  // One slow outlier trial in the parent makes a 1.4x point speedup, but the repeats
  // disagree: the interval holds 1.
  auto s = EstimateSpeedup({1.0, 3.0, 1.1}, {1.0, 1.05, 0.98});
  CHECK(s.speedup > 1.4);
  CHECK(s.measured);
  CHECK(s.low < 1.0);
  CHECK(s.high > 1.0);
  CHECK_FALSE(s.Faster());
  CHECK_FALSE(s.Slower());
}

TEST_CASE("speedup interval: one repeat on a side is unmeasured noise; no spread is an exact ratio", "[sdk][speedup]") {
  auto one = EstimateSpeedup({10.0}, {1.0, 1.0});
  CHECK(one.speedup == Approx(10.0));
  CHECK_FALSE(one.measured);
  CHECK_FALSE(one.Faster());
  CHECK(one.low == 0);
  // A deterministic clock (the emulator) repeats exactly: the ratio is exact.
  auto exact = EstimateSpeedup({2.0, 2.0}, {1.0, 1.0, 1.0});
  CHECK(exact.measured);
  CHECK(exact.low == Approx(2.0));
  CHECK(exact.high == Approx(2.0));
  CHECK(exact.Faster());
  // Spread on one side only: df = n - 1 of that side.
  auto half = EstimateSpeedup({2.0, 2.0, 2.0}, {1.0, 1.1, 0.9});
  CHECK(half.measured);
  CHECK(half.Faster());
}

TEST_CASE("speedup interval: bad input is refused", "[sdk][speedup]") {
  CHECK_THROWS_AS(EstimateSpeedup({}, {1.0}), std::invalid_argument);
  CHECK_THROWS_AS(EstimateSpeedup({1.0, 0.0}, {1.0}), std::invalid_argument);
  CHECK_THROWS_AS(EstimateSpeedup({1.0, -1.0}, {1.0}), std::invalid_argument);
  CHECK_THROWS_AS(EstimateSpeedup({1.0, 1.0}, {1.0, 1.0}, 1.0), std::invalid_argument);
}
