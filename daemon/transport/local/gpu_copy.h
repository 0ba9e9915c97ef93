// How the local transport moves bytes between store pages and a client's GPU memory: straight
// from the pages where they are page-locked (read-write, or read-only where the kernel refuses a
// writable long-term lock on a shared file mapping, which serves gets), otherwise through a
// copy thread's own page-locked bounce slots, pipelined (staged_copy.h), so no copy runs from
// pageable memory and none waits for a lock. The locks are taken in pieces off the copy path
// (page_locker.h); this file gives them their CUDA side.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "common/cuda/async_copy.h"
#include "common/cuda/gpu_ipc.h"
#include "daemon/store/direction.h"
#include "daemon/store/store.h"
#include "daemon/transport/local/page_locker.h"

namespace gdr {

// One volume's page locks (its VolumeLocks), kept as the volume's attachment: every piece is
// unlocked when it goes, before the volume's pages are unmapped.
class StorePin final : public Volume::Attachment {
 public:
  // `fd`: the volume's file (Volume::fd(), -1 for memory), which staged gets read.
  StorePin(std::shared_ptr<VolumeLocks> locks, int fd) : locks_(std::move(locks)), fd_(fd) {}
  ~StorePin() override { locks_->Close(); }
  const std::shared_ptr<VolumeLocks>& locks() const { return locks_; }
  int fd() const { return fd_; }

 private:
  const std::shared_ptr<VolumeLocks> locks_;
  const int fd_;
};

// Locks a piece with cuMemHostRegister (cuda::PinnedHostRange), portable; read-only on request.
PieceLockFn CudaPieceLock();

// A copy thread's page-locked bounce slots and the copier that runs their GPU copies, made on
// first use (Ensure, thread-safe: the locker's start may make them ahead of the first copy; a
// failure is tried again on the next call).
class BounceBuffer {
 public:
  BounceBuffer(size_t slot_bytes, int slots) : slot_bytes_(slot_bytes), count_(slots) {}
  ~BounceBuffer();
  BounceBuffer(const BounceBuffer&) = delete;
  BounceBuffer& operator=(const BounceBuffer&) = delete;
  // The slots, mapped and locked once; the error of doing so.
  absl::Status Ensure();
  std::span<std::byte* const> slots() const { return slots_; }
  size_t slot_bytes() const { return slot_bytes_; }
  // Only after Ensure succeeded, on the copy thread.
  cuda::AsyncCopier& copier() { return *copier_; }

 private:
  const size_t slot_bytes_;
  const int count_;
  // Written once, under mu_, before Ensure first returns OK; read after that without it.
  absl::Mutex mu_;
  std::byte* data_ = nullptr;
  std::unique_ptr<cuda::PinnedHostRange> pinned_;
  std::vector<std::byte*> slots_;
  std::unique_ptr<cuda::AsyncCopier> copier_;  // goes first: it waits for copies in flight
};

// Copies `n` bytes between `store` and `gpu` at `gpu_offset` in `direction`: straight from the
// pieces `pin` (may be null: a volume outside the store's set) has locked for it, the rest
// staged through `bounce`, a copy never spanning two pieces' locks. A store page that faults
// (a file volume's file cut short) ends it with the fault's error. `staged_bytes`: how many
// went through the bounce slots.
absl::Status CopyStoreGpu(const cuda::ImportedGpuMemory& gpu, uint64_t gpu_offset,
                          std::byte* store, uint64_t n, Direction direction, const StorePin* pin,
                          BounceBuffer& bounce, uint64_t* staged_bytes);

}  // namespace gdr
