#include "daemon/verbs_core/verbs_core.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/base/log.h"
#include "common/base/status_macros.h"
#include "common/topo/numa_cpus.h"
#include "common/topo/pci_topology.h"
#include "common/verbs/port_speed.h"
#include "common/verbs/verbs_status.h"

namespace gdr {

namespace v1 = gdrstore::v1;

namespace {

// A volume's registration with one rail, kept by the volume.
struct VolumeMr final : Volume::Attachment {
  explicit VolumeMr(std::unique_ptr<verbs::MemoryRegion> m) : mr(std::move(m)) {}
  std::unique_ptr<verbs::MemoryRegion> mr;
};

}  // namespace

absl::Status VerbsCore::RegisterVolume(const Volume& volume) {
  // A read-only volume is only ever a source (gets): the NIC reads it, so no local write.
  absl::StatusOr<std::unique_ptr<verbs::MemoryRegion>> mr = verbs::MemoryRegion::Register(
      device_->pd(), volume.data(), volume.size(), volume.read_only() ? 0 : IBV_ACCESS_LOCAL_WRITE);
  if (!mr.ok()) {
    return absl::Status(mr.status().code(), absl::StrCat("rail ", name(), ": registering volume ",
                                                         volume.name(), ": ",
                                                         mr.status().message()));
  }
  if (relaxed_ordering_.empty()) relaxed_ordering_ = (*mr)->relaxed_ordering().detail;
  volume.Attach(this, std::make_unique<VolumeMr>(*std::move(mr)));
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<VerbsCore>> VerbsCore::Open(const VerbsCoreOptions& options,
                                                           uint32_t index, const Store& store) {
  if (index >= options.rails.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("rail ", index, " is not configured (", options.rails.size(), " rails)"));
  }
  auto core = std::unique_ptr<VerbsCore>(new VerbsCore(options, index));
  verbs::DeviceSelector selector = options.device;
  selector.device = options.rails[index];
  GDR_ASSIGN_OR_RETURN(core->device_, verbs::VerbsDevice::Open(selector));
  // Placement from sysfs: a software device (rxe) has no PCI function and no node.
  if (absl::StatusOr<topo::Topology> t = topo::ReadTopology(selector.sysfs_root); t.ok()) {
    for (const topo::Nic& nic : t->nics) {
      if (nic.name != core->name()) continue;
      core->pci_ = nic.pci.address;
      core->numa_node_ = nic.pci.numa_node;
    }
  }
  core->store_ = &store;
  // Volumes added while the daemon serves are registered as they come, before any op sees them.
  core->preparer_ =
      store.AddPreparer([raw = core.get()](const Volume& v) { return raw->RegisterVolume(v); });
  const std::vector<std::shared_ptr<const Volume>> volumes = store.Volumes();
  for (const std::shared_ptr<const Volume>& volume : volumes) {
    GDR_RETURN_IF_ERROR(core->RegisterVolume(*volume));
  }
  // A corrupt fault's byte leaves from here.
  GDR_RETURN_IF_ERROR(core->RegisterVolume(store.fault_source()));
  verbs::PollerOptions poller = options.poller;
  std::string unpinned_why;
  poller.cpus = core->PollerCpus(selector.sysfs_root, &unpinned_why);
  GDR_ASSIGN_OR_RETURN(core->poller_, verbs::CompletionPoller::Create(core->device_->context(),
                                                                      poller, core->name()));
  GDR_ASSIGN_OR_RETURN(core->watch_,
                       verbs::PortWatch::Start(core->device_->context(),
                                               core->device_->port().port, core->name(),
                                               [raw = core.get()](bool active,
                                                                  ibv_port_state state) {
                                                 raw->OnPortChange(active, state);
                                               }));
  const std::vector<int>& pinned = core->poller_->pinned_cpus();
  if (pinned.empty() && unpinned_why.empty()) unpinned_why = "pinning failed (logged above)";
  GDR_LOG(kInfo) << "rail " << index << ": " << core->device_->Describe() << "; "
                 << (core->pci_.empty() ? std::string("no PCI function")
                                        : absl::StrCat("PCI ", core->pci_))
                 << ", NUMA node "
                 << (core->numa_node_ >= 0 ? absl::StrCat(core->numa_node_) : "unknown") << "; "
                 << volumes.size() << " volumes registered (relaxed ordering "
                 << core->RelaxedOrderingDetail() << "); poller "
                 << verbs::PollModeName(options.poller.mode)
                 << (pinned.empty() ? absl::StrCat(", not pinned: ", unpinned_why)
                                    : absl::StrCat(", pinned to CPUs ",
                                                   topo::FormatCpuList(pinned)));
  return core;
}

std::vector<int> VerbsCore::PollerCpus(const std::string& sysfs_root,
                                       std::string* why_not) const {
  if (numa_node_ < 0) {
    *why_not = pci_.empty() ? "the device has no PCI function (a software device)"
                            : "sysfs gives the device no NUMA node";
    return {};
  }
  absl::StatusOr<std::vector<int>> cpus = topo::NumaNodeCpus(sysfs_root, numa_node_);
  if (!cpus.ok()) {
    *why_not = std::string(cpus.status().message());
    return {};
  }
  if (cpus->empty()) *why_not = absl::StrCat("NUMA node ", numa_node_, " has no CPUs");
  return *cpus;
}

VerbsCore::~VerbsCore() {
  Stop();
  // The MRs belong to this core's PD: they go before it does, whoever holds the volumes.
  if (store_ != nullptr) {
    store_->RemovePreparer(preparer_);
    for (const std::shared_ptr<const Volume>& v : store_->Volumes()) v->Detach(this);
    store_->fault_source().Detach(this);
  }
}

void VerbsCore::Stop() {
  if (watch_) watch_->Stop();
  if (poller_) poller_->Stop();
}

void VerbsCore::OnPortChange(bool active, ibv_port_state state) {
  const int port = device_->port().port;
  if (active) {
    up_events_.fetch_add(1, std::memory_order_relaxed);
    GDR_LOG(kInfo) << "rail " << name() << " port " << port
                   << " is ACTIVE again; it takes new work";
  } else {
    down_events_.fetch_add(1, std::memory_order_relaxed);
    GDR_LOG(kWarning) << "rail " << name() << " port " << port << " is "
                      << verbs::PortStateName(state) << "; it takes no new work";
  }
}

void VerbsCore::ForceDown(absl::Time until) {
  const int64_t was = forced_until_ns_.exchange(absl::ToUnixNanos(until));
  if (was == 0) down_events_.fetch_add(1, std::memory_order_relaxed);
  GDR_LOG(kWarning) << "rail " << name() << " taken down by an injected fault until "
                    << absl::FormatTime(until) << "; it takes no new work";
}

bool VerbsCore::forced_down() const {
  int64_t until = forced_until_ns_.load(std::memory_order_relaxed);
  if (until == 0) return false;
  if (absl::GetCurrentTimeNanos() < until) return true;
  // Over: the first to see it counts the rail back up.
  if (forced_until_ns_.compare_exchange_strong(until, 0)) {
    up_events_.fetch_add(1, std::memory_order_relaxed);
    GDR_LOG(kInfo) << "rail " << name() << ": the injected fault is over; it takes new work";
  }
  return false;
}

absl::Status VerbsCore::NotServing(absl::string_view detail) const {
  return absl::UnavailableError(absl::StrCat(
      "rail ", name(), " port ", device_->port().port, " is ",
      forced_down() ? "held down by an injected fault" : verbs::PortStateName(watch_->state()),
      ": it takes no new work until its port is ACTIVE again", detail.empty() ? "" : " (",
      detail, detail.empty() ? "" : ")"));
}

absl::Status VerbsCore::FinishOp(uint64_t bytes, absl::Status status) {
  if (status.ok()) {
    ops_.fetch_add(1, std::memory_order_relaxed);
    bytes_.fetch_add(bytes, std::memory_order_relaxed);
    return status;
  }
  errors_.fetch_add(1, std::memory_order_relaxed);
  if (!serving()) return NotServing(status.message());
  return status;
}

absl::StatusOr<uint32_t> VerbsCore::VolumeLkey(const Volume& volume) const {
  const auto* a = static_cast<const VolumeMr*>(volume.AttachmentOf(this));
  if (a == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("volume '", volume.name(), "' is not registered with ", device_->name()));
  }
  return a->mr->lkey();
}

