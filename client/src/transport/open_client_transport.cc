#include "client/src/transport/open_client_transport.h"

#include <algorithm>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "client/src/transport/agent/agent_channel.h"
#include "client/src/transport/dc/dc_session.h"
#include "client/src/transport/local/local_transport.h"
#include "client/src/transport/rail_set.h"
#include "client/src/transport/rc/rc_session.h"
#include "client/src/transport/tcp/tcp_transport.h"
#include "common/grpc/grpc_status.h"
#include "common/handoff/host_id.h"
#include "common/base/status_macros.h"
#include "common/verbs/gid_table.h"

namespace gdr {

namespace v1 = gdrstore::v1;

namespace {

verbs::DeviceSelector DeviceOf(const gdrstore::ClientOptions& o) {
  verbs::DeviceSelector d;
  d.device = o.rdma_device;
  d.address = o.rdma_address;
  d.gid_index = o.rdma_gid_index;
  return d;
}

// A GetInfo request for what opening a transport reads (transports, rdma, rails, local,
// limits): the volumes, however many, are left out of the answer.
v1::GetInfoRequest NoVolumes() {
  v1::GetInfoRequest request;
  request.set_no_volumes(true);
  return request;
}

// What the daemon says about itself; its RDMA part tells a verbs transport what to match.
absl::StatusOr<v1::GetInfoResponse> DaemonInfo(const gdrstore::ClientOptions& o,
                                               v1::GdrStore::Stub* stub) {
  grpc::ClientContext ctx;
  std::chrono::milliseconds timeout = std::chrono::seconds(10);
  if (o.rpc_timeout.count() > 0) timeout = std::min(timeout, o.rpc_timeout);
  ctx.set_deadline(std::chrono::system_clock::now() + timeout);
  v1::GetInfoResponse info;
  if (grpc::Status st = stub->GetInfo(&ctx, NoVolumes(), &info); !st.ok()) {
    return absl::Status(FromGrpcStatus(st).code(), absl::StrCat("GetInfo: ", st.error_message()));
  }
  return info;
}

// A daemon GID as GetInfo carries it (16 raw bytes) as an IPv4 literal, so this side's GID is
// chosen on the subnet the daemon is reached through; empty when not an IPv4-mapped GID.
std::string Ipv4OfGid(const std::string& raw) {
  if (raw.size() != 16) return "";
  verbs::Gid gid;
  std::copy(raw.begin(), raw.end(), gid.begin());
  return verbs::GidIpv4(gid).value_or("");
}

// The daemon's RDMA address (its first rail's RoCE v2 GID, GetInfo rdma.gid) as an IPv4 literal.
std::string PeerAddress(const v1::GetInfoResponse& info) {
  return info.has_rdma() ? Ipv4OfGid(info.rdma().gid()) : "";
}

// A daemon rail as GetInfo lists it (a daemon without rails lists none: its one device then).
struct DaemonRail {
  std::string device;  // as RcHello.rail names it
  std::string label;   // "rxe1 port 1"
  std::string address; // IPv4 of its RoCE v2 GID; empty on InfiniBand
  uint64_t speed_mbps = 0;
  bool serving = true;
};

std::vector<DaemonRail> DaemonRails(const v1::GetInfoResponse& info) {
  std::vector<DaemonRail> rails;
  for (const v1::RailInfo& r : info.rails()) {
    rails.push_back(DaemonRail{r.device(), absl::StrCat(r.device(), " port ", r.port()),
                               Ipv4OfGid(r.gid()), r.speed_mbps(), r.serving()});
  }
  if (rails.empty() && info.has_rdma()) {
    rails.push_back(DaemonRail{"", absl::StrCat(info.rdma().device(), " port ", info.rdma().port()),
                               Ipv4OfGid(info.rdma().gid()), 0, true});
  }
  return rails;
}

// rc over the devices options->rails names: each paired with the daemon rail it reaches (RoCE:
// the one on its subnet, the same position tried first; InfiniBand: by position), a device
// that reaches none, or fails to open, is left out with a note. NOT_FOUND when none is left.
// `info`: the daemon's GetInfo answer, asked for here when it is not there yet.
absl::StatusOr<std::shared_ptr<ClientTransport>> OpenRails(gdrstore::ClientOptions* options,
                                                           v1::GdrStore::Stub* stub,
                                                           std::optional<v1::GetInfoResponse>* info) {
  if (options->slice_bytes == 0) return absl::InvalidArgumentError("slice size must be > 0");
  if (!options->rdma_address.empty()) {
    return absl::InvalidArgumentError(
        "rails and an RDMA address exclude each other: name the rails' devices");
  }
  std::vector<std::string> devices = options->rails;
  if (devices.size() == 1 && devices.front() == "auto") devices = verbs::ListDeviceNames();
  if (devices.empty()) {
    return absl::NotFoundError(
        absl::StrCat("rails auto: no RDMA devices (", verbs::DescribeAllDevices(), ")"));
  }
  for (size_t i = 0; i < devices.size(); ++i) {
    if (devices[i].empty() || devices[i] == "auto" ||
        std::find(devices.begin(), devices.begin() + static_cast<long>(i), devices[i]) !=
            devices.begin() + static_cast<long>(i)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "rails: '", devices[i], "' is empty, 'auto' among names, or named twice"));
    }
  }
  if (!info->has_value()) {
    absl::StatusOr<v1::GetInfoResponse> got = DaemonInfo(*options, stub);
    if (!got.ok()) {
      return absl::Status(got.status().code(), absl::StrCat("rails: ", got.status().message()));
    }
    *info = std::move(*got);
  }
  const std::vector<DaemonRail> daemon = DaemonRails(**info);
  if (daemon.empty()) {
    return absl::FailedPreconditionError("rails: the daemon serves no RDMA device");
  }
  std::vector<RailSet::Rail> rails;
  std::string notes;
  auto note = [&notes](const std::string& n) { absl::StrAppend(&notes, notes.empty() ? "" : "; ", n); };
  for (size_t i = 0; i < devices.size(); ++i) {
    // The daemon rail at the same position first, then the others in order.
    std::vector<size_t> order{i % daemon.size()};
    for (size_t j = 0; j < daemon.size(); ++j) {
      if (j != order.front()) order.push_back(j);
    }
    std::string why;
    for (size_t j : order) {
      const DaemonRail& d = daemon[j];
      if (!d.serving) {
        absl::StrAppend(&why, why.empty() ? "" : ", ", d.label, " is not serving");
        continue;
      }
      RcSessionOptions ro;
      ro.device.device = devices[i];
      ro.device.gid_index = options->rdma_gid_index;
      ro.device.sysfs_root = options->sysfs_root;
      ro.device.peer_address = d.address;
      ro.require_peer_subnet = true;
      ro.daemon_rail = d.device;
      ro.qps = options->rc_qps;
      if (options->rpc_timeout.count() > 0) {
        ro.connect_timeout = std::min(ro.connect_timeout, options->rpc_timeout);
      }
      absl::StatusOr<std::shared_ptr<RcSession>> session = RcSession::Open(stub, ro);
      if (!session.ok()) {
        absl::StrAppend(&why, why.empty() ? "" : ", ", d.label, ": ", session.status().message());
        if (session.status().code() == absl::StatusCode::kNotFound) break;  // no such device
        continue;
      }
      uint64_t speed = (*session)->device().port().speed_mbps;
      if (d.speed_mbps > 0) speed = speed > 0 ? std::min(speed, d.speed_mbps) : d.speed_mbps;
      rails.push_back(RailSet::Rail{*session, devices[i], (*session)->daemon_device(), speed});
      why.clear();
      break;
    }
    if (!why.empty()) note(absl::StrCat(devices[i], " left out (", why, ")"));
  }
  if (rails.empty()) {
    return absl::NotFoundError(absl::StrCat("rails: no device reaches a daemon rail: ", notes));
  }
  RailSet::Options ro;
  ro.slice_bytes = options->slice_bytes;
  ro.retry = options->rail_retry;
  ro.sysfs_root = options->sysfs_root;
  ro.notes = notes;
  return std::shared_ptr<ClientTransport>(std::make_shared<RailSet>(std::move(rails), ro));
}

