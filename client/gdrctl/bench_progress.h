// The live progress line of `gdrctl bench` on a terminal, in fio's manner: ops done of the
// total, the rate over the last interval (what the transfer does now, not the average since the
// start), the elapsed time and the time left.
#pragma once

#include <cstdint>
#include <string>

namespace gdrctl {

// Whole seconds as "7s", "2m05s", "1h02m03s" (rounded to the nearest second; negative is 0s).
std::string FormatDuration(double seconds);

// Not thread-safe: one caller feeds it samples in time order.
class BenchProgress {
 public:
  // `total_ops` ops of `op_bytes` each are to be run.
  BenchProgress(uint64_t total_ops, uint64_t op_bytes) : total_(total_ops), bytes_(op_bytes) {}

  // The line after `done` ops in `seconds` since the start. The rate covers the ops since the
  // previous call (since the start for the first); the time left assumes the average rate so
  // far holds (a burst or a stall moves the rate at once, the estimate gently).
  std::string Update(uint64_t done, double seconds);

  // Of the last Update: ops/s and GB/s (1e9 B/s) over its interval, seconds left (-1: unknown).
  double ops_per_sec() const { return ops_per_sec_; }
  double gbps() const { return gbps_; }
  double eta_seconds() const { return eta_; }

 private:
  uint64_t total_, bytes_;
  uint64_t last_done_ = 0;
  double last_seconds_ = 0;
  double ops_per_sec_ = 0, gbps_ = 0, eta_ = -1;
};

}  // namespace gdrctl
