#include "daemon/transport/local/gpu_copy.h"

#include <sys/mman.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/base/units.h"
#include "daemon/transport/local/staged_copy.h"

namespace gdr {

namespace {

class CudaLock final : public PieceLock {
 public:
  explicit CudaLock(std::unique_ptr<cuda::PinnedHostRange> r) : range_(std::move(r)) {}

 private:
  std::unique_ptr<cuda::PinnedHostRange> range_;
};

// The staged path's device: an imported allocation, copied by the thread's AsyncCopier.
class ImportedDevice final : public StagedDevice {
 public:
  ImportedDevice(const cuda::ImportedGpuMemory& gpu, cuda::AsyncCopier& copier)
      : gpu_(gpu), copier_(copier) {}
  absl::Status StartToDevice(int slot, uint64_t offset, const std::byte* host,
                             size_t n) override {
    if (absl::Status s = Check(offset, n); !s.ok()) return s;
    return copier_.StartToDevice(slot, gpu_.ordinal(), gpu_.ptr() + offset, host, n);
  }
  absl::Status StartToHost(int slot, std::byte* host, uint64_t offset, size_t n) override {
    if (absl::Status s = Check(offset, n); !s.ok()) return s;
    return copier_.StartToHost(slot, gpu_.ordinal(), host, gpu_.ptr() + offset, n);
  }
  absl::Status Wait(int slot) override { return copier_.Wait(slot); }

 private:
  absl::Status Check(uint64_t offset, size_t n) const {
    if (offset > gpu_.size() || n > gpu_.size() - offset) {
      return absl::OutOfRangeError(absl::StrCat("[", offset, ", +", n, ") is outside the ",
                                                gpu_.size(), "-byte imported GPU allocation"));
    }
    return absl::OkStatus();
  }
  const cuda::ImportedGpuMemory& gpu_;
  cuda::AsyncCopier& copier_;
};

}  // namespace

PieceLockFn CudaPieceLock() {
  return [](std::byte* p, uint64_t n,
            bool read_only) -> absl::StatusOr<std::unique_ptr<PieceLock>> {
    absl::StatusOr<std::unique_ptr<cuda::PinnedHostRange>> r =
        cuda::PinnedHostRange::Create(p, n, read_only);
    if (!r.ok()) return r.status();
    return std::make_unique<CudaLock>(std::move(*r));
  };
}

BounceBuffer::~BounceBuffer() {
  copier_.reset();  // its copies done before the slots go
  pinned_.reset();  // unlocked before the pages go
  if (data_ != nullptr) ::munmap(data_, slot_bytes_ * static_cast<size_t>(count_));
}

absl::Status BounceBuffer::Ensure() {
  absl::MutexLock lock(&mu_);
  if (copier_ != nullptr) return absl::OkStatus();
  const size_t bytes = slot_bytes_ * static_cast<size_t>(count_);
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    return absl::ResourceExhaustedError(
        absl::StrCat("local: cannot map a ", FormatSize(bytes), " bounce buffer"));
  }
  absl::StatusOr<std::unique_ptr<cuda::PinnedHostRange>> pinned =
      cuda::PinnedHostRange::Create(p, bytes);
  if (!pinned.ok()) {
    ::munmap(p, bytes);
    return absl::Status(pinned.status().code(),
                        absl::StrCat("local: bounce buffer: ", pinned.status().message()));
  }
  data_ = static_cast<std::byte*>(p);
  pinned_ = std::move(*pinned);
  for (int i = 0; i < count_; ++i) slots_.push_back(data_ + slot_bytes_ * i);
  copier_ = std::make_unique<cuda::AsyncCopier>(count_);
  return absl::OkStatus();
}

absl::Status CopyStoreGpu(const cuda::ImportedGpuMemory& gpu, uint64_t gpu_offset,
                          std::byte* store, uint64_t n, Direction direction, const StorePin* pin,
                          BounceBuffer& bounce, uint64_t* staged_bytes) {
  *staged_bytes = 0;
  const bool to_gpu = direction == Direction::kStoreToClient;
  const VolumeLocks* locks = pin != nullptr ? pin->locks().get() : nullptr;
  uint64_t base = 0;  // of `store` in the volume
  if (locks != nullptr) {
    if (store < locks->data() || static_cast<uint64_t>(store - locks->data()) > locks->size() ||
        n > locks->size() - static_cast<uint64_t>(store - locks->data())) {
      locks = nullptr;  // not the volume's bytes (never expected): staged from the mapping
    } else {
      base = static_cast<uint64_t>(store - locks->data());
    }
  }
  for (uint64_t done = 0; done < n;) {
    uint64_t end = n;
    bool direct = false;
    if (locks != nullptr) {
      direct = locks->Direct(base + done, direction);
      end = std::min(n, locks->PieceEnd(base + done) - base);
      // Unlocked pieces in a row are one staged copy (one pipeline); a locked one is its own.
      while (!direct && end < n && !locks->Direct(base + end, direction)) {
        end = std::min(n, locks->PieceEnd(base + end) - base);
      }
    }
    const uint64_t len = end - done;
    if (direct) {
      absl::Status s = to_gpu ? gpu.CopyFromHost(gpu_offset + done, store + done, len)
                              : gpu.CopyToHost(gpu_offset + done, store + done, len);
      if (!s.ok()) return s;
    } else {
      if (absl::Status s = bounce.Ensure(); !s.ok()) return s;
      ImportedDevice device(gpu, bounce.copier());
      // A file volume's get reads its file; a volume outside the set (no pin) its mapping.
      StoreBytes bytes{store + done, pin != nullptr && locks != nullptr ? pin->fd() : -1,
                       base + done};
      absl::Status s = StagedCopy(device, gpu_offset + done, bytes, len, direction,
                                  bounce.slots(), bounce.slot_bytes());
      if (!s.ok()) return s;
      *staged_bytes += len;
    }
    done = end;
  }
  return absl::OkStatus();
}

}  // namespace gdr
