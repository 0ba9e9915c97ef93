#include "gdrstore/client.h"

#include <grpcpp/grpcpp.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/src/admission_window.h"
#include "client/src/client_access.h"
#include "client/src/client_calls.h"
#include "client/src/daemon_rpc.h"
#include "client/src/buffer_crc.h"
#include "client/src/deadline_timer.h"
#include "client/src/host_memory.h"
#include "client/src/page_rounding.h"
#include "client/src/registration.h"
#include "client/src/sliced_op.h"
#include "client/src/transport/client_transport.h"
#include "client/src/transport/region.h"
#include "client/src/transport/op_path.h"
#include "client/src/transport/open_client_transport.h"
#include "common/cuda/gpu.h"
#include "common/base/host_port.h"
#include "common/topo/pci_topology.h"
#include "common/grpc/grpc_status.h"
#include "common/base/status_macros.h"
#include "common/wire/transport_kind.h"

namespace gdr {
namespace {

void SetDeadline(grpc::ClientContext* ctx, std::chrono::milliseconds timeout) {
  if (timeout.count() > 0) ctx->set_deadline(std::chrono::system_clock::now() + timeout);
}

// The transport a concrete choice names; kAuto names none until it has picked one.
std::optional<TransportKind> KindOf(gdrstore::Transport t) {
  switch (t) {
    case gdrstore::Transport::kTcp: return TransportKind::kTcp;
    case gdrstore::Transport::kRc: return TransportKind::kRc;
    case gdrstore::Transport::kDc: return TransportKind::kDc;
    case gdrstore::Transport::kLocal: return TransportKind::kLocal;
    case gdrstore::Transport::kAuto: break;
  }
  return std::nullopt;
}

}  // namespace
}  // namespace gdr

