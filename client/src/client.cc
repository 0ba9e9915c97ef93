#include "gdrstore/client.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/client_interceptor.h>
#include <sys/mman.h>
#include <unistd.h>

#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "client/src/dc_session.h"
#include "client/src/rc_session.h"
#include "client/src/tcp_target.h"
#include "common/cuda/gpu.h"
#include "common/cuda/gpu_mr.h"
#include "common/topo/pci_topology.h"
#include "common/verbs/verbs_status.h"

namespace gdrstore {

namespace {
// What the daemon may do to a registered buffer: one-sided reads and writes.
constexpr int kRemoteAccess =
    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
}  // namespace

absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

namespace {

// Splits "host:port" / "[v6]:port".
absl::Status SplitHostPort(const std::string& address, std::string* host, uint16_t* port) {
  std::string port_text;
  if (!address.empty() && address[0] == '[') {
    const size_t close = address.find(']');
    if (close == std::string::npos || close + 1 >= address.size() || address[close + 1] != ':') {
      return absl::InvalidArgumentError(absl::StrCat("bad address '", address, "' (want [V6]:PORT)"));
    }
    *host = address.substr(1, close - 1);
    port_text = address.substr(close + 2);
  } else {
    const size_t colon = address.rfind(':');
    if (colon == std::string::npos || colon == 0) {
      return absl::InvalidArgumentError(absl::StrCat("bad address '", address, "' (want HOST:PORT)"));
    }
    *host = address.substr(0, colon);
    port_text = address.substr(colon + 1);
  }
  uint32_t p = 0;
  if (!absl::SimpleAtoi(port_text, &p) || p == 0 || p > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("bad port in '", address, "'"));
  }
  *port = static_cast<uint16_t>(p);
  return absl::OkStatus();
}

bool IsLoopback(const std::string& host) {
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

void SetDeadline(grpc::ClientContext* ctx, std::chrono::milliseconds timeout) {
  if (timeout.count() > 0) ctx->set_deadline(std::chrono::system_clock::now() + timeout);
}

}  // namespace

// ---- Buffer ----

Buffer::Buffer(std::shared_ptr<Region> region, std::shared_ptr<TcpTarget> target)
    : region_(std::move(region)), target_(std::move(target)) {}
Buffer::~Buffer() {
  if (target_) target_->Deregister(region_->rkey);
}
std::byte* Buffer::data() const { return region_->host; }
bool Buffer::on_gpu() const { return region_->gpu != nullptr; }
int Buffer::gpu_ordinal() const { return region_->gpu ? region_->gpu->ordinal() : -1; }
const std::string& Buffer::gpu_pci() const { return gpu_pci_; }
const std::string& Buffer::rdma_device() const { return rdma_device_; }

absl::Status Buffer::CopyIn(size_t offset, const void* src, size_t n) const {
  if (region_->gpu) return region_->gpu->CopyFromHost(offset, src, n);
  if (offset > region_->size || n > region_->size - offset) {
    return absl::OutOfRangeError(absl::StrCat("[", offset, ", +", n, ") is outside the ",
                                              region_->size, "-byte buffer"));
  }
  if (n > 0) std::memcpy(region_->host + offset, src, n);
  return absl::OkStatus();
}

absl::Status Buffer::CopyOut(size_t offset, void* dst, size_t n) const {
  if (region_->gpu) return region_->gpu->CopyToHost(offset, dst, n);
  if (offset > region_->size || n > region_->size - offset) {
    return absl::OutOfRangeError(absl::StrCat("[", offset, ", +", n, ") is outside the ",
                                              region_->size, "-byte buffer"));
  }
  if (n > 0) std::memcpy(dst, region_->host + offset, n);
  return absl::OkStatus();
}
size_t Buffer::size() const { return region_->size; }
uint32_t Buffer::rkey() const { return region_->rkey; }
uint64_t Buffer::address() const { return region_->base; }

// ---- Client ----

namespace {

// Adds `authorization: Bearer <token>` to the initial metadata of every call of a channel.
class BearerToken final : public grpc::experimental::Interceptor {
 public:
  explicit BearerToken(const std::string* value) : value_(value) {}
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->emplace("authorization", *value_);
    }
    methods->Proceed();
  }

