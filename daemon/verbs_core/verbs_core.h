// One rail of the daemon: an RDMA device port with what the verbs transports (rc, dc) share on
// it: the device and its protection domain, the store's volumes registered once, the one
// completion poller every QP and DCI of the rail reports to (pinned near the NIC), a watch on
// the port (a rail whose port is not ACTIVE takes no new work until it is again) and the rail's
// counters. The RailSet owns the rails; each verbs transport borrows them and is shut down
// before they stop, so no transport repeats the teardown order.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/verbs/completion_poller.h"
#include "common/verbs/memory_region.h"
#include "common/verbs/port_watch.h"
#include "common/verbs/verbs_device.h"
#include "daemon/store/store.h"
#include "daemon/verbs_core/verbs_core_options.h"
#include "gdrstore/v1/gdrstore.pb.h"

namespace gdr {

class VerbsCore {
 public:
  // Opens rail `index` of `options` (the device options.rails[index], "" for the automatic
  // one; NOT_FOUND naming what was looked for and what exists), registers every volume of
  // `store` (which must outlive the core), starts the poller and the port watch.
  static absl::StatusOr<std::unique_ptr<VerbsCore>> Open(const VerbsCoreOptions& options,
                                                         uint32_t index, const Store& store);
  // Stops the poller and the port watch; every transport on the core must have shut down first.
  ~VerbsCore();

  uint32_t index() const { return index_; }
  // The rail's name: its device's ("mlx5_0"), as GetInfo rails[].device and RcHello.rail say.
  const std::string& name() const { return device_->name(); }
  const verbs::VerbsDevice& device() const { return *device_; }
  verbs::CompletionPoller* poller() const { return poller_.get(); }
  // The lkey of `volume`'s registration with this rail; FAILED_PRECONDITION when it has none.
  absl::StatusOr<uint32_t> VolumeLkey(const Volume& volume) const;
  // PCI address of the device ("0000:3b:00.0") and its NUMA node; "" and -1 where sysfs does
  // not say (a software device such as rxe).
  const std::string& pci() const { return pci_; }
  int numa_node() const { return numa_node_; }

  // Whether the rail takes new work: its port is ACTIVE as last seen and no injected fault
  // holds it down. Thread-safe.
  bool serving() const { return watch_->active() && !forced_down(); }
  // Fault injection: the rail takes no new work until `until`, as if its port had left ACTIVE
  // (work already posted runs on). Counted as a down event, and an up event when it ends.
  void ForceDown(absl::Time until);
  // UNAVAILABLE "rail rxe1 port 1 is DOWN: it takes no new work until its port is ACTIVE
  // again" (plus `detail` when given), for work refused or failed on a rail that is not serving.
  absl::Status NotServing(absl::string_view detail = "") const;

  // Rail accounting, thread-safe. A refused op (the rail was not serving) counts `refused`.
  void CountRefused() { refused_.fetch_add(1, std::memory_order_relaxed); }
  // Counts an op that ended on the rail (ops and bytes when `status` is OK, errors otherwise)
  // and returns the status to answer with: a failure while the rail is not serving becomes
  // NotServing(the failure), so the caller can tell a rail outage from a bad request.
  absl::Status FinishOp(uint64_t bytes, absl::Status status);

  // UNAVAILABLE when the completion poller or the port watch has not come round within
  // `max_stall` (see CompletionPoller::Healthy for the floor an idle poller needs). A port that
  // is down is no stall: the daemon keeps running on its other rails.
  absl::Status CheckHealth(absl::Duration max_stall) const;
  // Stops the port watch and the poller (idempotent): once every transport has shut down.
  void Stop();
  // GetInfo's device part: port, state, link layer, GID, MTU, poll mode, relaxed ordering.
  void FillInfo(gdrstore::v1::RdmaInfo* info) const;
  // GetInfo rails[index]: the port as queried now (state, speed), serving, placement.
  void FillRailInfo(gdrstore::v1::RailInfo* info) const;
  // GetStats rails[index]: the counters.
  void FillRailStats(gdrstore::v1::RailStats* stats) const;

 private:
  // How the volumes were registered: every one the same way, so the first one's outcome.
  std::string RelaxedOrderingDetail() const;
  // The port watch's report: logs and counts the change.
  void OnPortChange(bool active, ibv_port_state state);
  // The CPUs of the device's NUMA node, and a line saying why there are none.
  std::vector<int> PollerCpus(const std::string& sysfs_root, std::string* why_not) const;
  VerbsCore(VerbsCoreOptions options, uint32_t index)
      : options_(std::move(options)), index_(index) {}

  const VerbsCoreOptions options_;
  const uint32_t index_;
  std::string pci_;
  int numa_node_ = -1;
  std::atomic<uint64_t> ops_{0};
  std::atomic<uint64_t> bytes_{0};
  std::atomic<uint64_t> errors_{0};
  std::atomic<uint64_t> down_events_{0};
  mutable std::atomic<uint64_t> up_events_{0};  // also counted by forced_down()
  std::atomic<uint64_t> refused_{0};
  // ForceDown's end (unix ns); 0 when none. Its up event is counted by whoever sees it over.
  mutable std::atomic<int64_t> forced_until_ns_{0};
  bool forced_down() const;
  // Registers `volume` on this rail and attaches the MR to it (it lives while the volume does,
  // or until the core goes: ~VerbsCore detaches it first).
  absl::Status RegisterVolume(const Volume& volume);

  // Dependency order: device (context, PD), then the MRs (attached to the volumes), then the
  // poller (CQ), then the watch (the context's async events); destruction runs the other way.
  std::unique_ptr<verbs::VerbsDevice> device_;
  const Store* store_ = nullptr;
  uint64_t preparer_ = 0;  // the store's hook registering volumes added later
  std::string relaxed_ordering_;  // as the first registration found it
  std::unique_ptr<verbs::CompletionPoller> poller_;
  std::unique_ptr<verbs::PortWatch> watch_;
};

}  // namespace gdr
