// Raw loopback TCP, the baseline of gdr_bench's bandwidth lines: the same bytes the product
// moves, sent with plain send/recv between threads of this process over sockets set up as a
// tcp link sets up its own (4 MiB SO_SNDBUF/SO_RCVBUF on both ends, TCP_NODELAY).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"

namespace gdrbench {

// The product's socket buffer size on both ends of a tcp link (TcpLinkOptions, TcpTarget).
inline constexpr int kProductSocketBuffer = 4 << 20;
// The largest frame a tcp link sends: the daemon cuts ops into chunks of this (its default
// TcpInitiatorOptions::chunk_bytes), each on one link.
inline constexpr uint64_t kProductChunk = 1 << 20;

// Page-aligned anonymous memory with every page touched, so no measurement pays first faults.
// data() is null when the mapping failed.
class TouchedMemory {
 public:
  explicit TouchedMemory(size_t bytes);
  ~TouchedMemory();
  TouchedMemory(const TouchedMemory&) = delete;
  TouchedMemory& operator=(const TouchedMemory&) = delete;
  char* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  char* data_ = nullptr;
  size_t size_;
};

// One connection: a sender thread writes `ops` buffers of `size` bytes from `src`, this thread
// reads them into `dst` (both at least `size` bytes). Returns GB/s (1e9 B/s) from the first
// send to the last byte received.
absl::StatusOr<double> RawTcpStream(uint64_t size, uint64_t ops, const TouchedMemory& src,
                                    const TouchedMemory& dst);

// Buffers for RawTcpStreams: one source and one destination of `size` bytes per pair, kept
// across calls so no sample allocates or faults.
struct StreamBuffers {
  // Fails with RESOURCE_EXHAUSTED when memory cannot be had.
  static absl::StatusOr<StreamBuffers> Create(size_t pairs, uint64_t size);
  // At least `pairs` pairs of at least `size` bytes: adds the missing pairs (replacing all of
  // them when `size` outgrows them). RESOURCE_EXHAUSTED when memory cannot be had.
  absl::Status Reserve(size_t pairs, uint64_t size);
  std::vector<std::unique_ptr<TouchedMemory>> src, dst;
};

// A raw-TCP baseline at the product's parallelism: the product's bytes spread over as many
// connections as the product had links, each sending `writes` buffers of `write_bytes`.
struct StreamPlan {
  uint32_t streams = 1;
  uint64_t write_bytes = 0;  // a link's frame: the op size, at most kProductChunk
  uint64_t writes = 0;       // per stream; streams x writes x write_bytes >= the product's bytes
  uint64_t bytes() const { return uint64_t{streams} * writes * write_bytes; }
};

// The streams a baseline runs for clients that ended a measurement with `links` tcp links
// each (TransportInfo::target.links): their sum, a client with none counted as one (it moved
// its bytes over some link), so there is always at least one stream per client and one in all.
uint32_t BaselineStreams(const std::vector<uint32_t>& links);

// `total_bytes` (> 0) over `streams` (> 0) connections in writes of min(op_size, kProductChunk)
// (op_size > 0), each connection carrying an equal share rounded up to whole writes.
StreamPlan PlanStreams(uint64_t total_bytes, uint32_t streams, uint64_t op_size);

struct StreamsResult {
  uint64_t bytes = 0;
  double seconds = 0;  // earliest first send to latest last receive, over all pairs
  double gbps = 0;     // bytes / seconds / 1e9
};

// `pairs` connections at once, each with its own sender thread and its own receiver thread,
// each moving `ops` x `size` bytes; all start together once every connection is up (set-up is
// not timed). Aggregated the way the scale group aggregates client processes.
absl::StatusOr<StreamsResult> RawTcpStreams(size_t pairs, uint64_t size, uint64_t ops,
                                            const StreamBuffers& buffers);

// RawTcpStreams as `plan` says, reserving the buffers it needs in `buffers` first (not timed).
absl::StatusOr<StreamsResult> RawTcpStreams(const StreamPlan& plan, StreamBuffers* buffers);

}  // namespace gdrbench