 private:
  const std::string* value_;  // owned by the factory, which the channel keeps
};

class BearerTokenFactory final : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit BearerTokenFactory(const std::string& token) : value_("Bearer " + token) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo* info) override {
    return new BearerToken(&value_);
  }

 private:
  const std::string value_;
};

}  // namespace

std::shared_ptr<grpc::Channel> OpenDaemonChannel(const ClientOptions& options) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_ENABLE_RETRIES, 0);
  if (options.token.empty()) {
    return grpc::CreateCustomChannel(options.daemon_address, grpc::InsecureChannelCredentials(),
                                     args);
  }
  std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> chain;
  chain.push_back(std::make_unique<BearerTokenFactory>(options.token));
  return grpc::experimental::CreateCustomChannelWithInterceptors(
      options.daemon_address, grpc::InsecureChannelCredentials(), args, std::move(chain));
}

Client::Client(ClientOptions options, std::shared_ptr<grpc::Channel> channel,
               std::shared_ptr<TcpTarget> target)
    : options_(std::move(options)),
      channel_(std::move(channel)),
      stub_(v1::GdrStore::NewStub(channel_)),
      target_(std::move(target)) {}

Client::~Client() {
  if (target_) target_->Stop();
  if (rc_) rc_->Close();
}

absl::StatusOr<std::unique_ptr<Client>> Client::Connect(const ClientOptions& options) {
  std::string daemon_host;
  uint16_t daemon_port = 0;
  if (absl::Status s = SplitHostPort(options.daemon_address, &daemon_host, &daemon_port); !s.ok()) {
    return s;
  }
  ClientOptions opts = options;
  if (opts.transport == Transport::kAuto) {
    // Ask the daemon what it offers, then try dc, rc, tcp in that order.
    auto stub = v1::GdrStore::NewStub(OpenDaemonChannel(opts));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::GetInfoRequest req;
    v1::GetInfoResponse info;
    if (grpc::Status st = stub->GetInfo(&ctx, req, &info); !st.ok()) {
      return absl::Status(FromGrpcStatus(st).code(),
                          absl::StrCat("transport auto: GetInfo: ", st.error_message()));
    }
    auto offered = [&](v1::Transport t, std::string* why) {
      for (const auto& ti : info.transports()) {
        if (ti.transport() == t) {
          if (!ti.available()) *why = absl::StrCat("daemon: ", ti.detail());
          return ti.available();
        }
      }
      *why = "daemon does not list it";
      return false;
    };
    std::string notes;
    for (auto [t, wire] : {std::pair{Transport::kDc, v1::TRANSPORT_DC},
                           std::pair{Transport::kRc, v1::TRANSPORT_RC},
                           std::pair{Transport::kTcp, v1::TRANSPORT_TCP}}) {
      std::string why;
      if (offered(wire, &why)) {
        ClientOptions o = opts;
        o.transport = t;
        absl::StatusOr<std::unique_ptr<Client>> c = Connect(o);
        if (c.ok()) {
          (*c)->auto_notes_ = notes;
          return c;
        }
        why = std::string(c.status().message());
      }
      absl::StrAppend(&notes, notes.empty() ? "" : "; ", TransportName(t), ": ", why);
    }
    return absl::UnavailableError(absl::StrCat("transport auto: no transport works (", notes, ")"));
  }
  // rc and dc: no tcp target, and the RDMA device the options name.
  auto verbs_client = [&opts] {
    auto channel = OpenDaemonChannel(opts);
    return std::unique_ptr<Client>(new Client(std::move(opts), std::move(channel), nullptr));
  };
  auto device_of = [](const ClientOptions& o) {
    gdr::verbs::DeviceSelector d;
    d.device = o.rdma_device;
    d.address = o.rdma_address;
    d.gid_index = o.rdma_gid_index;
    return d;
  };
  if (opts.transport == Transport::kDc) {
    auto client = verbs_client();
    DcSessionOptions dopt;
    dopt.device = device_of(client->options_);
    absl::StatusOr<std::shared_ptr<DcSession>> session = DcSession::Open(dopt);
    if (!session.ok()) return session.status();
    client->dc_ = std::move(*session);
    return client;
  }
  if (opts.transport == Transport::kRc) {
    auto client = verbs_client();
    RcSessionOptions ro;
    ro.device = device_of(client->options_);
    ro.qps = client->options_.rc_qps;
    if (client->options_.rpc_timeout.count() > 0) {
      ro.connect_timeout = std::min(ro.connect_timeout, client->options_.rpc_timeout);
    }
    absl::StatusOr<std::shared_ptr<RcSession>> session = RcSession::Open(client->stub(), ro);
    if (!session.ok()) {
      return absl::Status(session.status().code(),
                          absl::StrCat("rc connect: ", session.status().message()));
    }
    client->rc_ = std::move(*session);
    return client;
  }
  if (opts.target_host.empty()) {
    if (IsLoopback(daemon_host)) {
      opts.target_host = "127.0.0.1";
    } else {
      absl::StatusOr<std::string> local = gdr::LocalAddressToward(daemon_host, daemon_port);
      if (!local.ok()) return local.status();
      opts.target_host = *local;
    }
  }
  absl::StatusOr<std::shared_ptr<TcpTarget>> target =
      TcpTarget::Start(opts.target_host, opts.target_port, opts.max_target_connections,
                       GpuStagingOptions{opts.gpu_staging_slot_bytes, opts.gpu_staging_slots});
  if (!target.ok()) return target.status();
  auto channel = OpenDaemonChannel(opts);
  return std::unique_ptr<Client>(new Client(std::move(opts), std::move(channel), *target));
}

