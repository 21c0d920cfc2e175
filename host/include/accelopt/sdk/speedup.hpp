// accelopt/sdk/speedup.hpp - a speedup with its confidence interval, so that a
// search accepts only a gain beyond the measured noise (docs/optimize.md,
// "Noise-aware speedups").
//
// Each side is a list of repeated latency measurements of one kernel (ms, one
// value per repeat: FlashInfer-Bench's trials, each the median of its timed
// calls). The interval is Welch's t interval on the difference of the mean log
// latencies (B. L. Welch, Biometrika 34, 1947; the Welch-Satterthwaite degrees
// of freedom), mapped back by exp: a ratio of latencies is the quantity that is
// roughly log-normal, and the interval stays positive. The Student t quantile
// is Boost.Math's (Debian libboost-dev).
#pragma once

#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

#include <boost/math/distributions/students_t.hpp>

namespace accelopt::sdk {

/// before / after latency, with a two-sided confidence interval.
struct SpeedupInterval {
  double speedup = 0;  ///< mean(before) / mean(after), arithmetic means (the figure reports show)
  double low = 0;      ///< lower bound of the interval of the latency ratio; 0 when not measured
  double high = std::numeric_limits<double>::infinity();  ///< upper bound; inf when not measured
  bool measured = false;  ///< both sides have at least two repeats, so the noise is known

  /// Faster beyond the noise: the whole interval lies above 1.
  bool Faster() const { return measured && low > 1.0; }
  /// Slower beyond the noise: the whole interval lies below 1.
  bool Slower() const { return measured && high < 1.0; }
};

/// The speedup of `after` over `before` with a `confidence` interval (0.95: 95 %).
/// Throws std::invalid_argument for an empty side or a latency that is not finite and > 0.
/// With fewer than two repeats on a side the noise is unknown: `measured` is false and the
/// interval is (0, inf), so neither Faster() nor Slower() holds.
inline SpeedupInterval EstimateSpeedup(const std::vector<double>& before_ms, const std::vector<double>& after_ms,
                                       double confidence = 0.95) {
  if (before_ms.empty() || after_ms.empty()) throw std::invalid_argument("EstimateSpeedup: a side has no measurement");
  if (!(confidence > 0 && confidence < 1)) throw std::invalid_argument("EstimateSpeedup: confidence must be in (0, 1)");
  struct Side {
    double mean = 0, log_mean = 0, log_var = 0;
    size_t n = 0;
  };
  auto describe = [](const std::vector<double>& values) {
    Side s;
    s.n = values.size();
    for (double v : values) {
      if (!std::isfinite(v) || v <= 0) throw std::invalid_argument("EstimateSpeedup: a latency is not finite and > 0");
      s.mean += v;
      s.log_mean += std::log(v);
    }
    s.mean /= s.n;
    s.log_mean /= s.n;
    for (double v : values) s.log_var += (std::log(v) - s.log_mean) * (std::log(v) - s.log_mean);
    s.log_var = s.n > 1 ? s.log_var / (s.n - 1) : 0;
    return s;
  };
  const Side b = describe(before_ms), a = describe(after_ms);
  SpeedupInterval out;
  out.speedup = b.mean / a.mean;
  if (b.n < 2 || a.n < 2) return out;
  out.measured = true;
  const double diff = b.log_mean - a.log_mean;  // log of the geometric-mean ratio
  const double vb = b.log_var / b.n, va = a.log_var / a.n;
  const double se = std::sqrt(vb + va);
  if (se == 0) {  // identical repeats on both sides (a deterministic clock): no spread to allow for
    out.low = out.high = std::exp(diff);
    return out;
  }
  // Welch-Satterthwaite degrees of freedom; a side without spread contributes nothing.
  double denom = 0;
  if (vb > 0) denom += vb * vb / (b.n - 1);
  if (va > 0) denom += va * va / (a.n - 1);
  const double df = (vb + va) * (vb + va) / denom;
  const boost::math::students_t t_dist(df);
  const double t = boost::math::quantile(t_dist, 0.5 + confidence / 2);
  out.low = std::exp(diff - t * se);
  out.high = std::exp(diff + t * se);
  return out;
}

}  // namespace accelopt::sdk
