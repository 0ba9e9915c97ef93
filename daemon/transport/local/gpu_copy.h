// How the local transport moves bytes between store pages and a client's GPU memory: straight
// from the pages where they are page-locked (read-write, or read-only where the kernel refuses a
// writable long-term lock on a shared file mapping, which serves gets), otherwise through a
// copy thread's own page-locked bounce buffer, so no copy runs from pageable memory.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/base/call_once.h"
#include "absl/status/status.h"
#include "common/cuda/gpu_ipc.h"
#include "daemon/store/direction.h"
#include "daemon/store/store.h"

namespace gdr {

// One volume's pages, page-locked for GPU copies on the first GPU op that touches the volume.
class StorePin final : public Volume::Attachment {
 public:
  enum class Mode { kUnlocked, kReadWrite, kReadOnly };
  StorePin(std::string name, std::byte* data, uint64_t size)
      : name_(std::move(name)), data_(data), size_(size) {}
  // Locks the pages once (read-write, else read-only); a large volume takes a while.
  void Ensure();
  // The mode once Ensure has run (kUnlocked before).
  Mode mode() const;
  // Whether a copy in `direction` may run straight from or into the pages.
  bool Direct(Direction direction) const;
  const std::string& name() const { return name_; }

 private:
  const std::string name_;
  std::byte* const data_;
  const uint64_t size_;
  absl::once_flag once_;
  std::unique_ptr<cuda::PinnedHostRange> pinned_;  // written once, inside once_
  Mode mode_ = Mode::kUnlocked;                    // likewise
  std::atomic<bool> done_{false};
};

// A copy thread's page-locked bounce buffer, made on its first staged copy.
class BounceBuffer {
 public:
  explicit BounceBuffer(size_t bytes) : bytes_(bytes) {}
  ~BounceBuffer();
  BounceBuffer(const BounceBuffer&) = delete;
  BounceBuffer& operator=(const BounceBuffer&) = delete;
  // The buffer, mapped and locked on first use; the error of doing so.
  absl::Status Ensure();
  std::byte* data() const { return data_; }
  size_t size() const { return bytes_; }

 private:
  const size_t bytes_;
  std::byte* data_ = nullptr;
  std::unique_ptr<cuda::PinnedHostRange> pinned_;
};

// Copies `n` bytes between `store` and `gpu` at `gpu_offset` in `direction`: straight when
// `pin` (may be null: a volume outside the store's set) allows it, else staged through
// `bounce`. A store page that faults (a file volume's file cut short) ends it with the fault's
// error. `staged` tells which way it went.
absl::Status CopyStoreGpu(const cuda::ImportedGpuMemory& gpu, uint64_t gpu_offset,
                          std::byte* store, uint64_t n, Direction direction, const StorePin* pin,
                          BounceBuffer& bounce, bool* staged);

}  // namespace gdr
