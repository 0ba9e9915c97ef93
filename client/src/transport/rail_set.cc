#include "client/src/transport/rail_set.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "client/src/transport/op_path.h"
#include "common/cuda/gpu.h"
#include "common/base/log.h"

namespace gdr {

namespace {

int64_t SteadyNowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

RailSet::RailSet(std::vector<Rail> rails, Options options)
    : rails_(std::move(rails)),
      options_(std::move(options)),
      counters_(new Counters[rails_.size()]),
      topology_(topo::ReadTopology(options_.sysfs_root)) {
  // Striping weights: the speed of each rail; an unknown speed counts as the slowest known
  // one, and equal weights when none is known.
  uint64_t slowest = std::numeric_limits<uint64_t>::max();
  for (const Rail& r : rails_) {
    if (r.speed_mbps > 0) slowest = std::min(slowest, r.speed_mbps);
  }
  if (slowest == std::numeric_limits<uint64_t>::max()) slowest = 1;
  for (const Rail& r : rails_) weights_.push_back(r.speed_mbps > 0 ? r.speed_mbps : slowest);
}

RailSet::~RailSet() { Close(); }

absl::StatusOr<std::function<void()>> RailSet::Register(const std::shared_ptr<Region>& region) {
  // Every rail registers the same memory; each one's registration chains its deregistration
  // into region->release, so all are withdrawn before the memory goes.
  std::vector<std::function<void()>> withdraws;
  std::vector<uint32_t> rkeys;
  for (const Rail& r : rails_) {
    absl::StatusOr<std::function<void()>> w = r.session->Register(region);
    if (!w.ok()) {
      for (auto& f : withdraws) {
        if (f) f();
      }
      return absl::Status(w.status().code(),
                          absl::StrCat("rail ", r.device, ": ", w.status().message()));
    }
    withdraws.push_back(std::move(*w));
    rkeys.push_back(region->rkey);
  }
  region->rail_rkeys = std::move(rkeys);
  region->rkey = region->rail_rkeys.front();
  if (region->gpu) {
    if (absl::StatusOr<cuda::GpuInfo> gpu = cuda::FindGpu(absl::StrCat(region->gpu->ordinal()));
        gpu.ok()) {
      region->near_rails = NearestTo(gpu->pci);
    }
  }
  if (region->near_rails.empty()) {
    for (int i = 0; i < rail_count(); ++i) region->near_rails.push_back(i);
  }
  return std::function<void()>([withdraws = std::move(withdraws)] {
    for (const auto& f : withdraws) {
      if (f) f();
    }
  });
}

std::vector<int> RailSet::NearestTo(const std::string& gpu_pci) const {
  if (!topology_.ok()) return {};
  std::vector<std::string> names;
  for (const Rail& r : rails_) names.push_back(r.device);
  absl::StatusOr<topo::NicChoice> choice = topo::ChooseNic(*topology_, gpu_pci, names);
  if (!choice.ok()) return {};  // the GPU is not on the tree: every rail is as near
  if (!choice->warning.empty()) {
    GDR_LOG(kWarning) << choice->warning;
  }
  // The rails as near as the best one (same relation and hops), in rail order.
  std::vector<int> nearest;
  for (const topo::NicRank& r : topo::RankNics(*topology_, gpu_pci, names)) {
    if (r.known() != choice->rank.known() ||
        (r.known() && (r.relation != choice->rank.relation || r.hops != choice->rank.hops))) {
      continue;
    }
    for (int i = 0; i < rail_count(); ++i) {
      if (rails_[static_cast<size_t>(i)].device == r.name) nearest.push_back(i);
    }
  }
  std::sort(nearest.begin(), nearest.end());
  return nearest;
}

absl::Status RailSet::CanServeGpuMemory() const {
  for (const Rail& r : rails_) {
    if (absl::Status s = r.session->CanServeGpuMemory(); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat("rail ", r.device, ": ", s.message()));
    }
  }
  return absl::OkStatus();
}

void RailSet::DescribeEndpoint(gdrstore::v1::RemoteBuffer* buffer) const {
  rails_.front().session->DescribeEndpoint(buffer);
}

void RailSet::DescribeEndpoint(const Region& region, int rail,
                               gdrstore::v1::RemoteBuffer* buffer) const {
  const size_t i = static_cast<size_t>(rail);
  buffer->set_rkey(i < region.rail_rkeys.size() ? region.rail_rkeys[i] : region.rkey);
  rails_[i].session->DescribeEndpoint(buffer);
}

void RailSet::Close() {
  for (const Rail& r : rails_) r.session->Close();
}

std::vector<int> RailSet::Usable(int64_t now_ns) const {
  std::vector<int> usable;
  for (int i = 0; i < rail_count(); ++i) {
    // A rail whose session has ended (the daemon closed it) carries nothing again.
    if (counters_[i].passed_over_until_ns.load(std::memory_order_relaxed) <= now_ns &&
        rails_[i].session->session_status().ok()) {
      usable.push_back(i);
    }
  }
  if (usable.empty()) {
    for (int i = 0; i < rail_count(); ++i) usable.push_back(i);
  }
  return usable;
}

std::vector<ClientTransport::Slice> RailSet::Plan(const Region& region, uint64_t length) {
  const std::vector<int> usable = Usable(SteadyNowNs());
  if (length < options_.slice_bytes || usable.size() == 1) {
    std::vector<int> near;
    for (int r : region.near_rails) {
      if (std::find(usable.begin(), usable.end(), r) != usable.end()) near.push_back(r);
    }
    const std::vector<int>& pick = near.empty() ? usable : near;
    const uint64_t turn = round_robin_.fetch_add(1, std::memory_order_relaxed);
    return {Slice{0, length, pick[turn % pick.size()]}};
  }
  // Each slice to the rail that, with it, would be least loaded for its weight: bytes per rail
  // end up in proportion to the weights.
  std::vector<Slice> slices;
  std::vector<uint64_t> load(rails_.size(), 0);
  for (uint64_t off = 0; off < length; off += options_.slice_bytes) {
    const uint64_t n = std::min<uint64_t>(options_.slice_bytes, length - off);
    int best = usable.front();
    double best_cost = 0;
    for (int r : usable) {
      const double cost = static_cast<double>(load[static_cast<size_t>(r)] + n) /
                          static_cast<double>(weights_[static_cast<size_t>(r)]);
      if (r == usable.front() || cost < best_cost) {
        best = r;
        best_cost = cost;
      }
    }
    load[static_cast<size_t>(best)] += n;
    slices.push_back(Slice{off, n, best});
  }
  return slices;
}

std::optional<int> RailSet::Reroute(int failed, const absl::Status& why) {
  const int64_t now = SteadyNowNs();
  counters_[failed].passed_over_until_ns.store(
      now + std::chrono::duration_cast<std::chrono::nanoseconds>(options_.retry).count(),
      std::memory_order_relaxed);
  std::optional<int> other;
  for (int r : Usable(now)) {
    if (r == failed) continue;
    if (!other || weights_[static_cast<size_t>(r)] > weights_[static_cast<size_t>(*other)]) {
      other = r;
    }
  }
  return other;
}

void RailSet::Record(int rail, uint64_t bytes, bool ok, bool resubmitted) {
  Counters& c = counters_[rail];
  if (ok) {
    c.ops.fetch_add(1, std::memory_order_relaxed);
    c.bytes.fetch_add(bytes, std::memory_order_relaxed);
    if (resubmitted) c.resubmitted.fetch_add(1, std::memory_order_relaxed);
  } else {
    c.errors.fetch_add(1, std::memory_order_relaxed);
  }
}

std::vector<gdrstore::RailStats> RailSet::rail_stats() const {
  const int64_t now = SteadyNowNs();
  std::vector<gdrstore::RailStats> out;
  for (int i = 0; i < rail_count(); ++i) {
    const Rail& r = rails_[static_cast<size_t>(i)];
    const Counters& c = counters_[i];
    gdrstore::RailStats s;
    s.device = r.device;
    s.daemon_rail = r.daemon_rail;
    s.speed_mbps = r.speed_mbps;
    s.ops = c.ops.load();
    s.bytes = c.bytes.load();
    s.errors = c.errors.load();
    s.resubmitted = c.resubmitted.load();
    s.passed_over = c.passed_over_until_ns.load() > now;
    out.push_back(std::move(s));
  }
  return out;
}

std::string RailSet::HopTo(const Region& region, int rail) const {
  if (rail < 0 || static_cast<size_t>(rail) >= rails_.size()) rail = 0;
  return Hop("rc", rails_[static_cast<size_t>(rail)].device, region);
}

void RailSet::FillInfo(gdrstore::TransportInfo* info) const {
  rails_.front().session->FillInfo(info);
  info->rails = rail_stats();
  info->rail_notes = options_.notes;
  std::string devices;
  for (const Rail& r : rails_) absl::StrAppend(&devices, devices.empty() ? "" : ", ", r.device);
  info->description = absl::StrCat(gdrstore::TransportName(info->kind), " over ", rails_.size(),
                                   " rails (", devices, ")");
}

absl::StatusOr<std::shared_ptr<ClientTransport>> RailSet::Attach(
    gdrstore::v1::GdrStore::Stub* stub) {
  std::vector<Rail> rails;
  for (const Rail& r : rails_) {
    absl::StatusOr<std::shared_ptr<ClientTransport>> session = r.session->Attach(stub);
    if (!session.ok()) {
      return absl::Status(session.status().code(),
                          absl::StrCat("rail ", r.device, ": ", session.status().message()));
    }
    if (*session == nullptr) {
      return absl::UnimplementedError(
          absl::StrCat("rail ", r.device, ": its session cannot be shared with another daemon"));
    }
    rails.push_back(Rail{std::move(*session), r.device, r.daemon_rail, r.speed_mbps});
  }
  return std::shared_ptr<ClientTransport>(std::make_shared<RailSet>(std::move(rails), options_));
}

}  // namespace gdr