absl::Status VerbsCore::CheckHealth(absl::Duration max_stall) const {
  if (!poller_->Healthy(max_stall)) {
    return absl::UnavailableError(absl::StrCat("the completion poller of ", device_->name(),
                                               " has not polled its CQ for ",
                                               absl::FormatDuration(poller_->since_last_loop())));
  }
  if (!watch_->Healthy(max_stall)) {
    return absl::UnavailableError(absl::StrCat("the port watch of ", device_->name(),
                                               " has not come round for ",
                                               absl::FormatDuration(watch_->since_last_loop())));
  }
  return absl::OkStatus();
}

namespace {

// What GetInfo's rdma (the first rail) and rails[] say alike about a device port; the two
// messages name these fields the same.
template <typename Info>
void FillPort(const verbs::VerbsDevice& device, Info* info) {
  const verbs::PortInfo& p = device.port();
  info->set_device(device.name());
  info->set_port(p.port);
  info->set_link_layer(device.is_roce() ? "Ethernet" : "InfiniBand");
  info->set_gid(std::string(reinterpret_cast<const char*>(p.gid.data()), 16));
  info->set_gid_address(verbs::DescribeGid(p.gid));
  info->set_lid(p.lid);
  info->set_mtu(verbs::MtuBytes(p.active_mtu));
}

}  // namespace

