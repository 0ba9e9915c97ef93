// The daemon's rails: one VerbsCore per RDMA device named by --rdma-device, opened in order
// (or the one automatic device when none is named). rc spreads its connections over them, dc
// runs on the first; health, shutdown, GetInfo and GetStats see every rail through here. main
// owns the set; the transports borrow it and shut down before it stops.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "daemon/store/store.h"
#include "daemon/verbs_core/verbs_core.h"
#include "daemon/verbs_core/verbs_core_options.h"
#include "gdrstore/v1/gdrstore.pb.h"

namespace gdr {

class RailSet {
 public:
  // Opens every rail of `options` in order; `store` must outlive the set. The first rail that
  // does not open fails the whole set with its error (NOT_FOUND when the device is not there)
  // naming the rail and the devices present.
  static absl::StatusOr<std::unique_ptr<RailSet>> Open(const VerbsCoreOptions& options,
                                                       const Store& store);
  // Stops every rail; every transport on them must have shut down first.
  ~RailSet();

  // The rails in order; never empty. Thread-safe (the list is fixed once opened).
  size_t size() const { return rails_.size(); }
  VerbsCore* rail(size_t index) const { return rails_[index].get(); }
  VerbsCore* first() const { return rails_.front().get(); }
  // "rxe0, rxe1".
  std::string Names() const;

  // The rail a new connection goes on. `name` empty: the first rail that is serving
  // (UNAVAILABLE naming each rail's state when none is). Otherwise the rail of that device:
  // INVALID_ARGUMENT listing the rails when no rail has it, UNAVAILABLE naming it when it is
  // not serving.
  absl::StatusOr<VerbsCore*> Pick(absl::string_view name) const;

  // Fault injection: rail `name` takes no new work for `duration` (VerbsCore::ForceDown);
  // NOT_FOUND listing the rails when none has that name.
  absl::Status ForceDown(absl::string_view name, absl::Duration duration);

  // The first rail whose poller or port watch is stuck. A rail that is not serving is no
  // failure here.
  absl::Status CheckHealth(absl::Duration max_stall) const;
  // Stops every rail (idempotent).
  void Stop();
  // GetInfo: `rdma` from the first rail, and one `rails` entry per rail.
  void FillInfo(gdrstore::v1::GetInfoResponse* info) const;
  // GetStats: one `rails` entry per rail.
  void FillStats(gdrstore::v1::GetStatsResponse* stats) const;

 private:
  RailSet() = default;
  std::vector<std::unique_ptr<VerbsCore>> rails_;
};

}  // namespace gdr
