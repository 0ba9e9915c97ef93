#include "tests/common/handoff/peer_bytes.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <utility>

namespace gdr::handoff::test {

SealedMemfd::SealedMemfd(SealedMemfd&& o) noexcept
    : fd(std::move(o.fd)), bytes(std::exchange(o.bytes, nullptr)), size(std::exchange(o.size, 0)) {}

SealedMemfd::~SealedMemfd() {
  if (bytes != nullptr) ::munmap(bytes, size);
}

absl::StatusOr<SealedMemfd> MakeSealedMemfd(size_t size, bool seal) {
  SealedMemfd m;
  m.fd = ScopedFd(::memfd_create("handoff-test", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!m.fd.valid()) return absl::ErrnoToStatus(errno, "memfd_create");
  if (::ftruncate(m.fd.get(), static_cast<off_t>(size)) != 0) {
    return absl::ErrnoToStatus(errno, "ftruncate");
  }
  if (seal && ::fcntl(m.fd.get(), F_ADD_SEALS, F_SEAL_SHRINK) != 0) {
    return absl::ErrnoToStatus(errno, "F_ADD_SEALS");
  }
  void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, m.fd.get(), 0);
  if (p == MAP_FAILED) return absl::ErrnoToStatus(errno, "mmap");
  m.bytes = static_cast<uint8_t*>(p);
  m.size = size;
  return m;
}

}  // namespace gdr::handoff::test
