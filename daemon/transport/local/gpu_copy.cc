#include "daemon/transport/local/gpu_copy.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/base/log.h"
#include "common/base/units.h"
#include "daemon/store/mapping_guard.h"

namespace gdr {

void StorePin::Ensure() {
  absl::call_once(once_, [this] {
    absl::StatusOr<std::unique_ptr<cuda::PinnedHostRange>> rw =
        cuda::PinnedHostRange::Create(data_, size_);
    if (rw.ok()) {
      pinned_ = std::move(*rw);
      mode_ = Mode::kReadWrite;
      GDR_LOG(kInfo) << "local: volume " << name_ << " page-locked for GPU copies ("
                     << FormatSize(size_) << ")";
    } else {
      // Linux refuses a writable long-term lock on a shared mapping of a file whose pages need
      // dirty tracking (ext4, xfs); a read-only lock it grants, and gets copy from it directly.
      absl::StatusOr<std::unique_ptr<cuda::PinnedHostRange>> ro =
          cuda::PinnedHostRange::Create(data_, size_, /*read_only=*/true);
      if (ro.ok()) {
        pinned_ = std::move(*ro);
        mode_ = Mode::kReadOnly;
        GDR_LOG(kInfo) << "local: volume " << name_ << " page-locked read-only for GPU copies ("
                       << FormatSize(size_) << "; puts from GPU memory go through bounce "
                       << "buffers): " << rw.status().message();
      } else {
        GDR_LOG(kWarning) << "local: volume " << name_
                          << " cannot be page-locked; GPU copies go through bounce buffers: "
                          << rw.status().message() << "; read-only: " << ro.status().message();
      }
    }
    done_.store(true, std::memory_order_release);
  });
}

StorePin::Mode StorePin::mode() const {
  return done_.load(std::memory_order_acquire) ? mode_ : Mode::kUnlocked;
}

bool StorePin::Direct(Direction direction) const {
  const Mode m = mode();
  // A get reads the store pages (host -> GPU); a put writes them, which a read-only lock
  // does not allow a GPU to do.
  return m == Mode::kReadWrite || (m == Mode::kReadOnly && direction == Direction::kStoreToClient);
}

BounceBuffer::~BounceBuffer() {
  pinned_.reset();  // unlocked before the pages go
  if (data_ != nullptr) ::munmap(data_, bytes_);
}

absl::Status BounceBuffer::Ensure() {
  if (data_ != nullptr) return absl::OkStatus();
  void* p = ::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    return absl::ResourceExhaustedError(
        absl::StrCat("local: cannot map a ", FormatSize(bytes_), " bounce buffer"));
  }
  absl::StatusOr<std::unique_ptr<cuda::PinnedHostRange>> pinned =
      cuda::PinnedHostRange::Create(p, bytes_);
  if (!pinned.ok()) {
    ::munmap(p, bytes_);
    return absl::Status(pinned.status().code(), absl::StrCat("local: bounce buffer: ",
                                                             pinned.status().message()));
  }
  data_ = static_cast<std::byte*>(p);
  pinned_ = std::move(*pinned);
  return absl::OkStatus();
}

absl::Status CopyStoreGpu(const cuda::ImportedGpuMemory& gpu, uint64_t gpu_offset,
                          std::byte* store, uint64_t n, Direction direction, const StorePin* pin,
                          BounceBuffer& bounce, bool* staged) {
  const bool to_gpu = direction == Direction::kStoreToClient;
  *staged = pin == nullptr || !pin->Direct(direction);
  if (!*staged) {
    return to_gpu ? gpu.CopyFromHost(gpu_offset, store, n) : gpu.CopyToHost(gpu_offset, store, n);
  }
  if (absl::Status s = bounce.Ensure(); !s.ok()) return s;
  for (uint64_t done = 0; done < n;) {
    const size_t step = static_cast<size_t>(std::min<uint64_t>(n - done, bounce.size()));
    std::byte* page = store + done;
    std::byte* b = bounce.data();
    if (to_gpu) {
      if (std::optional<const void*> f = RunGuarded([&] { std::memcpy(b, page, step); })) {
        return MappingFaultStatus(*f);
      }
      if (absl::Status s = gpu.CopyFromHost(gpu_offset + done, b, step); !s.ok()) return s;
    } else {
      if (absl::Status s = gpu.CopyToHost(gpu_offset + done, b, step); !s.ok()) return s;
      if (std::optional<const void*> f = RunGuarded([&] { std::memcpy(page, b, step); })) {
        return MappingFaultStatus(*f);
      }
    }
    done += step;
  }
  return absl::OkStatus();
}

}  // namespace gdr