const char* TransportName(Transport t) {
  switch (t) {
    case Transport::kTcp: return "tcp";
    case Transport::kRc: return "rc";
    case Transport::kDc: return "dc";
    case Transport::kAuto: return "auto";
  }
  return "unknown";
}

uint32_t Client::dct_number() const { return dc_ ? dc_->dct_number() : 0; }

const std::string& Client::target_host() const { return options_.target_host; }
uint16_t Client::target_port() const { return target_ ? target_->port() : 0; }

std::optional<RdmaLocalInfo> Client::rdma_info() const {
  if (!rc_) return std::nullopt;
  const gdr::verbs::VerbsDevice& d = rc_->device();
  RdmaLocalInfo i;
  i.device = d.name();
  i.port = d.port().port;
  i.port_state = gdr::verbs::PortStateName(d.QueryPortState());
  i.gid_index = d.port().gid_index;
  i.gid = gdr::verbs::DescribeGid(d.port().gid);
  i.mtu = gdr::verbs::MtuBytes(d.port().active_mtu);
  i.qps = rc_->qp_count();
  i.connection_id = rc_->connection_id();
  i.daemon_device = rc_->daemon_device();
  i.qp_resets = rc_->resets();
  return i;
}

std::pair<const gdr::verbs::VerbsDevice*, std::shared_ptr<const void>> Client::VerbsDevice()
    const {
  if (dc_) return {&dc_->device(), dc_};
  if (rc_) return {&rc_->device(), rc_};
  return {nullptr, nullptr};
}

