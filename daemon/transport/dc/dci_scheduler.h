// Which DCI (and which stream channel of it) carries each work request, and how many send-queue
// slots each DCI has taken. Pure bookkeeping, no verbs: the DcInitiator holds it under its
// lock, asks it where to post, tells it about completions, errors and recoveries.
//
// Policy:
//  - A destination (DCT number + GID/LID) keeps its "home" DCI while it has work in flight:
//    a DCI switching targets must reconnect, and one DCI keeps one destination's work in order.
//  - A destination with nothing in flight goes to the least-loaded ready DCI (fewest
//    outstanding work requests, then fewest destinations, then lowest index).
//  - The chunks of one large op spread over up to `max_spread` DCIs (home first), so one big
//    transfer is not limited to one DCI's connection.
//  - On a DCI with stream channels, each destination gets the least-used ready stream, so an
//    error from one destination flushes only its own stream.
//  - A DCI (or stream) in error takes no new work until it drained and was recovered.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "daemon/transport/dc/dc_endpoint.h"

namespace gdr::dc {

struct Assignment {
  uint32_t dci = 0;
  uint16_t stream = 0;
  uint32_t count = 0;  // work requests placed there
};

class DciScheduler {
 public:
  enum class DciState {
    kReady,   // takes new work
    kError,   // in ERR (or being drained): no new work; recover once outstanding() == 0
    kFailed,  // recovery failed: out of the pool for good
  };

  // `dci_count` DCIs of `sq_depth` send slots and 2^`log_streams` streams each.
  DciScheduler(uint32_t dci_count, uint32_t sq_depth, uint8_t log_streams, uint32_t max_spread);

  // Places `n` work requests of one op to `dest`, all or nothing, and reserves their slots.
  // The returned assignments list the DCIs in the order the op's chunks should be dealt out
  // (round-robin). RESOURCE_EXHAUSTED when the ready DCIs lack `n` free slots; UNAVAILABLE
  // when no DCI is ready at all (every one in error or failed).
  absl::StatusOr<std::vector<Assignment>> Reserve(const DestKey& dest, uint32_t n);

  // One work request to `dest` on (`dci`, `stream`) completed, whatever its status.
  void Release(const DestKey& dest, uint32_t dci, uint16_t stream);

  void MarkDciError(uint32_t dci);
  void MarkDciReady(uint32_t dci);   // after a successful recovery
  void MarkDciFailed(uint32_t dci);  // recovery failed
  void MarkStreamError(uint32_t dci, uint16_t stream);
  void MarkStreamReady(uint32_t dci, uint16_t stream);

  DciState state(uint32_t dci) const { return dcis_[dci].state; }
  bool stream_in_error(uint32_t dci, uint16_t stream) const {
    return dcis_[dci].streams[stream].error;
  }
  uint32_t outstanding(uint32_t dci) const { return dcis_[dci].outstanding; }
  uint32_t stream_outstanding(uint32_t dci, uint16_t stream) const {
    return dcis_[dci].streams[stream].outstanding;
  }
  uint32_t dci_count() const { return static_cast<uint32_t>(dcis_.size()); }
  uint32_t streams_per_dci() const { return streams_per_dci_; }
  uint32_t ready_dcis() const;
  uint32_t total_outstanding() const;
  // The home DCI of `dest` while it has work in flight; -1 otherwise.
  int home_of(const DestKey& dest) const;
  size_t destinations() const { return dests_.size(); }

 private:
  struct Stream {
    uint32_t outstanding = 0;
    uint32_t dests = 0;  // destinations homed on this stream
    bool error = false;
  };
  struct Dci {
    DciState state = DciState::kReady;
    uint32_t outstanding = 0;
    uint32_t dests = 0;
    std::vector<Stream> streams;
  };
  struct Dest {
    uint32_t home = 0;
    uint16_t stream = 0;
    uint32_t inflight = 0;  // work requests in flight, on any DCI
  };

  bool Usable(uint32_t dci) const { return dcis_[dci].state == DciState::kReady; }
  uint32_t Room(uint32_t dci) const { return sq_depth_ - dcis_[dci].outstanding; }
  // Least-used stream of `dci` not in error; -1 when every stream is in error.
  int PickStream(uint32_t dci) const;
  // Ready DCIs with room, least loaded first, excluding `skip`.
  std::vector<uint32_t> ByLoad(int skip) const;

  const uint32_t sq_depth_;
  const uint32_t streams_per_dci_;
  const uint32_t max_spread_;
  std::vector<Dci> dcis_;
  absl::flat_hash_map<DestKey, Dest> dests_;
};

}  // namespace gdr::dc
