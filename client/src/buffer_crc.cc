#include "client/src/buffer_crc.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/base/crc32c.h"

namespace gdr {

absl::StatusOr<uint32_t> BufferCrc32c(const gdrstore::Buffer& buffer, size_t offset,
                                      uint64_t length) {
  if (!buffer.on_gpu()) return Crc32c(buffer.data() + offset, length);
  // Device memory: through host memory, 16 MiB at a time.
  constexpr size_t kStep = 16 << 20;
  std::vector<std::byte> staging(std::min<uint64_t>(length, kStep));
  uint32_t crc = 0;
  for (uint64_t done = 0; done < length;) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(length - done, kStep));
    if (absl::Status st = buffer.CopyOut(offset + done, staging.data(), n); !st.ok()) {
      return absl::Status(st.code(), absl::StrCat("copying GPU memory out for its CRC32C: ",
                                                  st.message()));
    }
    crc = Crc32c(staging.data(), n, crc);
    done += n;
  }
  return crc;
}

absl::Status CheckCrc32c(std::optional<uint32_t> daemon, const gdrstore::Buffer& buffer,
                         size_t offset, uint64_t length) {
  if (!daemon) {
    return absl::FailedPreconditionError(
        "the daemon answered without the CRC32C asked for (it predates crc32c)");
  }
  absl::StatusOr<uint32_t> mine = BufferCrc32c(buffer, offset, length);
  if (!mine.ok()) return mine.status();
  if (*mine != *daemon) {
    return absl::DataLossError(absl::StrFormat(
        "CRC32C of %u bytes at buffer offset %u: daemon 0x%08x, buffer 0x%08x", length, offset,
        *daemon, *mine));
  }
  return absl::OkStatus();
}

}  // namespace gdr
