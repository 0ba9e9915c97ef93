// Per-op latencies of a simulated device: fixed, or log-normal fitted to a
// median and a 99th percentile (a long tail, as devices have). Seeded, with its
// own generator and normal transform, so a seed gives the same sequence on
// every machine and library.
#pragma once

#include <cstdint>

namespace gdr {

// Not thread-safe (MediaModel holds it under its lock).
class LatencySampler {
 public:
  // p50_us == 0: every sample is 0. p99_us <= p50_us: every sample is p50_us.
  // Otherwise log-normal with median p50_us and 99th percentile p99_us: ln(X) ~
  // N(mu, sigma^2), mu = ln(p50), sigma = ln(p99 / p50) / z99 (z99 = 2.3263,
  // the standard normal's 99th percentile); samples are capped at kTailCap *
  // p99_us so one draw cannot stall a volume.
  LatencySampler(uint64_t p50_us, uint64_t p99_us, uint64_t seed);

  // The next latency, in nanoseconds.
  int64_t NextNs();

  static constexpr double kZ99 = 2.3263478740408408;
  static constexpr double kTailCap = 10.0;

 private:
  double Uniform();  // in (0, 1)
  double Normal();   // standard normal (Box-Muller, both values used)

  double median_ns_;
  double sigma_;
  double cap_ns_;
  uint64_t state_;
  bool have_spare_ = false;
  double spare_ = 0;
};

}  // namespace gdr
