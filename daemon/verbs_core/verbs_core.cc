#include "daemon/verbs_core/verbs_core.h"

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "common/verbs/verbs_status.h"

namespace gdr {

absl::StatusOr<std::unique_ptr<VerbsCore>> VerbsCore::Open(const VerbsCoreOptions& options,
                                                           const Store& store) {
  auto core = std::unique_ptr<VerbsCore>(new VerbsCore(options));
  GDR_ASSIGN_OR_RETURN(core->device_, verbs::VerbsDevice::Open(options.device));
  for (const auto& [name, volume] : store.volumes()) {
    absl::StatusOr<std::unique_ptr<verbs::MemoryRegion>> mr = verbs::MemoryRegion::Register(
        core->device_->pd(), volume->data(), volume->size(), IBV_ACCESS_LOCAL_WRITE);
    if (!mr.ok()) {
      return absl::Status(mr.status().code(),
                          absl::StrCat("registering volume ", name, ": ", mr.status().message()));
    }
    core->volume_mrs_.emplace(name, std::move(*mr));
  }
  GDR_ASSIGN_OR_RETURN(core->poller_,
                       verbs::CompletionPoller::Create(core->device_->context(), options.poller,
                                                       core->device_->name()));
  GDR_LOG(kInfo) << "verbs core: " << core->device_->Describe() << "; "
                 << core->volume_mrs_.size() << " volumes registered (relaxed ordering "
                 << core->RelaxedOrderingDetail()
                 << "); poller "
                 << verbs::PollModeName(options.poller.mode);
  return core;
}

VerbsCore::~VerbsCore() { Stop(); }

void VerbsCore::Stop() {
  if (poller_) poller_->Stop();
}

absl::StatusOr<uint32_t> VerbsCore::VolumeLkey(absl::string_view volume) const {
  auto it = volume_mrs_.find(volume);
  if (it == volume_mrs_.end()) {
    return absl::FailedPreconditionError(
        absl::StrCat("volume '", volume, "' is not registered with ", device_->name()));
  }
  return it->second->lkey();
}

absl::Status VerbsCore::CheckHealth(absl::Duration max_stall) const {
  if (poller_->Healthy(max_stall)) return absl::OkStatus();
  return absl::UnavailableError(absl::StrCat("the completion poller of ", device_->name(),
                                             " has not polled its CQ for ",
                                             absl::FormatDuration(poller_->since_last_loop())));
}

void VerbsCore::FillInfo(gdrstore::v1::RdmaInfo* info) const {
  const verbs::PortInfo& p = device_->port();
  info->set_device(device_->name());
  info->set_port(p.port);
  info->set_port_state(verbs::PortStateName(device_->QueryPortState()));
  info->set_link_layer(device_->is_roce() ? "Ethernet" : "InfiniBand");
  info->set_gid_index(static_cast<uint32_t>(p.gid_index));
  info->set_gid(std::string(reinterpret_cast<const char*>(p.gid.data()), 16));
  info->set_gid_address(verbs::DescribeGid(p.gid));
  info->set_gid_type(p.gid_type);
  info->set_lid(p.lid);
  info->set_mtu(verbs::MtuBytes(p.active_mtu));
  info->set_max_msg_bytes(p.max_msg_size);
  info->set_poll_mode(verbs::PollModeName(options_.poller.mode));
  if (!volume_mrs_.empty()) info->set_relaxed_ordering(RelaxedOrderingDetail());
}

std::string VerbsCore::RelaxedOrderingDetail() const {
  if (volume_mrs_.empty()) return "n/a";
  return volume_mrs_.begin()->second->relaxed_ordering().detail;
}

}  // namespace gdr