// What opening one kind uses: the daemon's GetInfo answer, asked for once (when a kind needs it
// and it is not there yet) and kept for the next kind auto tries and for the Client.
using InfoSlot = std::optional<v1::GetInfoResponse>;

// How long a handoff socket's opening exchange may take: 10 s, or the RPC deadline if shorter.
absl::Duration HandoffTimeout(const gdrstore::ClientOptions& options) {
  absl::Duration timeout = absl::Seconds(10);
  if (options.rpc_timeout.count() > 0) {
    timeout = std::min(timeout, absl::FromChrono(options.rpc_timeout));
  }
  return timeout;
}

// local: the daemon must say it serves the transport and run on this host (the same boot id);
// its handoff socket is the one it names unless options->local_socket says otherwise.
absl::StatusOr<std::shared_ptr<ClientTransport>> OpenLocal(gdrstore::ClientOptions* options,
                                                           v1::GdrStore::Stub* stub,
                                                           InfoSlot* info) {
  if (!options->rails.empty()) {
    return absl::InvalidArgumentError("rails are for transport rc: local moves no bytes on a NIC");
  }
  if (!info->has_value()) {
    absl::StatusOr<v1::GetInfoResponse> got = DaemonInfo(*options, stub);
    if (!got.ok()) {
      return absl::Status(got.status().code(),
                          absl::StrCat("transport local: ", got.status().message()));
    }
    *info = std::move(*got);
  }
  const v1::GetInfoResponse& daemon = **info;
  if (!daemon.has_local() || daemon.local().socket_path().empty()) {
    return absl::FailedPreconditionError(
        "transport local: the daemon serves no handoff socket (gdrstored --local-socket)");
  }
  const std::string here = handoff::HostId();
  if (daemon.local().host_id() != here) {
    return absl::FailedPreconditionError(absl::StrCat(
        "transport local: the daemon runs on another host (its boot id ", daemon.local().host_id(),
        ", this host's ", here.empty() ? "unreadable" : here, ")"));
  }
  if (options->local_socket.empty()) options->local_socket = daemon.local().socket_path();
  absl::StatusOr<std::shared_ptr<LocalTransport>> opened =
      LocalTransport::Open(options->local_socket, HandoffTimeout(*options));
  if (!opened.ok()) {
    return absl::Status(opened.status().code(),
                        absl::StrCat("transport local: ", opened.status().message()));
  }
  return std::shared_ptr<ClientTransport>(std::move(*opened));
}

