#include "client/src/transport/tcp/tcp_transport.h"

#include "absl/strings/str_cat.h"
#include "client/src/transport/op_path.h"
#include "common/base/host_port.h"
#include "common/base/socket.h"
#include "common/wire/tcp_frame.h"

namespace gdr {

namespace v1 = gdrstore::v1;

absl::StatusOr<std::shared_ptr<TcpTransport>> TcpTransport::Open(
    gdrstore::ClientOptions* options) {
  if (options->target_host.empty()) {
    absl::StatusOr<HostPort> daemon = SplitHostPort(options->daemon_address);
    if (!daemon.ok()) return daemon.status();
    if (IsLoopbackHost(daemon->host)) {
      options->target_host = "127.0.0.1";
    } else {
      absl::StatusOr<std::string> local = LocalAddressToward(daemon->host, daemon->port);
      if (!local.ok()) return local.status();
      options->target_host = *local;
    }
  }
  const GpuStagingOptions staging{options->gpu_staging_slot_bytes, options->gpu_staging_slots};
  absl::StatusOr<std::shared_ptr<TcpTarget>> target =
      TcpTarget::Start(options->target_host, options->target_port,
                       options->max_target_connections, staging);
  if (!target.ok()) return target.status();
  return std::shared_ptr<TcpTransport>(new TcpTransport(
      std::move(*target), options->target_host, staging, options->tcp_inline_max));
}

TcpTransport::~TcpTransport() { Close(); }

absl::StatusOr<std::function<void()>> TcpTransport::Register(
    const std::shared_ptr<Region>& region) {
  // GPU memory is copied through the target's pinned staging ring.
  if (region->gpu != nullptr) region->gpu_way = "staged";
  target_->Register(region);
  return [target = target_, rkey = region->rkey] { target->Deregister(rkey); };
}

absl::Status TcpTransport::CanServeGpuMemory() const {
  if (staging_.slot_bytes == 0 || staging_.slots < 2) {
    return absl::InvalidArgumentError("GPU staging needs >= 2 slots of > 0 bytes");
  }
  return absl::OkStatus();
}

void TcpTransport::DescribeEndpoint(v1::RemoteBuffer* buffer) const {
  buffer->mutable_tcp()->set_host(host_);
  buffer->mutable_tcp()->set_port(target_->port());
  buffer->mutable_tcp()->set_secret(target_->secret());
}

void TcpTransport::DescribeEndpoint(const Region& region, int rail,
                                    v1::RemoteBuffer* buffer) const {
  ClientTransport::DescribeEndpoint(region, rail, buffer);
  if (region.gpu == nullptr) return;
  // Within what a daemon takes; a slot outside it leaves the daemon's own size (the ring
  // copies a chunk of any size, a slot at a time).
  if (tcpwire::IsAskableChunk(staging_.slot_bytes)) {
    buffer->mutable_tcp()->set_chunk_bytes(static_cast<uint32_t>(staging_.slot_bytes));
  }
}

void TcpTransport::Close() { target_->Stop(); }

std::string TcpTransport::HopTo(const Region& region, int rail) const {
  return Hop("tcp", "", region);
}

void TcpTransport::FillInfo(gdrstore::TransportInfo* info) const {
  info->kind = gdrstore::Transport::kTcp;
  info->target_host = host_;
  info->target_port = target_->port();
  info->description = absl::StrCat("tcp target ", host_, ":", info->target_port);
  const TcpTargetStats t = target_->stats();
  gdrstore::TargetStats& s = info->target;
  s.refused = t.refused;
  s.gpu_bytes_to_device = t.gpu.bytes_to_device;
  s.gpu_bytes_from_device = t.gpu.bytes_from_device;
  s.gpu_copy_ns = t.gpu.copy_ns;
  s.gpu_wait_ns = t.gpu.wait_ns;
  s.links = t.connections;
}

}  // namespace gdr
