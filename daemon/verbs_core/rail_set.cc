#include "daemon/verbs_core/rail_set.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/status_macros.h"
#include "common/verbs/verbs_device.h"

namespace gdr {

namespace v1 = gdrstore::v1;

absl::StatusOr<std::unique_ptr<RailSet>> RailSet::Open(const VerbsCoreOptions& options,
                                                       const Store& store) {
  auto set = std::unique_ptr<RailSet>(new RailSet());
  for (uint32_t i = 0; i < options.rails.size(); ++i) {
    absl::StatusOr<std::unique_ptr<VerbsCore>> rail = VerbsCore::Open(options, i, store);
    if (!rail.ok()) {
      // The automatic device's error already says what was looked for and what exists; a named
      // rail's says which rail, and what exists when the open's own message does not.
      if (options.rails[i].empty()) return rail.status();
      const bool lists_devices = absl::IsNotFound(rail.status());
      return absl::Status(
          rail.status().code(),
          absl::StrCat("rail ", i, " (", options.rails[i], ", of --rdma-device ",
                       absl::StrJoin(options.rails, ","), "): ", rail.status().message(),
                       lists_devices ? ""
                                     : absl::StrCat(" (RDMA devices: ",
                                                    verbs::DescribeAllDevices(
                                                        options.device.sysfs_root),
                                                    ")")));
    }
    set->rails_.push_back(std::move(*rail));
  }
  if (set->rails_.empty()) return absl::InvalidArgumentError("no rail configured");
  return set;
}

RailSet::~RailSet() { Stop(); }

absl::Status RailSet::ForceDown(absl::string_view name, absl::Duration duration) {
  for (const auto& r : rails_) {
    if (r->name() != name) continue;
    r->ForceDown(absl::Now() + duration);
    return absl::OkStatus();
  }
  return absl::NotFoundError(absl::StrCat("no rail '", name, "' (rails: ", Names(), ")"));
}

std::string RailSet::Names() const {
  std::vector<std::string> names;
  for (const auto& r : rails_) names.push_back(r->name());
  return absl::StrJoin(names, ", ");
}

absl::StatusOr<VerbsCore*> RailSet::Pick(absl::string_view name) const {
  if (name.empty()) {
    std::vector<std::string> down;
    for (const auto& r : rails_) {
      if (r->serving()) return r.get();
      down.push_back(std::string(r->NotServing().message()));
    }
    return absl::UnavailableError(
        absl::StrCat("no rail of this daemon is serving: ", absl::StrJoin(down, "; ")));
  }
  for (const auto& r : rails_) {
    if (r->name() != name) continue;
    if (!r->serving()) return r->NotServing();
    return r.get();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("rail '", name, "' is not one of this daemon's (rails: ", Names(), ")"));
}

absl::Status RailSet::CheckHealth(absl::Duration max_stall) const {
  for (const auto& r : rails_) GDR_RETURN_IF_ERROR(r->CheckHealth(max_stall));
  return absl::OkStatus();
}

void RailSet::Stop() {
  for (const auto& r : rails_) r->Stop();
}

void RailSet::FillInfo(v1::GetInfoResponse* info) const {
  rails_.front()->FillInfo(info->mutable_rdma());
  for (const auto& r : rails_) r->FillRailInfo(info->add_rails());
}

void RailSet::FillStats(v1::GetStatsResponse* stats) const {
  for (const auto& r : rails_) r->FillRailStats(stats->add_rails());
}

}  // namespace gdr