namespace gdrstore {

Client::Client(ClientOptions options, std::shared_ptr<grpc::Channel> channel)
    : options_(std::move(options)),
      rpc_(std::make_unique<gdr::DaemonRpc>()),
      registrations_(std::make_shared<gdr::RegistrationCache>()),
      timer_(std::make_shared<gdr::DeadlineTimer>()),
      calls_(std::make_shared<gdr::ClientCalls>()) {
  rpc_->stub = v1::GdrStore::NewStub(channel);
  rpc_->channel = std::move(channel);
  if (!options_.fail_when_full) window_ = std::make_shared<gdr::AdmissionWindow>(timer_);
}

Client::~Client() {
  // What waits in the window fails and nothing more is sent through it; the limits' GetInfo
  // (a daemon that does not answer) is cancelled and waited for, since no gRPC call may outlive
  // the Client (nor the process's gRPC).
  if (window_ != nullptr) window_->Close();
  // The Streams' calls are cancelled and have ended, unary calls are cancelled, and no code of
  // the library uses this Client any more: what runs later (an OpStream or a Buffer kept past
  // the Client, an op's answer) finds it gone and fails instead.
  calls_->Close();
  if (transport_) transport_->Close();
  window_.reset();  // answers still to come hold it
}

void Client::FetchLimits() {
  if (window_ == nullptr) return;
  // Asynchronous: Connect does not wait for the daemon, and an op never waits for this. Until
  // the answer (or without one) the window knows no limit and the daemon's refusals pace it.
  struct Call {
    grpc::ClientContext ctx;
    v1::GetInfoRequest req;
    v1::GetInfoResponse resp;
  };
  auto call = std::make_shared<Call>();
  call->req.set_no_volumes(true);  // the limits only, however many volumes there are
  call->ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  if (!window_->BeginFetch([call] { call->ctx.TryCancel(); })) return;
  // The Client waits for this callback before it goes (CancelFetchAndWait), so the window is
  // alive whenever it runs.
  gdr::AdmissionWindow* window = window_.get();
  auto on_done = [call, window](grpc::Status st) {
    if (st.ok() && call->resp.has_limits()) {
      const v1::Limits& l = call->resp.limits();
      window->SetLimits(gdr::AdmissionWindow::Limits{
          l.max_inflight_ops(), l.max_inflight_bytes(), l.max_inflight_per_stream()});
    }
    window->EndFetch();
  };
  rpc_->stub->async()->GetInfo(&call->ctx, &call->req, &call->resp, std::move(on_done));
}

std::chrono::system_clock::time_point Client::DeadlineOf(const OpOptions& options) const {
  return options.deadline ? *options.deadline : gdr::DeadlineAfter(options_.rpc_timeout);
}

void Client::Admit(void* stream, uint64_t bytes, std::chrono::system_clock::time_point deadline,
                   PieceSend send, OpCallback done) {
  if (window_ == nullptr) {
    send(deadline, std::move(done));
    return;
  }
  window_->Submit(static_cast<gdr::AdmissionWindow::Scope*>(stream), bytes,
                  gdr::FromDeadline(deadline), std::move(send), std::move(done));
}

Client::WindowStats Client::window_stats() const {
  if (window_ == nullptr) return {};
  const gdr::AdmissionWindow::Stats s = window_->stats();
  return WindowStats{s.waited, s.resent, s.limits_known};
}

absl::StatusOr<std::unique_ptr<Client>> Client::Connect(const ClientOptions& options) {
  if (options.stream_calls == 0 || options.stream_calls > kMaxStreamCalls) {
    return absl::InvalidArgumentError(absl::StrCat("ClientOptions::stream_calls of ",
                                                   options.stream_calls, ": 1 to ",
                                                   kMaxStreamCalls, " calls a Stream"));
  }
  if (!options.agent.empty()) {
    // Through the node agent: its socket carries the memory and the calls; it reaches the
    // daemons its own way.
    GDR_ASSIGN_OR_RETURN(gdr::OpenedAgent agent, gdr::OpenAgent(options));
    auto client = std::unique_ptr<Client>(new Client(options, std::move(agent.channel)));
    client->options_.transport = Transport::kLocal;
    client->options_.local_socket = options.agent;
    client->transport_ = std::move(agent.transport);
    GDR_RETURN_IF_ERROR(client->ApplyRequirement());
    client->StartWindow(nullptr);
    return client;
  }
  if (absl::StatusOr<gdr::HostPort> daemon = gdr::SplitHostPort(options.daemon_address);
      !daemon.ok()) {
    return daemon.status();
  }
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = OpenDaemonChannel(options);
  if (!channel.ok()) return channel.status();
  auto client = std::unique_ptr<Client>(new Client(options, *std::move(channel)));
  // Picks the transport for auto, and asks the daemon (GetInfo) at most once for it all.
  absl::StatusOr<gdr::OpenedTransport> opened =
      gdr::OpenClientTransport(&client->options_, client->rpc_->stub.get());
  if (!opened.ok()) return opened.status();
  client->transport_ = std::move(opened->transport);
  client->auto_notes_ = std::move(opened->auto_notes);
  GDR_RETURN_IF_ERROR(client->ApplyRequirement());
  client->StartWindow(opened->daemon_info ? &*opened->daemon_info : nullptr);
  return client;
}

absl::Status Client::ApplyRequirement() {
  if (options_.require.empty()) return absl::OkStatus();
  GDR_ASSIGN_OR_RETURN(gdr::Requirement required, gdr::ParseRequirement(options_.require));
  if (required.empty()) return absl::OkStatus();
  // What connecting decided: through the agent (whose hops beyond are known only from its
  // answers), or directly over the transport auto or the caller picked.
  const bool agent = !options_.agent.empty();
  const std::string hop = agent ? "agent/" : TransportName(options_.transport);
  GDR_RETURN_IF_ERROR(gdr::CheckPath(required, hop, /*gpu=*/false, /*complete=*/!agent,
                                     auto_notes_.empty() ? "" : "auto: " + auto_notes_));
  required_ = std::make_shared<const gdr::Requirement>(std::move(required));
  return absl::OkStatus();
}

absl::StatusOr<std::function<void()>> Client::RegisterRegion(
    const std::shared_ptr<gdr::Region>& region) {
  absl::StatusOr<std::function<void()>> withdraw = transport_->Register(region);
  if (required_ == nullptr || region->gpu == nullptr) return withdraw;
  if (!withdraw.ok() && region->gpu_way.empty()) return withdraw;
  // A way the requirement rules out is the answer even where the handover failed too (an agent
  // that cannot open a CUDA IPC handle): it names what the caller asked for.
  absl::Status st = gdr::CheckPath(*required_, transport_->HopTo(*region, 0), /*gpu=*/true,
                                   /*complete=*/options_.agent.empty(), region->gpu_way_note);
  if (!st.ok()) {
    if (withdraw.ok() && *withdraw) (*withdraw)();
    return st;
  }
  return withdraw;
}

std::string Client::PathOf(const Buffer& buffer) const {
  return transport_->HopTo(*buffer.registration_->region(), 0);
}

void Client::StartWindow(const v1::GetInfoResponse* info) {
  if (window_ == nullptr) return;
  // Run from an answer, which may come as the Client goes.
  window_->OnRefusalAskLimits([this, calls = calls_] {
    if (gdr::ClientCalls::Use use(*calls); use) FetchLimits();
  });
  if (info == nullptr) {
    FetchLimits();
  } else if (info->has_limits()) {
    // The connect's answer already says what a fetch would.
    const v1::Limits& l = info->limits();
    window_->SetLimits(gdr::AdmissionWindow::Limits{
        l.max_inflight_ops(), l.max_inflight_bytes(), l.max_inflight_per_stream()});
  }
}

const char* TransportName(Transport t) {
  const std::optional<gdr::TransportKind> kind = gdr::KindOf(t);
  return kind ? gdr::TransportName(*kind) : "auto";
}

std::optional<Transport> ParseTransport(const std::string& name) {
  for (Transport t :
       {Transport::kTcp, Transport::kRc, Transport::kDc, Transport::kLocal, Transport::kAuto}) {
    if (name == TransportName(t)) return t;
  }
  return std::nullopt;
}

TransportInfo Client::transport_info() const {
  TransportInfo info;
  transport_->FillInfo(&info);
  info.auto_notes = auto_notes_;
  return info;
}

absl::StatusOr<std::unique_ptr<Buffer>> Client::AllocateBuffer(size_t bytes) {
  GDR_ASSIGN_OR_RETURN(const size_t mapped, gdr::PageRounded(bytes));
  // From a memfd, so that the local transport and the agent can map the same pages.
  GDR_ASSIGN_OR_RETURN(gdr::SharedHostMemory mem, gdr::AllocateSharedHostMemory(mapped));
  auto region = std::make_shared<gdr::Region>();
  region->host = mem.data;
  region->base = reinterpret_cast<uint64_t>(mem.data);
  region->size = bytes;
  region->memfd = mem.fd;
  region->release = [mem] { gdr::FreeSharedHostMemory(mem); };
  absl::StatusOr<std::function<void()>> withdraw = RegisterRegion(region);
  if (!withdraw.ok()) return withdraw.status();
  auto registration = std::make_shared<gdr::Registration>(std::move(region), std::move(*withdraw));
  registrations_->Add(registration);
  return std::unique_ptr<Buffer>(new Buffer(std::move(registration), 0, bytes));
}

absl::StatusOr<std::unique_ptr<Buffer>> Client::RegisterHostMemory(void* p, size_t n) {
  if (p == nullptr || n == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("host memory ", absl::Hex(reinterpret_cast<uintptr_t>(p)), " (+", n,
                     " bytes): a buffer needs an address and a size > 0"));
  }
  const uint64_t base = reinterpret_cast<uint64_t>(p);
  if (std::shared_ptr<gdr::Registration> hit = registrations_->Find(base, n, /*gpu=*/false)) {
    const size_t offset = base - hit->region()->base;
    return std::unique_ptr<Buffer>(new Buffer(std::move(hit), offset, n));
  }
  GDR_ASSIGN_OR_RETURN(const bool writable, gdr::HostRangeWritable(p, n));
  auto region = std::make_shared<gdr::Region>();
  region->host = static_cast<std::byte*>(p);
  region->base = base;
  region->size = n;
  region->writable = writable;
  absl::StatusOr<std::function<void()>> withdraw = RegisterRegion(region);
  if (!withdraw.ok()) {
    return absl::Status(withdraw.status().code(),
                        absl::StrCat("host memory 0x", absl::Hex(base), " (+", n,
                                     " bytes): ", withdraw.status().message()));
  }
  auto registration = std::make_shared<gdr::Registration>(std::move(region), std::move(*withdraw));
  registrations_->Add(registration);
  return std::unique_ptr<Buffer>(new Buffer(std::move(registration), 0, n));
}