absl::StatusOr<std::unique_ptr<Buffer>> Client::AllocateBuffer(size_t bytes) {
  if (bytes == 0) return absl::InvalidArgumentError("buffer size must be > 0");
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const size_t mapped = (bytes + page - 1) / page * page;
  void* p = ::mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    return absl::ResourceExhaustedError(absl::StrCat("cannot allocate ", bytes, " bytes: ",
                                                     strerror(errno)));
  }
  auto region = std::make_shared<Region>();
  region->host = static_cast<std::byte*>(p);
  region->base = reinterpret_cast<uint64_t>(p);
  region->size = bytes;
  if (auto [device, owner] = VerbsDevice(); device != nullptr) {
    absl::StatusOr<std::unique_ptr<gdr::verbs::MemoryRegion>> mr =
        gdr::verbs::MemoryRegion::Register(device->pd(), p, mapped, kRemoteAccess);
    if (!mr.ok()) {
      ::munmap(p, mapped);
      return mr.status();
    }
    region->rkey = (*mr)->rkey();
    // Deregister before unmapping; the session (its PD) lives until then.
    region->release = [mr = std::shared_ptr<gdr::verbs::MemoryRegion>(std::move(*mr)),
                       owner = std::move(owner), p, mapped]() mutable {
      mr.reset();
      ::munmap(p, mapped);
    };
    return std::unique_ptr<Buffer>(new Buffer(std::move(region), nullptr));
  }
  region->release = [p, mapped] { ::munmap(p, mapped); };
  target_->Register(region);
  return std::unique_ptr<Buffer>(new Buffer(std::move(region), target_));
}

absl::StatusOr<std::unique_ptr<Buffer>> Client::AllocateGpuBuffer(const std::string& gpu,
                                                                  size_t bytes) {
  if (bytes == 0) return absl::InvalidArgumentError("buffer size must be > 0");
  auto [device, owner] = VerbsDevice();
  if (device == nullptr &&
      (options_.gpu_staging_slot_bytes == 0 || options_.gpu_staging_slots < 2)) {
    return absl::InvalidArgumentError("GPU staging needs >= 2 slots of > 0 bytes");
  }
  absl::StatusOr<gdr::cuda::GpuInfo> info = gdr::cuda::FindGpu(gpu);
  if (!info.ok()) return info.status();
  absl::StatusOr<std::unique_ptr<gdr::cuda::DeviceMemory>> mem =
      gdr::cuda::DeviceMemory::Create(info->ordinal, bytes);
  if (!mem.ok()) {
    return absl::Status(mem.status().code(),
                        absl::StrCat("cannot allocate ", bytes, " bytes on GPU ", info->ordinal,
                                     " (", info->pci, "): ", mem.status().message()));
  }
  if (absl::Status s = (*mem)->Memset(0); !s.ok()) return s;
  auto region = std::make_shared<Region>();
  region->base = (*mem)->ptr();
  region->size = bytes;
  region->gpu = std::move(*mem);
  std::unique_ptr<Buffer> buffer;
  if (device != nullptr) {
    // rc / dc: the NIC reaches GPU memory itself (dma-buf, else nvidia-peermem).
    absl::StatusOr<gdr::cuda::GpuMr> mr =
        gdr::cuda::RegisterGpuMemory(device->pd(), region->base, bytes, kRemoteAccess);
    if (!mr.ok()) {
      return absl::Status(mr.status().code(),
                          absl::StrCat("GPU ", info->pci, " memory cannot be registered with ",
                                       device->name(), ": ", mr.status().message()));
    }
    region->rkey = mr->mr->rkey;
    // Deregistered before the device memory is freed (Region releases before its members).
    region->release = [mr = std::make_shared<gdr::cuda::MrPtr>(std::move(mr->mr)),
                       owner = std::move(owner)]() mutable { mr->reset(); };
    buffer.reset(new Buffer(std::move(region), nullptr));
  } else {
    target_->Register(region);
    buffer.reset(new Buffer(std::move(region), target_));
  }
  buffer->gpu_pci_ = info->pci;
  if (!options_.rdma_device.empty()) {
    buffer->rdma_device_ = options_.rdma_device;
  } else if (absl::StatusOr<gdr::topo::Topology> topo = gdr::topo::ReadTopology(options_.sysfs_root);
             topo.ok()) {
    absl::StatusOr<const gdr::topo::Nic*> nic = gdr::topo::NearestNic(*topo, info->pci);
    if (nic.ok()) buffer->rdma_device_ = (*nic)->name;
  }
  return buffer;
}

TargetStats Client::target_stats() const {
  if (!target_) return TargetStats{};
  const TcpTargetStats t = target_->stats();
  TargetStats s;
  s.refused = t.refused;
  s.gpu_bytes_to_device = t.gpu.bytes_to_device;
  s.gpu_bytes_from_device = t.gpu.bytes_from_device;
  s.gpu_copy_ns = t.gpu.copy_ns;
  s.gpu_wait_ns = t.gpu.wait_ns;
  return s;
}

