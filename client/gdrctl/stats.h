// `gdrctl stats`: prints gdrstored's GetStats (totals, per transport, per rail, per volume,
// admission), once or, with --watch, every interval with per-second rates from the previous
// sample.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "gdrstore/client.h"

namespace gdrctl {

struct StatsOptions {
  bool watch = false;
  absl::Duration interval = absl::Seconds(1);
  uint64_t count = 0;  // samples to print with --watch; 0 = until interrupted
  bool json = false;   // one JSON object per sample (proto3 JSON mapping)
  absl::Duration rpc_timeout = absl::Seconds(10);
};

// Runs until done (or forever with watch and count 0); the RPC status on failure.
absl::Status RunStats(gdrstore::Client& client, const StatsOptions& options);

// Human-readable rendering of one sample; `previous` (nullable) adds rates over `elapsed`.
std::string FormatStats(const gdrstore::v1::GetStatsResponse& now,
                        const gdrstore::v1::GetStatsResponse* previous, absl::Duration elapsed);

}  // namespace gdrctl