Client::RegistrationStats Client::registration_stats() const {
  const gdr::RegistrationCache::Stats s = registrations_->stats();
  return RegistrationStats{s.hits, s.misses, s.live};
}

absl::StatusOr<std::unique_ptr<Buffer>> Client::AllocateGpuBuffer(const std::string& gpu,
                                                                  size_t bytes) {
  if (bytes == 0) return absl::InvalidArgumentError("buffer size must be > 0");
  GDR_RETURN_IF_ERROR(transport_->CanServeGpuMemory());
  absl::StatusOr<gdr::cuda::GpuInfo> info = gdr::cuda::FindGpu(gpu);
  if (!info.ok()) return info.status();
  absl::StatusOr<std::unique_ptr<gdr::cuda::DeviceMemory>> mem =
      gdr::cuda::DeviceMemory::Create(info->ordinal, bytes);
  if (!mem.ok()) {
    return absl::Status(mem.status().code(),
                        absl::StrCat("cannot allocate ", bytes, " bytes on GPU ", info->ordinal,
                                     " (", info->pci, "): ", mem.status().message()));
  }
  GDR_RETURN_IF_ERROR((*mem)->Memset(0));
  auto region = std::make_shared<gdr::Region>();
  region->base = (*mem)->ptr();
  region->size = bytes;
  region->gpu = std::move(*mem);
  absl::StatusOr<std::function<void()>> withdraw = RegisterRegion(region);
  if (!withdraw.ok()) {
    return absl::Status(withdraw.status().code(),
                        absl::StrCat("GPU ", info->pci, " ", withdraw.status().message()));
  }
  auto registration = std::make_shared<gdr::Registration>(std::move(region), std::move(*withdraw));
  registrations_->Add(registration);
  std::unique_ptr<Buffer> buffer(new Buffer(std::move(registration), 0, bytes));
  buffer->gpu_pci_ = info->pci;
  buffer->rdma_device_ = NicFor(info->pci);
  return buffer;
}