absl::StatusOr<v1::RemoteBuffer> Client::Describe(const Buffer& buffer, size_t offset,
                                                  size_t length) const {
  if (offset > buffer.size() || length > buffer.size() - offset) {
    return absl::InvalidArgumentError(absl::StrCat("range [", offset, ", +", length,
                                                   ") is outside the ", buffer.size(),
                                                   "-byte buffer"));
  }
  v1::RemoteBuffer rb;
  rb.set_address(buffer.address() + offset);
  rb.set_length(length);
  rb.set_rkey(buffer.rkey());
  if (rc_) {
    rb.mutable_rc()->set_connection_id(rc_->connection_id());
    return rb;
  }
  if (dc_) {
    dc_->Describe(rb.mutable_dc());
    return rb;
  }
  rb.mutable_tcp()->set_host(options_.target_host);
  rb.mutable_tcp()->set_port(target_->port());
  return rb;
}

namespace {

template <typename Req>
absl::Status FillRequest(const Client& client, const Extent& extent, const Buffer& buffer,
                         size_t buffer_offset, Req* req) {
  absl::StatusOr<v1::RemoteBuffer> rb = client.Describe(buffer, buffer_offset, extent.length);
  if (!rb.ok()) return rb.status();
  req->mutable_extent()->set_volume(extent.volume);
  req->mutable_extent()->set_offset(extent.offset);
  req->mutable_extent()->set_length(extent.length);
  *req->mutable_buffer() = std::move(*rb);
  return absl::OkStatus();
}

}  // namespace

void Client::SubmitAsync(OpKind kind, const Extent& extent, const Buffer& buffer,
                         size_t buffer_offset, OpCallback done) {
  struct Call {
    grpc::ClientContext ctx;
    v1::WriteRequest write;
    v1::ReadRequest read;
    v1::OpResponse response;
    OpCallback done;
  };
  auto* call = new Call();
  call->done = std::move(done);
  absl::Status s = kind == OpKind::kWrite
                       ? FillRequest(*this, extent, buffer, buffer_offset, &call->write)
                       : FillRequest(*this, extent, buffer, buffer_offset, &call->read);
  call->read.set_sync(kind == OpKind::kReadSync);
  if (!s.ok()) {
    OpCallback cb = std::move(call->done);
    delete call;
    cb(s);
    return;
  }
  SetDeadline(&call->ctx, options_.rpc_timeout);
  auto on_done = [call](grpc::Status st) {
    absl::StatusOr<OpResult> result;
    if (st.ok()) {
      result = OpResult{call->response.bytes(), call->response.service_ns(),
                        call->response.synced()};
    } else {
      result = FromGrpcStatus(st);
    }
    OpCallback cb = std::move(call->done);
    delete call;
    cb(std::move(result));
  };
  if (kind == OpKind::kWrite) {
    stub_->async()->Write(&call->ctx, &call->write, &call->response, std::move(on_done));
  } else {
    stub_->async()->Read(&call->ctx, &call->read, &call->response, std::move(on_done));
  }
}

std::future<absl::StatusOr<OpResult>> Client::SubmitAsync(OpKind kind, const Extent& extent,
                                                          const Buffer& buffer,
                                                          size_t buffer_offset) {
  auto promise = std::make_shared<std::promise<absl::StatusOr<OpResult>>>();
  auto future = promise->get_future();
  SubmitAsync(kind, extent, buffer, buffer_offset,
              [promise](absl::StatusOr<OpResult> r) { promise->set_value(std::move(r)); });
  return future;
}

absl::StatusOr<OpResult> Client::Write(const Extent& extent, const Buffer& buffer,
                                       size_t buffer_offset) {
  return SubmitAsync(OpKind::kWrite, extent, buffer, buffer_offset).get();
}

