#include "client/gdrctl/doctor/real_probes.h"

#include <grpcpp/grpcpp.h>
#include <infiniband/verbs.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <fstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "client/src/daemon_rpc.h"
#include "common/cuda/gpu.h"
#include "common/cuda/gpu_mr.h"
#include "common/wire/transport_kind.h"
#include "common/verbs/dc_qp.h"
#include "common/verbs/verbs_device.h"
#include "common/verbs/verbs_ptr.h"
#include "common/verbs/verbs_status.h"

namespace gdrctl::doctor {
namespace {

namespace v1 = gdrstore::v1;

absl::Status LiveOff() {
  return absl::UnavailableError("live probes are off: --sysfs-root names another host's tree");
}

// CAP_IPC_LOCK (bit 14) in this process's effective capabilities.
bool HasCapIpcLock() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (!absl::StartsWith(line, "CapEff:")) continue;
    uint64_t caps = 0;
    std::string hex(absl::StripAsciiWhitespace(line.substr(7)));
    return absl::SimpleHexAtoi(hex, &caps) && (caps & (uint64_t{1} << 14));
  }
  return false;
}

}  // namespace

absl::StatusOr<PortQuery> RealProbes::QueryPort(const std::string& device, int port) {
  if (!live_devices_) return LiveOff();
  int n = 0;
  gdr::verbs::VerbsPtr<ibv_device*> list(ibv_get_device_list(&n));
  for (int i = 0; list && i < n; ++i) {
    if (device != ibv_get_device_name(list.get()[i])) continue;
    gdr::verbs::VerbsPtr<ibv_context> ctx(ibv_open_device(list.get()[i]));
    if (!ctx) return absl::UnavailableError(absl::StrCat("ibv_open_device ", device, " failed"));
    ibv_port_attr pa{};
    if (ibv_query_port(ctx.get(), static_cast<uint8_t>(port), &pa) != 0) {
      return gdr::verbs::VerbsError(errno, "ibv_query_port", absl::StrCat(device, " port ", port));
    }
    return PortQuery{static_cast<int>(gdr::verbs::MtuBytes(pa.active_mtu)),
                     static_cast<int>(gdr::verbs::MtuBytes(pa.max_mtu))};
  }
  return absl::UnavailableError(absl::StrCat("libibverbs has no device ", device));
}

absl::StatusOr<DcAnswer> RealProbes::ProbeDc(const std::string& device) {
  if (!live_devices_) return LiveOff();
  gdr::verbs::DeviceSelector sel;
  sel.device = device;
  absl::StatusOr<std::unique_ptr<gdr::verbs::VerbsDevice>> dev =
      gdr::verbs::VerbsDevice::Open(sel);
  if (!dev.ok()) return dev.status();
  gdr::verbs::VerbsPtr<ibv_cq> cq(ibv_create_cq((*dev)->context(), 16, nullptr, nullptr, 0));
  if (!cq) return gdr::verbs::VerbsError(errno, "ibv_create_cq", device);
  const gdr::verbs::DcProbe p = gdr::verbs::ProbeDc(**dev, cq.get());
  return DcAnswer{p.mlx5, p.dc, p.why_not};
}

Memlock RealProbes::ReadMemlock() {
  Memlock m;
  rlimit rl{};
  if (getrlimit(RLIMIT_MEMLOCK, &rl) == 0) {
    m.unlimited = rl.rlim_cur == RLIM_INFINITY;
    m.soft_bytes = m.unlimited ? UINT64_MAX : rl.rlim_cur;
    m.hard_bytes = rl.rlim_max == RLIM_INFINITY ? UINT64_MAX : rl.rlim_max;
  }
  m.cap_ipc_lock = HasCapIpcLock();
  return m;
}

absl::StatusOr<std::vector<CudaGpu>> RealProbes::ListGpus() {
  if (!live_devices_) return LiveOff();
  absl::StatusOr<std::vector<gdr::cuda::GpuInfo>> gpus = gdr::cuda::ListGpus();
  if (!gpus.ok()) return gpus.status();
  std::vector<CudaGpu> out;
  for (const gdr::cuda::GpuInfo& g : *gpus) {
    out.push_back(CudaGpu{g.ordinal, g.pci, g.name, g.total_bytes, g.dma_buf});
  }
  return out;
}

absl::StatusOr<gdr::cuda::GpuDirectAttributes> RealProbes::GpuDirect(int ordinal) {
  if (!live_devices_) return LiveOff();
  return gdr::cuda::ReadGpuDirectAttributes(ordinal);
}

absl::StatusOr<std::string> RealProbes::ProbeGpuRegistration(int ordinal,
                                                             const std::string& device) {
  if (!live_devices_) return LiveOff();
  constexpr size_t kProbeBytes = 2 << 20;  // one large page: what the driver pins at least
  absl::StatusOr<std::unique_ptr<gdr::cuda::DeviceMemory>> mem =
      gdr::cuda::DeviceMemory::Create(ordinal, kProbeBytes);
  // UNAVAILABLE: the probe could not be set up, which says nothing about registration itself.
  if (!mem.ok()) {
    return absl::UnavailableError(absl::StrCat("cannot allocate on GPU ", ordinal, ": ",
                                               mem.status().message()));
  }
  gdr::verbs::DeviceSelector sel;
  sel.device = device;
  absl::StatusOr<std::unique_ptr<gdr::verbs::VerbsDevice>> dev =
      gdr::verbs::VerbsDevice::Open(sel);
  if (!dev.ok()) {
    return absl::UnavailableError(absl::StrCat("cannot open ", device, ": ", dev.status().message()));
  }
  absl::StatusOr<gdr::cuda::GpuMr> mr = gdr::cuda::RegisterGpuMemory(
      (*dev)->pd(), (*mem)->ptr(), kProbeBytes,
      IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
  if (!mr.ok()) return mr.status();
  return std::string(gdr::cuda::GpuMrMethodName(mr->method));
}

absl::StatusOr<DaemonOffer> RealProbes::GetInfo(const std::string& address) {
  gdrstore::ClientOptions o = daemon_;
  o.daemon_address = address;
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = gdrstore::OpenDaemonChannel(o);
  if (!channel.ok()) return channel.status();
  std::unique_ptr<v1::GdrStore::Stub> stub = v1::GdrStore::NewStub(*channel);
  grpc::ClientContext ctx;
  // A doctor answers quickly: an unreachable daemon costs at most this long.
  const auto wait = std::min<std::chrono::milliseconds>(o.rpc_timeout, std::chrono::seconds(5));
  ctx.set_deadline(std::chrono::system_clock::now() + wait);
  v1::GetInfoRequest request;
  request.set_no_volumes(true);  // what it offers, not its volumes
  v1::GetInfoResponse info;
  grpc::Status st = stub->GetInfo(&ctx, request, &info);
  if (!st.ok()) return gdrstore::FromGrpcStatus(st);
  DaemonOffer d;
  d.version = info.version();
  for (const v1::TransportInfo& t : info.transports()) {
    d.transports.push_back(
        DaemonTransport{gdr::TransportName(t.transport()), t.available(), t.detail()});
  }
  if (info.has_rdma()) {
    const v1::RdmaInfo& r = info.rdma();
    d.has_rdma = true;
    d.rdma_device = r.device();
    d.rdma_port = static_cast<int>(r.port());
    d.port_state = r.port_state();
    d.link_layer = r.link_layer();
    d.gid = r.gid_address();
    d.mtu = static_cast<int>(r.mtu());
  }
  return d;
}

}  // namespace gdrctl::doctor