void VerbsCore::FillInfo(v1::RdmaInfo* info) const {
  const verbs::PortInfo& p = device_->port();
  FillPort(*device_, info);
  info->set_port_state(verbs::PortStateName(device_->QueryPortState()));
  info->set_gid_index(static_cast<uint32_t>(p.gid_index));
  info->set_gid_type(p.gid_type);
  info->set_max_msg_bytes(p.max_msg_size);
  info->set_poll_mode(verbs::PollModeName(options_.poller.mode));
  if (!relaxed_ordering_.empty()) info->set_relaxed_ordering(RelaxedOrderingDetail());
}

void VerbsCore::FillRailInfo(v1::RailInfo* info) const {
  const verbs::PortInfo& p = device_->port();
  FillPort(*device_, info);
  info->set_index(index_);
  ibv_port_attr now{};
  if (const int rc = ibv_query_port(device_->context(), p.port, &now); rc == 0) {
    info->set_port_state(verbs::PortStateName(now.state));
    info->set_speed_mbps(verbs::PortSpeedMbps(now.active_speed, now.active_width));
  } else {
    info->set_port_state(absl::StrCat("unknown (ibv_query_port: ", std::strerror(rc), ")"));
  }
  info->set_serving(serving());
  info->set_numa_node(numa_node_);
  info->set_pci(pci_);
}

void VerbsCore::FillRailStats(v1::RailStats* stats) const {
  stats->set_device(device_->name());
  stats->set_serving(serving());
  stats->set_ops(ops_.load(std::memory_order_relaxed));
  stats->set_bytes(bytes_.load(std::memory_order_relaxed));
  stats->set_errors(errors_.load(std::memory_order_relaxed));
  stats->set_down_events(down_events_.load(std::memory_order_relaxed));
  stats->set_up_events(up_events_.load(std::memory_order_relaxed));
  stats->set_refused(refused_.load(std::memory_order_relaxed));
}

std::string VerbsCore::RelaxedOrderingDetail() const {
  return relaxed_ordering_.empty() ? "n/a" : relaxed_ordering_;
}

}  // namespace gdr
