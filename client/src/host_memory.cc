#include "client/src/host_memory.h"

#include <cinttypes>
#include <cstdint>
#include <cstdio>

#include "absl/strings/str_format.h"

namespace gdr {

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
