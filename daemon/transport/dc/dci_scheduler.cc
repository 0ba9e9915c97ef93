#include "daemon/transport/dc/dci_scheduler.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/grpc/grpc_status.h"

namespace gdr::dc {

DciScheduler::DciScheduler(uint32_t dci_count, uint32_t sq_depth, uint8_t log_streams,
                           uint32_t max_spread)
    : sq_depth_(std::max<uint32_t>(sq_depth, 1)),
      streams_per_dci_(1u << std::min<uint8_t>(log_streams, 15)),
      max_spread_(std::max<uint32_t>(max_spread, 1)),
      dcis_(dci_count) {
  for (Dci& d : dcis_) d.streams.resize(streams_per_dci_);
}

int DciScheduler::PickStream(uint32_t dci) const {
  int best = -1;
  for (uint32_t s = 0; s < streams_per_dci_; ++s) {
    const Stream& st = dcis_[dci].streams[s];
    if (st.error) continue;
    if (best < 0 || st.dests < dcis_[dci].streams[best].dests ||
        (st.dests == dcis_[dci].streams[best].dests &&
         st.outstanding < dcis_[dci].streams[best].outstanding)) {
      best = static_cast<int>(s);
    }
  }
  return best;
}

std::vector<uint32_t> DciScheduler::ByLoad(int skip) const {
  std::vector<uint32_t> out;
  for (uint32_t i = 0; i < dcis_.size(); ++i) {
    if (static_cast<int>(i) == skip || !Usable(i) || Room(i) == 0 || PickStream(i) < 0) continue;
    out.push_back(i);
  }
  std::stable_sort(out.begin(), out.end(), [&](uint32_t a, uint32_t b) {
    if (dcis_[a].outstanding != dcis_[b].outstanding) {
      return dcis_[a].outstanding < dcis_[b].outstanding;
    }
    return dcis_[a].dests < dcis_[b].dests;
  });
  return out;
}

absl::StatusOr<std::vector<Assignment>> DciScheduler::Reserve(const DestKey& dest, uint32_t n) {
  std::vector<Assignment> out;
  if (n == 0) return out;
  if (ready_dcis() == 0) {
    return absl::UnavailableError(absl::StrCat(
        "no DC initiator is ready (", dcis_.size(), " in the pool, all in error or failed)"));
  }
  auto it = dests_.find(dest);
  // The destination keeps its home while it has work in flight and the home can still take it.
  int home = -1;
  int home_stream = -1;
  if (it != dests_.end() && Usable(it->second.home) &&
      !dcis_[it->second.home].streams[it->second.stream].error) {
    home = static_cast<int>(it->second.home);
    home_stream = it->second.stream;
  }
  std::vector<uint32_t> others = ByLoad(home);
  bool rehome = false;
  if (home < 0) {
    if (others.empty()) {
      return NotAdmittedError(absl::StrCat(
          "every ready DC initiator's send queue is full (", ready_dcis(), " DCIs x ", sq_depth_,
          " work requests); retry later"));
    }
    home = static_cast<int>(others.front());
    home_stream = PickStream(home);
    others.erase(others.begin());
    rehome = true;
  }
  // Candidates: home first (if it has room), then the least loaded others.
  std::vector<uint32_t> cand;
  if (Room(home) > 0) cand.push_back(static_cast<uint32_t>(home));
  cand.insert(cand.end(), others.begin(), others.end());
  // Deal the work requests round-robin over the first `spread` candidates; a candidate that
  // fills up drops out and the next one joins, so the op fits whenever the pool has room.
  const size_t spread = std::min<size_t>({max_spread_, n, cand.size()});
  std::vector<uint32_t> counts(cand.size(), 0);
  size_t active_end = spread;
  uint32_t left = n;
  while (left > 0) {
    bool placed = false;
    for (size_t i = 0; i < active_end && left > 0; ++i) {
      if (counts[i] < Room(cand[i])) {
        ++counts[i];
        --left;
        placed = true;
      }
    }
    if (!placed) {
      if (active_end == cand.size()) break;
      ++active_end;
    }
  }
  if (left > 0) {
    return NotAdmittedError(absl::StrCat(
        "the DC initiators' send queues have room for ", n - left, " of the op's ", n,
        " work requests; retry later"));
  }
  // Commit.
  if (it == dests_.end()) {
    it = dests_.emplace(dest, Dest{}).first;
  } else if (rehome) {
    Dci& old = dcis_[it->second.home];
    --old.dests;
    --old.streams[it->second.stream].dests;
  }
  if (it->second.inflight == 0 || rehome) {
    it->second.home = static_cast<uint32_t>(home);
    it->second.stream = static_cast<uint16_t>(home_stream);
    ++dcis_[home].dests;
    ++dcis_[home].streams[home_stream].dests;
  }
  for (size_t i = 0; i < cand.size(); ++i) {
    if (counts[i] == 0) continue;
    const uint32_t d = cand[i];
    const uint16_t s = static_cast<int>(d) == home ? static_cast<uint16_t>(home_stream)
                                                  : static_cast<uint16_t>(PickStream(d));
    dcis_[d].outstanding += counts[i];
    dcis_[d].streams[s].outstanding += counts[i];
    out.push_back(Assignment{d, s, counts[i]});
  }
  it->second.inflight += n;
  return out;
}

void DciScheduler::Release(const DestKey& dest, uint32_t dci, uint16_t stream) {
  Dci& d = dcis_[dci];
  if (d.outstanding > 0) --d.outstanding;
  if (d.streams[stream].outstanding > 0) --d.streams[stream].outstanding;
  auto it = dests_.find(dest);
  if (it == dests_.end()) return;
  if (--it->second.inflight == 0) {
    Dci& home = dcis_[it->second.home];
    --home.dests;
    --home.streams[it->second.stream].dests;
    dests_.erase(it);
  }
}

void DciScheduler::MarkDciError(uint32_t dci) {
  if (dcis_[dci].state == DciState::kReady) dcis_[dci].state = DciState::kError;
}

void DciScheduler::MarkDciReady(uint32_t dci) {
  dcis_[dci].state = DciState::kReady;
  for (Stream& s : dcis_[dci].streams) s.error = false;  // a QP reset clears every stream
}

void DciScheduler::MarkDciFailed(uint32_t dci) { dcis_[dci].state = DciState::kFailed; }

void DciScheduler::MarkStreamError(uint32_t dci, uint16_t stream) {
  dcis_[dci].streams[stream].error = true;
}

void DciScheduler::MarkStreamReady(uint32_t dci, uint16_t stream) {
  dcis_[dci].streams[stream].error = false;
}

uint32_t DciScheduler::ready_dcis() const {
  uint32_t n = 0;
  for (uint32_t i = 0; i < dcis_.size(); ++i) n += Usable(i) ? 1 : 0;
  return n;
}

uint32_t DciScheduler::total_outstanding() const {
  uint32_t n = 0;
  for (const Dci& d : dcis_) n += d.outstanding;
  return n;
}

int DciScheduler::home_of(const DestKey& dest) const {
  auto it = dests_.find(dest);
  return it == dests_.end() ? -1 : static_cast<int>(it->second.home);
}

}  // namespace gdr::dc
