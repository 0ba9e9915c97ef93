#include <cstring>

#include "client/src/transport/region.h"
#include "gdrstore/client.h"

namespace gdrstore {

Buffer::Buffer(std::shared_ptr<gdr::Region> region, std::function<void()> withdraw)
    : region_(std::move(region)), withdraw_(std::move(withdraw)) {}
Buffer::~Buffer() {
  if (withdraw_) withdraw_();
}
std::byte* Buffer::data() const { return region_->host; }
bool Buffer::on_gpu() const { return region_->gpu != nullptr; }
int Buffer::gpu_ordinal() const { return region_->gpu ? region_->gpu->ordinal() : -1; }
const std::string& Buffer::gpu_pci() const { return gpu_pci_; }
const std::string& Buffer::rdma_device() const { return rdma_device_; }

absl::Status Buffer::CopyIn(size_t offset, const void* src, size_t n) const {
  if (region_->gpu) return region_->gpu->CopyFromHost(offset, src, n);
  if (absl::Status s = gdr::CheckRange(offset, n, region_->size, absl::StatusCode::kOutOfRange);
      !s.ok()) {
    return s;
  }
  if (n > 0) std::memcpy(region_->host + offset, src, n);
  return absl::OkStatus();
}

absl::Status Buffer::CopyOut(size_t offset, void* dst, size_t n) const {
  if (region_->gpu) return region_->gpu->CopyToHost(offset, dst, n);
  if (absl::Status s = gdr::CheckRange(offset, n, region_->size, absl::StatusCode::kOutOfRange);
      !s.ok()) {
    return s;
  }
  if (n > 0) std::memcpy(dst, region_->host + offset, n);
  return absl::OkStatus();
}
size_t Buffer::size() const { return region_->size; }
uint32_t Buffer::rkey() const { return region_->rkey; }
uint64_t Buffer::address() const { return region_->base; }

}  // namespace gdrstore
