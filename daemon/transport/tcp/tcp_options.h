// The tcp transport's settings as plain values: what the daemon's configuration fills in and
// reload compares, kept apart from the transport's code so neither has to include the other.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/time/time.h"
#include "common/base/cidr.h"

namespace gdr {

struct TcpLinkOptions {
  // Bounds the connect, and then separately the target's proof (HELLO, then PROOF).
  absl::Duration connect_timeout = absl::Seconds(3);
  uint32_t max_chunk_bytes = 1 << 20;
  int socket_buffer_bytes = 4 << 20;
  // While chunks are outstanding, the receiver polls the socket this long before it sleeps in
  // recv: an answer that comes back within it skips a thread wake-up (small-op latency), at the
  // price of a core spinning that long per wait. 0: always sleep.
  absl::Duration poll_spin = absl::ZeroDuration();
};

struct TcpInitiatorOptions {
  uint32_t max_links = 64;          // links in total, all destinations
  // A destination's share: the links it may open whoever else is there, and keeps when the
  // pool is contended (links of destinations above their share are taken for it first).
  uint32_t links_per_target = 2;
  // Links one destination may hold while the pool has room and nobody waits: a lone client
  // with many bytes in flight gets them, and gives those past its share back first, without
  // waiting for a turn, when another client needs a link (>= links_per_target).
  uint32_t max_links_per_target = 16;
  uint64_t chunk_bytes = 1 << 20;   // split size; <= tcpwire::kMaxPayload
  // A Write of at most this many bytes, to a client that takes answers inline
  // (TcpEndpoint.inline_max), is answered with its bytes instead of over a link: a 4 KiB op
  // otherwise pays the link's round trip (two thread wake-ups) on top of its RPC
  // (docs/benchmarks.md, issue 45). 0: never.
  uint32_t inline_max = 16 << 10;
  static constexpr uint32_t kMaxInline = 64 << 10;
  absl::Duration op_timeout = absl::Seconds(30);     // no response for this long: link fails
  absl::Duration idle_timeout = absl::Seconds(60);   // idle links are closed after this
  // A destination's links past its share are closed sooner once idle (no more than
  // idle_timeout): a burst's extra sockets and threads go back within seconds, while the gaps
  // of one load (the next file, the next batch of ops) keep them.
  absl::Duration extra_idle_timeout = absl::Seconds(2);
  // When more destinations want links than the pool holds: a link serves one destination for
  // at least `turn` before it may be handed to a waiting one (so links are not thrashed), and
  // a link whose turn is over gets `handover_timeout` to finish its ops before they are failed
  // (so a stuck client cannot hold a link others wait for).
  absl::Duration turn = absl::Milliseconds(200);
  absl::Duration handover_timeout = absl::Seconds(2);
  // Targets a caller may name besides its own address (--tcp-target-allow).
  std::vector<Cidr> target_allow;
  TcpLinkOptions link;
};

}  // namespace gdr