absl::StatusOr<std::shared_ptr<ClientTransport>> OpenKind(gdrstore::ClientOptions* options,
                                                          v1::GdrStore::Stub* stub,
                                                          InfoSlot* info) {
  switch (options->transport) {
    case gdrstore::Transport::kTcp:
      if (!options->rails.empty()) {
        return absl::InvalidArgumentError(
            "rails are for transport rc: tcp links follow the kernel's routes and need none");
      }
      return TcpTransport::Open(options);
    case gdrstore::Transport::kRc: {
      if (!options->rails.empty()) return OpenRails(options, stub, info);
      RcSessionOptions ro;
      ro.device = DeviceOf(*options);
      // Only to choose the GID by the daemon's subnet: without an answer Connect says more.
      if (!info->has_value()) {
        if (absl::StatusOr<v1::GetInfoResponse> got = DaemonInfo(*options, stub); got.ok()) {
          *info = std::move(*got);
        }
      }
      if (info->has_value()) ro.device.peer_address = PeerAddress(**info);
      ro.qps = options->rc_qps;
      if (options->rpc_timeout.count() > 0) {
        ro.connect_timeout = std::min(ro.connect_timeout, options->rpc_timeout);
      }
      absl::StatusOr<std::shared_ptr<RcSession>> session = RcSession::Open(stub, ro);
      if (!session.ok()) {
        return absl::Status(session.status().code(),
                            absl::StrCat("rc connect: ", session.status().message()));
      }
      return std::shared_ptr<ClientTransport>(std::move(*session));
    }
    case gdrstore::Transport::kDc: {
      if (!options->rails.empty()) {
        return absl::UnimplementedError(
            "rails are built for transport rc; dc uses one device (ClientOptions::rdma_device)");
      }
      DcSessionOptions dopt;
      dopt.device = DeviceOf(*options);
      // The DCT must answer with the daemon's DCIs' path MTU and class (GetInfo rdma.dc).
      if (!info->has_value()) {
        absl::StatusOr<v1::GetInfoResponse> got = DaemonInfo(*options, stub);
        if (!got.ok()) {
          return absl::Status(got.status().code(),
                              absl::StrCat("transport dc: ", got.status().message()));
        }
        *info = std::move(*got);
      }
      const v1::GetInfoResponse& daemon = **info;
      dopt.device.peer_address = PeerAddress(daemon);
      if (daemon.has_rdma() && daemon.rdma().has_dc()) {
        GDR_RETURN_IF_ERROR(ApplyDaemonDcInfo(daemon.rdma().dc(), &dopt));
      }
      absl::StatusOr<std::shared_ptr<DcSession>> session = DcSession::Open(dopt);
      if (!session.ok()) return session.status();
      return std::shared_ptr<ClientTransport>(std::move(*session));
    }
    case gdrstore::Transport::kLocal:
      return OpenLocal(options, stub, info);
    case gdrstore::Transport::kAuto:
      break;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("transport ", gdrstore::TransportName(options->transport),
                   " cannot be opened directly"));
}

