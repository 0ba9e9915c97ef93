#include <cstring>

#include "client/src/registration.h"
#include "client/src/transport/region.h"
#include "client/src/write_fence.h"
#include "common/base/status_macros.h"
#include "gdrstore/client.h"

namespace gdrstore {

Buffer::Buffer(std::shared_ptr<gdr::Registration> registration, size_t offset, size_t size)
    : registration_(std::move(registration)),
      offset_(offset),
      size_(size),
      gate_(std::make_shared<gdr::OpGate>()) {}

Buffer::~Buffer() {
  // Memory the caller owns may be freed the moment this returns: nothing may still reach it.
  gate_->WaitIdle();
}

OpCallback Buffer::Track(OpKind kind, OpCallback done) const {
  gate_->Enter();
  // Leave before `done`: a callback may destroy the buffer, whose destructor waits for this op.
  OpCallback tracked = [gate = gate_, done = std::move(done)](absl::StatusOr<OpResult> r) {
    gate->Leave();
    done(std::move(r));
  };
  // Only the daemon's writes into the buffer (gets) need the memory's fence.
  if (kind != OpKind::kWrite) return tracked;
  return gdr::AfterWriteFence(registration_->region()->write_fence, std::move(tracked));
}

std::byte* Buffer::data() const {
  std::byte* host = registration_->region()->host;
  return host != nullptr ? host + offset_ : nullptr;
}
bool Buffer::on_gpu() const { return registration_->region()->gpu != nullptr; }
int Buffer::gpu_ordinal() const {
  const auto& gpu = registration_->region()->gpu;
  return gpu ? gpu->ordinal() : -1;
}
const std::string& Buffer::gpu_pci() const { return gpu_pci_; }
const std::string& Buffer::rdma_device() const { return rdma_device_; }
bool Buffer::writable() const { return registration_->region()->writable; }

absl::Status Buffer::CopyIn(size_t offset, const void* src, size_t n) const {
  if (src == nullptr && n > 0) return absl::InvalidArgumentError("CopyIn: src is null");
  GDR_RETURN_IF_ERROR(gdr::CheckRange(offset, n, size_, absl::StatusCode::kOutOfRange));
  const gdr::Region& region = *registration_->region();
  if (region.gpu) return region.gpu->CopyFromHost(offset_ + offset, src, n);
  if (!region.writable) {
    return absl::FailedPreconditionError("the buffer's memory is mapped read-only");
  }
  if (n > 0) std::memcpy(region.host + offset_ + offset, src, n);
  return absl::OkStatus();
}

absl::Status Buffer::CopyOut(size_t offset, void* dst, size_t n) const {
  if (dst == nullptr && n > 0) return absl::InvalidArgumentError("CopyOut: dst is null");
  GDR_RETURN_IF_ERROR(gdr::CheckRange(offset, n, size_, absl::StatusCode::kOutOfRange));
  const gdr::Region& region = *registration_->region();
  if (region.gpu) return region.gpu->CopyToHost(offset_ + offset, dst, n);
  if (n > 0) std::memcpy(dst, region.host + offset_ + offset, n);
  return absl::OkStatus();
}
size_t Buffer::size() const { return size_; }
uint32_t Buffer::rkey() const { return registration_->region()->rkey; }
uint64_t Buffer::address() const { return registration_->region()->base + offset_; }

}  // namespace gdrstore
