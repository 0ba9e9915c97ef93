// What the verbs transports (rc, dc) of the daemon share on one RDMA device port: the device
// and its protection domain, the store's volumes registered once, and the one completion
// poller every QP and DCI reports to. main owns it; each verbs transport borrows it and is shut
// down before the core stops, so no transport repeats the teardown order.
#pragma once

#include <map>
#include <memory>
#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/verbs/completion_poller.h"
#include "common/verbs/memory_region.h"
#include "common/verbs/verbs_device.h"
#include "daemon/store/store.h"
#include "daemon/verbs_core/verbs_core_options.h"
#include "gdrstore/v1/gdrstore.pb.h"

namespace gdr {

class VerbsCore {
 public:
  // Opens the device (NOT_FOUND naming what was looked for and what exists), registers every
  // volume of `store` (which must outlive the core) and starts the poller.
  static absl::StatusOr<std::unique_ptr<VerbsCore>> Open(const VerbsCoreOptions& options,
                                                         const Store& store);
  // Stops the poller; every transport on the core must have shut down first.
  ~VerbsCore();

  const verbs::VerbsDevice& device() const { return *device_; }
  verbs::CompletionPoller* poller() const { return poller_.get(); }
  // The lkey of volume `volume`'s registration; FAILED_PRECONDITION when it has none.
  absl::StatusOr<uint32_t> VolumeLkey(absl::string_view volume) const;

  // UNAVAILABLE when the completion poller has not come round within `max_stall` (see
  // CompletionPoller::Healthy for the floor an idle poller needs).
  absl::Status CheckHealth(absl::Duration max_stall) const;
  // Stops the poller (idempotent): called once every transport on the core has shut down.
  void Stop();
  // GetInfo's device part: port, state, link layer, GID, MTU, poll mode, relaxed ordering.
  void FillInfo(gdrstore::v1::RdmaInfo* info) const;

 private:
  // How the volumes were registered: every one the same way, so the first one's outcome.
  std::string RelaxedOrderingDetail() const;
  explicit VerbsCore(VerbsCoreOptions options) : options_(std::move(options)) {}

  const VerbsCoreOptions options_;
  // Dependency order: device (context, PD), then the MRs, then the poller (CQ); destruction
  // runs the other way.
  std::unique_ptr<verbs::VerbsDevice> device_;
  std::map<std::string, std::unique_ptr<verbs::MemoryRegion>, std::less<>> volume_mrs_;
  std::unique_ptr<verbs::CompletionPoller> poller_;
};

}  // namespace gdr