// auto: asks the daemon what it offers, then tries local (a daemon on this host), dc, rc, tcp
// in that order; the first that opens is the one, and `options->transport` names it.
absl::StatusOr<OpenedTransport> OpenAuto(gdrstore::ClientOptions* options,
                                         v1::GdrStore::Stub* stub) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::GetInfoResponse got;
  if (grpc::Status st = stub->GetInfo(&ctx, NoVolumes(), &got); !st.ok()) {
    return absl::Status(FromGrpcStatus(st).code(),
                        absl::StrCat("transport auto: GetInfo: ", st.error_message()));
  }
  InfoSlot info = std::move(got);
  auto offered = [&info](v1::Transport t, std::string* why) {
    for (const auto& ti : info->transports()) {
      if (ti.transport() == t) {
        if (!ti.available()) *why = absl::StrCat("daemon: ", ti.detail());
        return ti.available();
      }
    }
    *why = "daemon does not list it";
    return false;
  };
  std::string notes;
  for (auto [t, wire] : {std::pair{gdrstore::Transport::kLocal, v1::TRANSPORT_LOCAL},
                         std::pair{gdrstore::Transport::kDc, v1::TRANSPORT_DC},
                         std::pair{gdrstore::Transport::kRc, v1::TRANSPORT_RC},
                         std::pair{gdrstore::Transport::kTcp, v1::TRANSPORT_TCP}}) {
    std::string why;
    if (offered(wire, &why)) {
      gdrstore::ClientOptions o = *options;
      o.transport = t;
      absl::StatusOr<std::shared_ptr<ClientTransport>> opened = OpenKind(&o, stub, &info);
      if (opened.ok()) {
        *options = std::move(o);
        return OpenedTransport{std::move(*opened), std::move(info), std::move(notes)};
      }
      why = std::string(opened.status().message());
    }
    absl::StrAppend(&notes, notes.empty() ? "" : "; ", gdrstore::TransportName(t), ": ", why);
  }
  return absl::UnavailableError(absl::StrCat("transport auto: no transport works (", notes, ")"));
}

// A transport that serves every daemon as it is, seen by one more daemon's Client: everything
// goes to `base` but Close, which is its owner's.
class SharedView final : public ClientTransport {
 public:
  explicit SharedView(std::shared_ptr<ClientTransport> base) : base_(std::move(base)) {}
  absl::StatusOr<std::function<void()>> Register(const std::shared_ptr<Region>& region) override {
    return base_->Register(region);
  }
  absl::Status CanServeGpuMemory() const override { return base_->CanServeGpuMemory(); }
  void DescribeEndpoint(v1::RemoteBuffer* buffer) const override {
    base_->DescribeEndpoint(buffer);
  }
  void Close() override {}
  absl::Status session_status() const override { return base_->session_status(); }
  int rail_count() const override { return base_->rail_count(); }
  std::vector<Slice> Plan(const Region& region, uint64_t length) override {
    return base_->Plan(region, length);
  }
  void DescribeEndpoint(const Region& region, int rail, v1::RemoteBuffer* buffer) const override {
    base_->DescribeEndpoint(region, rail, buffer);
  }
  std::optional<int> Reroute(int failed, const absl::Status& why) override {
    return base_->Reroute(failed, why);
  }
  void Record(int rail, uint64_t bytes, bool ok, bool resubmitted) override {
    base_->Record(rail, bytes, ok, resubmitted);
  }
  std::string HopTo(const Region& region, int rail) const override {
    return base_->HopTo(region, rail);
  }
  void FillInfo(gdrstore::TransportInfo* info) const override { base_->FillInfo(info); }
  absl::StatusOr<std::shared_ptr<ClientTransport>> Attach(v1::GdrStore::Stub* stub) override {
    return base_->Attach(stub);
  }

 private:
  std::shared_ptr<ClientTransport> base_;
};

}  // namespace

absl::StatusOr<OpenedTransport> OpenClientTransport(gdrstore::ClientOptions* options,
                                                    v1::GdrStore::Stub* stub) {
  if (options->transport == gdrstore::Transport::kAuto) return OpenAuto(options, stub);
  InfoSlot info;
  absl::StatusOr<std::shared_ptr<ClientTransport>> opened = OpenKind(options, stub, &info);
  if (!opened.ok()) return opened.status();
  return OpenedTransport{std::move(*opened), std::move(info), ""};
}

absl::StatusOr<OpenedAgent> OpenAgent(const gdrstore::ClientOptions& options) {
  absl::StatusOr<AgentConnection> agent = ConnectAgent(options.agent, HandoffTimeout(options));
  if (!agent.ok()) return agent.status();
  return OpenedAgent{std::move(agent->channel),
                     LocalTransport::Over(std::move(agent->session), /*agent=*/true)};
}

absl::StatusOr<std::shared_ptr<ClientTransport>> AttachClientTransport(
    std::shared_ptr<ClientTransport> base, v1::GdrStore::Stub* stub) {
  absl::StatusOr<std::shared_ptr<ClientTransport>> attached = base->Attach(stub);
  if (!attached.ok()) return attached.status();
  if (*attached != nullptr) return std::move(*attached);
  return std::shared_ptr<ClientTransport>(std::make_shared<SharedView>(std::move(base)));
}

}  // namespace gdr
