#include "client/src/host_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace gdr {

absl::StatusOr<SharedHostMemory> AllocateSharedHostMemory(size_t bytes) {
  auto fail = [bytes](const char* call) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot allocate ", bytes, " bytes: ", call, ": ", strerror(errno)));
  };
  const int fd = ::memfd_create("gdrstore-buffer", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return fail("memfd_create");
  absl::Cleanup close_fd = [fd] { ::close(fd); };
  if (::ftruncate(fd, static_cast<off_t>(bytes)) != 0) return fail("ftruncate");
  if (::fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) != 0) return fail("F_ADD_SEALS");
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return fail("mmap");
  std::move(close_fd).Cancel();
  return SharedHostMemory{static_cast<std::byte*>(p), bytes, fd};
}

void FreeSharedHostMemory(const SharedHostMemory& mem) {
  ::munmap(mem.data, mem.bytes);
  ::close(mem.fd);
}

absl::StatusOr<bool> HostRangeWritable(const void* p, size_t n) {
  const uint64_t begin = reinterpret_cast<uint64_t>(p);
  const uint64_t end = begin + n;
  if (n == 0 || end < begin) {
    return absl::InvalidArgumentError(absl::StrFormat("host range %p (+%u bytes) is empty or wraps",
                                                      p, n));
  }
  FILE* maps = std::fopen("/proc/self/maps", "r");
  if (maps == nullptr) return absl::InternalError("cannot read /proc/self/maps");
  // Mappings are listed in address order: walk them while they cover [begin, end) without gaps.
  uint64_t covered = begin;
  bool writable = true;
  char line[512];
  while (covered < end && std::fgets(line, sizeof(line), maps) != nullptr) {
    uint64_t lo = 0, hi = 0;
    char perms[5] = {};
    if (std::sscanf(line, "%" SCNx64 "-%" SCNx64 " %4s", &lo, &hi, perms) != 3) continue;
    if (hi <= covered) continue;
    if (lo > covered) break;  // a gap
    if (perms[0] != 'r') break;  // mapped, but not even readable: as good as absent
    writable &= perms[1] == 'w';
    covered = hi;
  }
  std::fclose(maps);
  if (covered < end) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "host memory %p (+%u bytes): byte %#x is not mapped readable in this process (freed, "
        "or not host memory?)",
        p, n, covered));
  }
  return writable;
}

}  // namespace gdr