absl::StatusOr<std::unique_ptr<Buffer>> Client::RegisterGpuMemory(uint64_t device_ptr, size_t n) {
  GDR_RETURN_IF_ERROR(transport_->CanServeGpuMemory());
  std::shared_ptr<gdr::Registration> registration =
      registrations_->Find(device_ptr, n, /*gpu=*/true);
  size_t offset = 0;
  if (registration != nullptr) {
    offset = device_ptr - registration->region()->base;
  } else {
    GDR_ASSIGN_OR_RETURN(std::unique_ptr<gdr::cuda::DeviceMemory> mem,
                         gdr::cuda::DeviceMemory::Borrow(device_ptr, n));
    auto region = std::make_shared<gdr::Region>();
    region->base = device_ptr;
    region->size = n;
    region->gpu = std::move(mem);
    absl::StatusOr<std::function<void()>> withdraw = RegisterRegion(region);
    if (!withdraw.ok()) {
      return absl::Status(withdraw.status().code(),
                          absl::StrCat("GPU memory 0x", absl::Hex(device_ptr), " (+", n,
                                       " bytes): ", withdraw.status().message()));
    }
    registration = std::make_shared<gdr::Registration>(std::move(region), std::move(*withdraw));
    const int ordinal = registration->region()->gpu->ordinal();
    if (absl::StatusOr<gdr::cuda::GpuInfo> info = gdr::cuda::FindGpu(absl::StrCat(ordinal));
        info.ok()) {
      registration->gpu_pci = info->pci;
      registration->rdma_device = NicFor(info->pci);
    }
    registrations_->Add(registration);
  }
  std::unique_ptr<Buffer> buffer(new Buffer(registration, offset, n));
  buffer->gpu_pci_ = registration->gpu_pci;
  buffer->rdma_device_ = registration->rdma_device;
  return buffer;
}