absl::StatusOr<OpResult> Client::Read(const Extent& extent, const Buffer& buffer,
                                      size_t buffer_offset, bool sync) {
  return SubmitAsync(sync ? OpKind::kReadSync : OpKind::kRead, extent, buffer, buffer_offset)
      .get();
}

absl::StatusOr<v1::GetInfoResponse> Client::GetInfo(std::chrono::milliseconds timeout) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx, timeout);
  v1::GetInfoResponse resp;
  grpc::Status s = stub_->GetInfo(&ctx, v1::GetInfoRequest(), &resp);
  if (!s.ok()) return FromGrpcStatus(s);
  return resp;
}

absl::Status Client::Ping() {
  grpc::ClientContext ctx;
  SetDeadline(&ctx, std::chrono::milliseconds(10000));
  v1::PingResponse resp;
  return FromGrpcStatus(stub_->Ping(&ctx, v1::PingRequest(), &resp));
}

// ---- OpStream ----

// Client side of one Stream call. Submitted ops queue while a write is outstanding and go out
// together in the next StreamRequest; answers arrive batched too. Ops that answer callbacks
// submit while a response is being delivered also wait, and leave in one message once every
// answer of it has been handed out. One write outstanding at a time; callbacks run outside
// the lock. Submit and Close start operations from the caller's thread, outside gRPC's
// reactions, which is only safe while the call cannot finish under them: a hold keeps it open
// until the client has sent its last message (Close) or the read side has ended (the daemon
// finished the call, e.g. refused it), and nothing is started after the hold is gone.
class OpStream::Reactor final : public grpc::ClientBidiReactor<v1::StreamRequest, v1::StreamResponse> {
 public:
  static constexpr int kMaxOpsPerMessage = 1024;

  explicit Reactor(Client* client) : client_(client) {
    client_->stub()->async()->Stream(&ctx_, this);
    AddHold();
    StartRead(&response_);
    StartCall();
  }

  void Submit(OpKind kind, const Extent& extent, const Buffer& buffer, size_t buffer_offset,
              OpCallback done) {
    v1::StreamOp op;
    absl::Status s = kind == OpKind::kWrite
                         ? FillRequest(*client_, extent, buffer, buffer_offset, op.mutable_write())
                         : FillRequest(*client_, extent, buffer, buffer_offset, op.mutable_read());
    if (kind == OpKind::kReadSync) op.mutable_read()->set_sync(true);
    if (!s.ok()) {
      done(s);
      return;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (closing_ || ended_) {
        // An op after the call failed gets the call's error (e.g. the daemon refused the
        // stream); after a clean end or Close, FAILED_PRECONDITION.
        s = ended_ && !status_.ok()
                ? absl::Status(status_.code(), absl::StrCat("stream has ended: ", status_.message()))
                : absl::FailedPreconditionError(ended_ ? "stream has ended" : "stream is closed");
      } else {
        const uint64_t id = next_id_++;
        op.set_id(id);
        pending_.emplace(id, std::move(done));
        unsent_.push_back(std::move(op));
        // Submitted from an answer's callback: OnReadDone writes once all have run. (Not a
        // CompletionBatch: that would let another stream's burst run this one's flush, after
        // this stream may have been closed and destroyed.)
        if (delivering_ && delivering_thread_ == std::this_thread::get_id()) return;
        WriteNextLocked();
        return;
      }
    }
    done(s);
  }

  absl::Status Close() {
    std::unique_lock<std::mutex> lock(mu_);
    if (!closing_) {
      closing_ = true;
      WriteNextLocked();
    }
    cv_.wait(lock, [this] { return done_; });
    return status_;
  }

  void OnWriteDone(bool ok) override {
    std::lock_guard<std::mutex> lock(mu_);
    writing_ = false;
    if (!ok) {
      write_failed_ = true;  // the call is over; OnDone reports why
      return;
    }
    WriteNextLocked();
  }

  void OnWritesDoneDone(bool ok) override {}

