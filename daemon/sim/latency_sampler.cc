#include "daemon/sim/latency_sampler.h"

#include <algorithm>
#include <cmath>

namespace gdr {

LatencySampler::LatencySampler(uint64_t p50_us, uint64_t p99_us, uint64_t seed)
    : median_ns_(static_cast<double>(p50_us) * 1e3),
      sigma_(p99_us > p50_us && p50_us > 0
                 ? std::log(static_cast<double>(p99_us) / static_cast<double>(p50_us)) / kZ99
                 : 0.0),
      cap_ns_(static_cast<double>(std::max(p50_us, p99_us)) * 1e3 * kTailCap),
      state_(seed) {}

double LatencySampler::Uniform() {
  // splitmix64: a full-period 64-bit generator, fixed by its published
  // constants.
  state_ += 0x9E3779B97F4A7C15ull;
  uint64_t z = state_;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  // The top 53 bits, shifted off zero so log() below stays finite.
  return (static_cast<double>(z >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

double LatencySampler::Normal() {
  if (have_spare_) {
    have_spare_ = false;
    return spare_;
  }
  const double r = std::sqrt(-2.0 * std::log(Uniform()));
  const double theta = 2.0 * M_PI * Uniform();
  spare_ = r * std::sin(theta);
  have_spare_ = true;
  return r * std::cos(theta);
}

int64_t LatencySampler::NextNs() {
  if (sigma_ == 0.0) return static_cast<int64_t>(median_ns_);
  const double x = median_ns_ * std::exp(sigma_ * Normal());
  return static_cast<int64_t>(std::min(x, cap_ns_));
}

}  // namespace gdr