std::string Client::NicFor(const std::string& gpu_pci) const {
  if (!options_.rdma_device.empty()) return options_.rdma_device;
  absl::StatusOr<gdr::topo::Topology> topo = gdr::topo::ReadTopology(options_.sysfs_root);
  if (!topo.ok()) return "";
  absl::StatusOr<const gdr::topo::Nic*> nic = gdr::topo::NearestNic(*topo, gpu_pci);
  return nic.ok() ? (*nic)->name : "";
}

absl::StatusOr<v1::RemoteBuffer> Client::Describe(const Buffer& buffer, size_t offset,
                                                  size_t length) const {
  return Describe(buffer, offset, length, 0);
}

absl::StatusOr<v1::RemoteBuffer> Client::Describe(const Buffer& buffer, size_t offset,
                                                  size_t length, int rail) const {
  if (absl::Status s =
          gdr::CheckRange(offset, length, buffer.size(), absl::StatusCode::kInvalidArgument);
      !s.ok()) {
    return s;
  }
  v1::RemoteBuffer rb;
  rb.set_address(buffer.address() + offset);
  rb.set_length(length);
  if (rail < 0 || rail >= transport_->rail_count()) {
    return absl::InvalidArgumentError(
        absl::StrCat("rail ", rail, " is not one of the ", transport_->rail_count(), " in use"));
  }
  transport_->DescribeEndpoint(*buffer.registration_->region(), rail, &rb);
  return rb;
}

}  // namespace gdrstore