  void OnReadDone(bool ok) override {
    if (!ok) {
      // The call is over (the daemon finished it): let OnDone come.
      std::lock_guard<std::mutex> lock(mu_);
      ReleaseHoldLocked();
      return;
    }
    std::vector<std::pair<OpCallback, const v1::StreamResult*>> ready;
    ready.reserve(static_cast<size_t>(response_.results_size()));
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (const v1::StreamResult& r : response_.results()) {
        auto it = pending_.find(r.id());
        if (it == pending_.end()) continue;  // not ours: ignore rather than misattribute
        ready.emplace_back(std::move(it->second), &r);
        pending_.erase(it);
      }
      delivering_ = true;
      delivering_thread_ = std::this_thread::get_id();
    }
    for (auto& [cb, r] : ready) {
      if (r->code() == 0) {
        cb(OpResult{r->bytes(), r->service_ns(), r->synced()});
      } else {
        cb(absl::Status(static_cast<absl::StatusCode>(r->code()), r->message()));
      }
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      delivering_ = false;
      WriteNextLocked();
    }
    StartRead(&response_);
  }

  void OnDone(const grpc::Status& s) override {
    absl::flat_hash_map<uint64_t, OpCallback> orphans;
    absl::Status status = FromGrpcStatus(s);
    {
      // From here Submit refuses, so no op can join pending_ after this swap.
      std::lock_guard<std::mutex> lock(mu_);
      orphans.swap(pending_);
      unsent_.clear();
      if (status.ok() && !orphans.empty()) {
        status = absl::InternalError("stream ended with ops unanswered");
      }
      status_ = status;
      ended_ = true;
    }
    for (auto& [id, cb] : orphans) {
      cb(status.ok() ? absl::UnavailableError("stream ended before the op was answered") : status);
    }
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
    cv_.notify_all();
  }

 private:
  void ReleaseHoldLocked() {
    if (hold_released_) return;
    hold_released_ = true;
    RemoveHold();
  }

  void WriteNextLocked() {
    if (writing_ || write_failed_ || hold_released_) return;
    if (!unsent_.empty()) {
      writing_ = true;
      out_.Clear();
      const size_t n = std::min<size_t>(unsent_.size(), kMaxOpsPerMessage);
      out_.mutable_ops()->Reserve(static_cast<int>(n));
      for (size_t i = 0; i < n; ++i) {
        *out_.add_ops() = std::move(unsent_.front());
        unsent_.pop_front();
      }
      StartWrite(&out_);
    } else if (closing_ && !writes_done_sent_) {
      writes_done_sent_ = true;
      StartWritesDone();
      ReleaseHoldLocked();  // the client will start nothing more
    }
  }

  Client* client_;
  grpc::ClientContext ctx_;
  v1::StreamResponse response_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<v1::StreamOp> unsent_;  // submitted, not yet in a message
  v1::StreamRequest out_;            // the message being written
  absl::flat_hash_map<uint64_t, OpCallback> pending_;
  uint64_t next_id_ = 1;
  bool writing_ = false;
  bool delivering_ = false;  // OnReadDone is running answer callbacks on delivering_thread_
  std::thread::id delivering_thread_;
  bool write_failed_ = false;
  bool closing_ = false;
  bool writes_done_sent_ = false;
  bool hold_released_ = false;  // after this, nothing may be started on the call
  bool ended_ = false;          // OnDone has begun: Submit refuses
  bool done_ = false;           // OnDone has answered every op
  absl::Status status_;
};

OpStream::OpStream(std::unique_ptr<Reactor> reactor) : reactor_(std::move(reactor)) {}
OpStream::~OpStream() { (void)reactor_->Close(); }

void OpStream::Submit(OpKind kind, const Extent& extent, const Buffer& buffer,
                      size_t buffer_offset, OpCallback done) {
  reactor_->Submit(kind, extent, buffer, buffer_offset, std::move(done));
}

absl::Status OpStream::Close() { return reactor_->Close(); }

absl::StatusOr<std::unique_ptr<OpStream>> Client::OpenStream() {
  return std::unique_ptr<OpStream>(new OpStream(std::make_unique<OpStream::Reactor>(this)));
}

}  // namespace gdrstore
