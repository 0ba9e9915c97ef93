#include "common/base/crc32c.h"

#include <isa-l/crc.h>

#include <algorithm>
#include <climits>

namespace gdr {

uint32_t Crc32c(const void* data, size_t n, uint32_t crc) {
  // ISA-L works on the inverted register and takes an int length: invert around it and feed
  // it at most 1 GiB at a time.
  unsigned int state = ~crc;
  auto* p = static_cast<unsigned char*>(const_cast<void*>(data));
  while (n > 0) {
    const size_t step = std::min<size_t>(n, size_t{1} << 30);
    state = crc32_iscsi(p, static_cast<int>(step), state);
    p += step;
    n -= step;
  }
  return ~state;
}

}  // namespace gdr