namespace gdr {

using gdrstore::Buffer;
using gdrstore::Extent;
using gdrstore::OpCallback;
using gdrstore::OpResult;

gdrstore::v1::GdrStore::Stub* DaemonStub(const gdrstore::Client& client) {
  return ClientAccess::Stub(client);
}

gdrstore::v1::GdrStore::Stub* ClientAccess::Stub(const gdrstore::Client& client) {
  return client.rpc_->stub.get();
}

bool ClientAccess::ApplyOptions(const gdrstore::OpOptions& options, gdrstore::OpKind* kind,
                                OpCallback& done) {
  if (!options.sync) return true;
  switch (*kind) {
    case gdrstore::OpKind::kRead:
    case gdrstore::OpKind::kReadSync:
      *kind = gdrstore::OpKind::kReadSync;
      return true;
    case gdrstore::OpKind::kWrite:
      break;
  }
  done(absl::InvalidArgumentError(
      "OpOptions::sync applies to puts (OpKind::kRead) only, not to a get (OpKind::kWrite)"));
  return false;
}

void ClientAccess::DispatchSlices(gdrstore::Client& client, const Extent& extent,
                                  const Buffer& buffer, size_t buffer_offset, bool crc,
                                  OpCallback done, PieceSubmit piece) {
  // A slice is resent from an answer, when the Client may be gone: what it needs is held here.
  RunSliced(
      client.transport_, client.transport_->Plan(region(buffer), extent.length),
      [crc, transport = client.transport_, required = client.required_, &buffer, extent,
       buffer_offset, piece = std::move(piece)](const ClientTransport::Slice& s, OpCallback cb) {
        if (crc) cb = CrcChecked(buffer, buffer_offset + s.offset, s.length, std::move(cb));
        cb = PathNamed(transport, required, buffer, s.rail, std::move(cb));
        piece(Extent{extent.volume, extent.offset + s.offset, s.length},
              buffer_offset + s.offset, s.rail, std::move(cb));
      },
      std::move(done));
}

absl::StatusOr<std::unique_ptr<gdrstore::Client>> ClientAccess::ConnectSharing(
    const gdrstore::Client& base, const std::string& daemon_address) {
  if (absl::StatusOr<HostPort> daemon = SplitHostPort(daemon_address); !daemon.ok()) {
    return daemon.status();
  }
  // The base's options as its connect resolved them (auto's pick, the target's host).
  gdrstore::ClientOptions options = base.options_;
  options.daemon_address = daemon_address;
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = gdrstore::OpenDaemonChannel(options);
  if (!channel.ok()) return channel.status();
  std::unique_ptr<gdrstore::Client> client(
      new gdrstore::Client(std::move(options), *std::move(channel)));
  absl::StatusOr<std::shared_ptr<ClientTransport>> transport =
      AttachClientTransport(base.transport_, client->rpc_->stub.get());
  if (!transport.ok()) return transport.status();
  client->transport_ = std::move(*transport);
  client->registrations_ = base.registrations_;
  client->auto_notes_ = base.auto_notes_;
  // One deadline thread for the base and every Client sharing it; each keeps a window of its
  // own, as each daemon states its own limits.
  client->timer_ = base.timer_;
  if (client->window_ != nullptr) {
    client->window_ = std::make_shared<AdmissionWindow>(client->timer_);
  }
  client->StartWindow(nullptr);
  return client;
}

OpCallback ClientAccess::PathNamed(const gdrstore::Client& client, const Buffer& buffer,
                                   int rail, OpCallback done) {
  return PathNamed(client.transport_, client.required_, buffer, rail, std::move(done));
}

OpCallback ClientAccess::PathNamed(std::shared_ptr<ClientTransport> transport,
                                   std::shared_ptr<const Requirement> required,
                                   const Buffer& buffer, int rail, OpCallback done) {
  // The buffer outlives the callback (its destructor waits for its ops); the transport and the
  // requirement are held, as an answer may come while the Client is being closed.
  return [transport = std::move(transport), required = std::move(required), &buffer, rail,
          done = std::move(done)](absl::StatusOr<OpResult> r) {
    if (r.ok()) {
      const Region& reg = region(buffer);
      r->path = JoinPath(transport->HopTo(reg, rail), r->path);
      if (required != nullptr) {
        if (absl::Status st = CheckPath(*required, r->path, reg.gpu != nullptr, /*complete=*/true);
            !st.ok()) {
          r = st;
        }
      }
    }
    done(std::move(r));
  };
}

OpCallback ClientAccess::CrcChecked(const Buffer& buffer, size_t offset, uint64_t length,
                                    OpCallback done) {
  // The buffer outlives the callback: its destructor waits for the ops submitted on it.
  return [&buffer, offset, length, done = std::move(done)](absl::StatusOr<OpResult> r) {
    if (r.ok()) {
      if (absl::Status st = gdr::CheckCrc32c(r->crc32c, buffer, offset, length); !st.ok()) {
        r = st;
      }
    }
    done(std::move(r));
  };
}

}  // namespace gdr

