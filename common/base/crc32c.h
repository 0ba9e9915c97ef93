// CRC32C (Castagnoli; the checksum of iSCSI, ext4 and NVMe) of bytes in memory, computed by
// ISA-L (SSE4.2 / PCLMUL / AVX-512 chosen at run time). Standard form: Crc32c("123456789") is
// 0xE3069283; Crc32c(b, nb, Crc32c(a, na)) is the CRC32C of a then b.
#pragma once

#include <cstddef>
#include <cstdint>

namespace gdr {

uint32_t Crc32c(const void* data, size_t n, uint32_t crc = 0);

}  // namespace gdr
