// A registered memory region: memory the device may access under an lkey (locally) and an
// rkey (remotely, when the access flags allow). Host memory now; GPU memory registers through
// the same class once a dma-buf fd is available.
#pragma once

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "common/verbs/relaxed_ordering.h"
#include "common/verbs/verbs_ptr.h"

namespace gdr::verbs {

class MemoryRegion {
 public:
  // ibv_reg_mr of [addr, addr+length) on `pd` with `access` (IBV_ACCESS_*) and relaxed ordering
  // where the kernel accepts it (relaxed_ordering.h). INVALID_ARGUMENT
  // for a null or empty range; RESOURCE_EXHAUSTED when the memlock limit refuses it (the message
  // says to raise LimitMEMLOCK); the errno status of ibv_reg_mr otherwise.
  static absl::StatusOr<std::unique_ptr<MemoryRegion>> Register(ibv_pd* pd, void* addr,
                                                                size_t length, int access);
  // Deregisters. The memory itself is not the region's and stays mapped.
  ~MemoryRegion() = default;

  uint32_t lkey() const { return mr_->lkey; }
  uint32_t rkey() const { return mr_->rkey; }
  std::byte* data() const { return static_cast<std::byte*>(mr_->addr); }
  size_t size() const { return mr_->length; }
  uint64_t address() const { return reinterpret_cast<uint64_t>(mr_->addr); }
  // True when [p, p+len) lies inside the region.
  bool Contains(const void* p, size_t len) const;
  const RelaxedOrdering& relaxed_ordering() const { return relaxed_ordering_; }

 private:
  MemoryRegion(VerbsPtr<ibv_mr> mr, RelaxedOrdering ro)
      : mr_(std::move(mr)), relaxed_ordering_(std::move(ro)) {}
  VerbsPtr<ibv_mr> mr_;
  RelaxedOrdering relaxed_ordering_;
};

}  // namespace gdr::verbs