namespace gdrstore {

absl::StatusOr<v1::GetInfoResponse> Client::GetInfo(std::chrono::milliseconds timeout) {
  return GetInfoPages(*rpc_->stub, v1::GetInfoRequest(), gdr::DeadlineAfter(timeout));
}

absl::StatusOr<v1::GetInfoResponse> Client::GetVolumeInfo(const std::string& volume,
                                                          std::chrono::milliseconds timeout) {
  // An empty name would ask for every volume, not one.
  if (volume.empty()) return absl::InvalidArgumentError("GetVolumeInfo: the volume name is empty");
  v1::GetInfoRequest request;
  request.set_volume(volume);
  return GetInfoPages(*rpc_->stub, std::move(request), gdr::DeadlineAfter(timeout));
}

absl::StatusOr<v1::GetStatsResponse> Client::GetStats(std::chrono::milliseconds timeout) {
  return GetStatsPages(*rpc_->stub, gdr::DeadlineAfter(timeout));
}

absl::Status Client::Ping() {
  grpc::ClientContext ctx;
  gdr::SetDeadline(&ctx, std::chrono::milliseconds(10000));
  v1::PingResponse resp;
  return FromGrpcStatus(rpc_->stub->Ping(&ctx, v1::PingRequest(), &resp));
}

namespace {

// One async unary call of a Client: registered with its calls, so that a Client that goes
// first cancels it; what the answer runs holds the call and the registry.
template <typename Req, typename Resp>
struct UnaryCall {
  grpc::ClientContext ctx;
  Req req;
  Resp resp;
  std::function<void(absl::StatusOr<Resp>)> done;
};

template <typename Req, typename Resp, typename Start>
void StartUnary(const std::shared_ptr<gdr::ClientCalls>& calls, Req req,
                std::chrono::system_clock::time_point deadline,
                std::function<void(absl::StatusOr<Resp>)> done, Start start) {
  auto call = std::make_shared<UnaryCall<Req, Resp>>();
  call->req = std::move(req);
  call->done = std::move(done);
  if (deadline != std::chrono::system_clock::time_point::max()) call->ctx.set_deadline(deadline);
  const std::shared_ptr<grpc::ClientContext> ctx(call, &call->ctx);
  if (!calls->AddUnary(ctx)) {
    call->done(absl::CancelledError("the Client was closed before the call was sent"));
    return;
  }
  start(&call->ctx, &call->req, &call->resp, [call, calls](grpc::Status st) {
    calls->RemoveUnary(&call->ctx);
    absl::StatusOr<Resp> r =
        st.ok() ? absl::StatusOr<Resp>(std::move(call->resp)) : FromGrpcStatus(st);
    std::function<void(absl::StatusOr<Resp>)> cb = std::move(call->done);
    cb(std::move(r));
  });
}

}  // namespace

void Client::Ping(std::function<void(absl::Status)> done) {
  v1::GdrStore::Stub* stub = rpc_->stub.get();
  StartUnary<v1::PingRequest, v1::PingResponse>(
      calls_, v1::PingRequest(), gdr::DeadlineAfter(std::chrono::milliseconds(10000)),
      [done = std::move(done)](absl::StatusOr<v1::PingResponse> r) { done(r.status()); },
      [stub](auto* ctx, auto* req, auto* resp, auto cb) {
        stub->async()->Ping(ctx, req, resp, std::move(cb));
      });
}

void Client::GetInfo(const v1::GetInfoRequest& request,
                     std::chrono::system_clock::time_point deadline,
                     std::function<void(absl::StatusOr<v1::GetInfoResponse>)> done) {
  v1::GdrStore::Stub* stub = rpc_->stub.get();
  StartUnary<v1::GetInfoRequest, v1::GetInfoResponse>(
      calls_, request, deadline, std::move(done),
      [stub](auto* ctx, auto* req, auto* resp, auto cb) {
        stub->async()->GetInfo(ctx, req, resp, std::move(cb));
      });
}

}  // namespace gdrstore
