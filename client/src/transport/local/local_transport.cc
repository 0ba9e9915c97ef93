#include "client/src/transport/local/local_transport.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "client/src/transport/op_path.h"
#include "common/cuda/gpu_ipc.h"

namespace gdr {

namespace v1 = gdrstore::v1;

absl::StatusOr<std::shared_ptr<LocalTransport>> LocalTransport::Open(
    const std::string& socket_path, absl::Duration timeout) {
  absl::StatusOr<std::unique_ptr<handoff::HandoffClient>> session =
      handoff::HandoffClient::Connect(socket_path, absl::StrCat("gdrstore client ", getpid()),
                                      timeout);
  if (!session.ok()) return session.status();
  return Over(std::move(*session), /*agent=*/false);
}

std::shared_ptr<LocalTransport> LocalTransport::Over(
    std::shared_ptr<handoff::HandoffClient> session, bool agent) {
  return std::shared_ptr<LocalTransport>(new LocalTransport(std::move(session), agent));
}

LocalTransport::~LocalTransport() { Close(); }

absl::StatusOr<std::function<void()>> LocalTransport::Register(
    const std::shared_ptr<Region>& region) {
  handoff::Register r;
  r.address = region->base;
  r.size = region->size;
  r.writable = region->writable;
  int fd = -1;
  cuda::GpuExport exported;
  // A range mapped from several VMM allocations goes as one descriptor each (REGISTER_CHUNK).
  std::vector<handoff::HandoffClient::Chunk> chunks;
  if (region->handed_over) {
    // Handed to this process: handed on as it came (imported memory cannot be exported again).
    const gdrstore::HandedOver& h = *region->handed_over;
    switch (h.kind) {
      case gdrstore::HandedOver::Kind::kHostMemfd:
        r.kind = handoff::MemoryKind::kHostMemfd;
        break;
      case gdrstore::HandedOver::Kind::kGpuIpcHandle:
        r.kind = handoff::MemoryKind::kGpuIpc;
        break;
      case gdrstore::HandedOver::Kind::kGpuVmmFd:
        r.kind = h.chunks.empty() ? handoff::MemoryKind::kGpuVmmFd
                                  : handoff::MemoryKind::kGpuVmmChunks;
        break;
    }
    for (const gdrstore::HandedOver::VmmChunk& c : h.chunks) chunks.push_back({c.fd, c.size});
    r.offset = h.offset;
    r.allocation_size = h.allocation_size;
    static_assert(sizeof(h.ipc_handle) == sizeof(r.ipc_handle));
    std::copy(h.ipc_handle.begin(), h.ipc_handle.end(), r.ipc_handle.begin());
    r.gpu = h.gpu;
    fd = h.fd;
  } else if (region->gpu != nullptr) {
    absl::StatusOr<cuda::GpuExport> got =
        cuda::ExportRange(region->base, region->size, handoff::kMaxChunks);
    if (!got.ok()) return got.status();
    exported = std::move(*got);
    if (exported.kind == cuda::GpuExport::Kind::kIpcHandle) {
      r.kind = handoff::MemoryKind::kGpuIpc;
    } else if (exported.chunks.size() == 1) {
      r.kind = handoff::MemoryKind::kGpuVmmFd;
      fd = exported.chunks[0].fd.get();
    } else {
      r.kind = handoff::MemoryKind::kGpuVmmChunks;
      for (const cuda::ExportedChunk& c : exported.chunks) chunks.push_back({c.fd.get(), c.size});
    }
    r.offset = region->base - exported.allocation_base;
    r.allocation_size = exported.allocation_size;
    r.ipc_handle = exported.ipc_handle;
    r.gpu = exported.pci;
  } else if (region->memfd >= 0) {
    r.kind = handoff::MemoryKind::kHostMemfd;
    r.offset = 0;
    fd = region->memfd;
  } else {
    return absl::FailedPreconditionError(absl::StrCat(
        "host memory the caller owns cannot be handed to ", agent_ ? "the node agent" : "the daemon",
        " without a copy: allocate the buffer with Client::AllocateBuffer (Python: "
        "Client.allocate), whose memory is shareable, and fill it in place"));
  }
  if (r.kind == handoff::MemoryKind::kGpuIpc) {
    region->gpu_way = "cuda-ipc";
  } else if (r.kind != handoff::MemoryKind::kHostMemfd) {
    region->gpu_way = "vmm-fd";  // one allocation or several side by side alike
  }
  absl::StatusOr<uint32_t> rkey = chunks.empty() ? session_->Register(r, fd)
                                                 : session_->RegisterChunks(r, chunks);
  if (!rkey.ok()) return rkey.status();
  region->rkey = *rkey;
  return [session = session_, rkey = *rkey] { (void)session->Deregister(rkey); };
}

void LocalTransport::DescribeEndpoint(v1::RemoteBuffer* buffer) const {
  v1::LocalEndpoint* local = buffer->mutable_local();
  local->set_session(session_->session());
  local->set_key(session_->key());
}

void LocalTransport::Close() { session_->Close(); }

absl::Status LocalTransport::session_status() const { return session_->status(); }

std::string LocalTransport::HopTo(const Region& region, int rail) const {
  return Hop(agent_ ? "agent" : "local", "", region);
}

void LocalTransport::FillInfo(gdrstore::TransportInfo* info) const {
  info->kind = gdrstore::Transport::kLocal;
  info->local_socket = session_->socket_path();
  info->through_agent = agent_;
  info->description = absl::StrCat(agent_ ? "local to the node agent " : "local to the daemon ",
                                   session_->server(), " through ", session_->socket_path(),
                                   " (session ", session_->session(), ")");
}

absl::StatusOr<std::shared_ptr<ClientTransport>> LocalTransport::Attach(
    v1::GdrStore::Stub* stub) {
  return absl::FailedPreconditionError(
      "transport local serves the one daemon it was opened with; reach a cluster's members "
      "over tcp, rc or dc, or through the node agent");
}

}  // namespace gdr
