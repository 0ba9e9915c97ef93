#include "client/gdrctl/bench_progress.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"

namespace gdrctl {

std::string FormatDuration(double seconds) {
  const int64_t s = seconds > 0 ? static_cast<int64_t>(std::llround(seconds)) : 0;
  if (s < 60) return absl::StrFormat("%ds", s);
  if (s < 3600) return absl::StrFormat("%dm%02ds", s / 60, s % 60);
  return absl::StrFormat("%dh%02dm%02ds", s / 3600, s / 60 % 60, s % 60);
}

std::string BenchProgress::Update(uint64_t done, double seconds) {
  const double interval = seconds - last_seconds_;
  if (interval > 0 && done >= last_done_) {
    ops_per_sec_ = static_cast<double>(done - last_done_) / interval;
    gbps_ = ops_per_sec_ * static_cast<double>(bytes_) / 1e9;
  }
  last_done_ = done;
  last_seconds_ = std::max(last_seconds_, seconds);
  if (done >= total_) {
    eta_ = 0;
  } else if (done > 0 && seconds > 0) {
    eta_ = static_cast<double>(total_ - done) * seconds / static_cast<double>(done);
  } else {
    eta_ = -1;
  }
  const double pct = total_ ? 100.0 * static_cast<double>(std::min(done, total_)) /
                                  static_cast<double>(total_)
                            : 100.0;
  return absl::StrFormat("[%5.1f%%] %u/%u ops [%.3f GB/s, %.0f ops/s] [elapsed %s, eta %s]", pct,
                         done, total_, gbps_, ops_per_sec_, FormatDuration(seconds),
                         eta_ < 0 ? std::string("--") : FormatDuration(eta_));
}

}  // namespace gdrctl
