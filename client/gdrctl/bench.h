// The op loop behind `gdrctl bench` and bench/: keeps `qd` ops in flight (a daemon's Stream RPC,
// or any Store's SubmitAsync) until `iterations` have completed, recording each op's latency.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/base/json.h"
#include "gdrstore/client.h"
#include "gdrstore/store.h"

namespace gdrctl {

struct BenchOptions {
  gdrstore::OpKind kind = gdrstore::OpKind::kWrite;
  std::string volume = "vol0";
  uint64_t offset = 0;        // first extent's offset
  uint64_t span = 0;          // extents cycle through [offset, offset+span); 0 = one extent
  uint64_t size = 4096;
  uint64_t iterations = 1000;
  uint32_t qd = 1;
  bool unary = false;  // a daemon's: one unary RPC per op instead of its Stream RPC
  // The Stream's ops per request message at most (StreamOptions::max_ops_per_message; issue
  // 45's split of the resubmitted batch); 0: no cap of its own, the default. Read by
  // RunBench(Client&, ...).
  uint32_t stream_batch = 0;
  // The Stream's calls (StreamOptions::calls); 0: the Client's (ClientOptions::stream_calls).
  // Read by RunBench(Client&, ...).
  uint32_t stream_calls = 0;
  std::string transport = "tcp";  // the client's transport, for the JSON line
  // Registered memory for the ops (slot i at i*size; needs min(qd, iterations)*size bytes).
  // Null: RunBench allocates a fresh buffer, so first touches of its pages are timed too.
  // Not owned; must outlive the call.
  const gdrstore::Buffer* buffer = nullptr;
  // Called about once a second with ops done so far (for a progress line); may be empty.
  std::function<void(uint64_t done, double seconds)> progress;
};

struct BenchResult {
  uint64_t ops = 0;
  uint64_t bytes = 0;
  double seconds = 0;
  double gbps = 0;          // 1e9 bytes per second
  double ops_per_sec = 0;
  double p50_us = 0, p99_us = 0, max_us = 0, mean_us = 0;
  // p50 of the daemon's own time per op (OpResult::service_ns: admitted -> answered), the part
  // of p50_us spent in the daemon rather than in RPCs; 0 from a cluster.
  double service_p50_us = 0;
  std::string path;  // the first op's (OpResult::path); ops on one buffer go one way
  // Request messages the Stream wrote during the loop (all of this process's Streams); 0 for
  // unary calls.
  uint64_t stream_messages = 0;
};

// Runs the loop on `store` (a daemon's Client or a cluster), each op its SubmitAsync, or on
// `stream` when not null (not owned; opened on the Client that `store` is). The first failed op
// stops it and is returned; options.unary is not read.
absl::StatusOr<BenchResult> RunBench(gdrstore::Store& store, gdrstore::OpStream* stream,
                                     const BenchOptions& options);
// On one daemon: over a Stream opened on `client` (with options.stream_batch) and closed at
// the end, or unary RPCs with options.unary.
absl::StatusOr<BenchResult> RunBench(gdrstore::Client& client, const BenchOptions& options);

// The JSON object of `gdrctl bench --json`: op, transport, rpc, size, qd, ops, bytes, seconds,
// gbps, ops_per_sec, lat_us {p50, p99, max, mean} and path; over a Stream also stream_batch,
// stream_calls and stream_messages.
gdr::json::Json BenchResultJson(const BenchOptions& o, const BenchResult& r);

}  // namespace gdrctl
