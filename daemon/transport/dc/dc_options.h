// The dc transport's settings as plain values: what the daemon's configuration fills in and
// reload compares, kept apart from the transport's code so neither has to include the other.
#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/time/time.h"

namespace gdr::dc {

// How DCIs are created and taken INIT -> RTR -> RTS. The device fills in what comes from the
// port (pkey index 0, port number, path MTU).
struct DciSettings {
  uint32_t sq_depth = 128;       // send WRs per DCI (at most max_qp_wr / 2: see DcInitiator)
  uint8_t max_rd_atomic = 16;    // RDMA READs in flight per DCI (capped at the device's)
  uint32_t mtu = 0;              // path MTU in bytes; 0: the port's active MTU
  uint8_t timeout = 14;          // local ACK timeout: 4.096 us * 2^timeout per try
  uint8_t retry_cnt = 7;
  uint8_t rnr_retry = 7;
  uint8_t log_streams = 0;       // DCI stream channels: 2^log_streams; 0 creates no streams
  uint8_t log_errored = 0;       // errored streams tolerated before the DCI moves to ERR
};

// Routing of the address handles: RoCEv2 across routers needs a hop limit above 1.
struct AhSettings {
  uint8_t hop_limit = 64;
  uint8_t traffic_class = 0;
  uint8_t service_level = 0;
  uint32_t flow_label = 0;
};

struct DcInitiatorOptions {
  uint32_t dci_count = 16;   // bounded by the device's max_qp
  // Path MTU of the DCIs in bytes (--dc-mtu); 0: the port's active MTU. Every client's DCT
  // must use the same (READ responses are cut at the responder's), so GetInfo advertises it.
  uint32_t mtu = 0;
  DciSettings dci;           // sq_depth / max_rd_atomic are capped at the device's caps
  bool use_streams = true;   // DCI stream channels where the device reports them
  uint8_t log_streams = 4;   // wanted 2^n streams per DCI (capped at the caps)
  uint8_t log_errored = 2;   // wanted errored streams before the DCI fails (capped)
  AhSettings ah;
  size_t ah_cache_size = 1024;
  uint64_t chunk_bytes = 1 << 20;  // further capped at the port's max message size
  uint64_t max_op_bytes = 64ull << 20;  // the largest op must fit the pool's send queues
  uint32_t max_spread = 4;   // DCIs one op's chunks may spread over
  uint32_t max_attempts = 3; // posts of one chunk when its DCI failed under it (flushes)
  absl::Duration shutdown_wait = absl::Seconds(10);
};

struct DcTransportConfig {
  // kAuto: offered when the device can; kOn: a device that cannot is fatal at start; kOff.
  enum class Mode { kAuto, kOn, kOff };
  Mode mode = Mode::kAuto;
  DcInitiatorOptions options;
};

}  // namespace gdr::dc
