// Verified data ops for the integration tests. A SaltMap models which pattern salt every byte
// of a volume holds (salt 0 = the daemon's initial fill; a Read stores a salted pattern), so a
// Write (store -> buffer) can be checked byte for byte, including bytes earlier Reads stored.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gdrstore/client.h"

namespace gdr::integ {

// Salt of every byte of one volume, as runs. Not thread-safe: give each thread its own map
// (and its own disjoint ranges).
class SaltMap {
 public:
  explicit SaltMap(uint64_t volume_size);
  void Assign(uint64_t offset, uint64_t length, uint64_t salt);
  struct Piece {
    uint64_t offset;
    uint64_t length;
    uint64_t salt;
  };
  std::vector<Piece> Pieces(uint64_t offset, uint64_t length) const;

 private:
  uint64_t size_;
  std::map<uint64_t, uint64_t> runs_;  // run start -> salt; a run ends where the next begins
};

// Bytes around the op's range in the buffer that must survive an op untouched.
inline constexpr size_t kGuardBytes = 64;

// Write (store -> buffer) of `extent` into `buffer` at `buffer_offset`, then checks: OK status,
// bytes == length, every byte equals the pattern of the salt `salts` says, and up to
// kGuardBytes before and after the range are unchanged. The range is poisoned first so that a
// transfer that moved nothing cannot pass. Error text names the first bad byte.
absl::Status VerifiedWrite(gdrstore::Client& client, const gdrstore::Buffer& buffer,
                           size_t buffer_offset, const gdrstore::Extent& extent,
                           const SaltMap& salts);

// Read (buffer -> store) of the (volume, salt) pattern into `extent`, then a VerifiedWrite of
// the same extent (through `buffer` at `check_offset`) proves it landed. Updates `salts`.
absl::Status VerifiedRead(gdrstore::Client& client, const gdrstore::Buffer& buffer,
                          size_t buffer_offset, size_t check_offset, const gdrstore::Extent& extent,
                          uint64_t salt, SaltMap* salts);

}  // namespace gdr::integ
