#include "tests/integration/verified_ops.h"

#include <algorithm>
#include <cstring>
#include <span>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/base/pattern.h"

namespace gdr::integ {

SaltMap::SaltMap(uint64_t volume_size) : size_(volume_size) { runs_[0] = 0; }

void SaltMap::Assign(uint64_t offset, uint64_t length, uint64_t salt) {
  if (length == 0) return;
  const uint64_t end = offset + length;
  // Salt in force at `end`, so the run after the assigned range keeps it.
  if (end < size_) {
    auto at_end = std::prev(runs_.upper_bound(end));
    runs_[end] = at_end->second;
  }
  runs_.erase(runs_.lower_bound(offset), runs_.lower_bound(end));
  runs_[offset] = salt;
}

std::vector<SaltMap::Piece> SaltMap::Pieces(uint64_t offset, uint64_t length) const {
  std::vector<Piece> out;
  const uint64_t end = offset + length;
  auto it = std::prev(runs_.upper_bound(offset));
  uint64_t pos = offset;
  while (pos < end) {
    auto next = std::next(it);
    const uint64_t run_end = next == runs_.end() ? size_ : std::min(next->first, size_);
    const uint64_t piece_end = std::min(end, run_end);
    out.push_back({pos, piece_end - pos, it->second});
    pos = piece_end;
    it = next;
  }
  return out;
}

namespace {

struct Guards {
  size_t before_at, before_len, after_at, after_len;
};

Guards GuardRanges(const gdrstore::Buffer& buffer, size_t offset, size_t length) {
  Guards g;
  g.before_len = std::min(offset, kGuardBytes);
  g.before_at = offset - g.before_len;
  g.after_at = offset + length;
  g.after_len = std::min(buffer.size() - g.after_at, kGuardBytes);
  return g;
}

constexpr std::byte kGuard{0xE7};

}  // namespace

absl::Status VerifiedWrite(gdrstore::Client& client, const gdrstore::Buffer& buffer,
                           size_t buffer_offset, const gdrstore::Extent& extent,
                           const SaltMap& salts) {
  const size_t len = extent.length;
  std::byte* dst = buffer.data() + buffer_offset;
  const std::vector<SaltMap::Piece> pieces = salts.Pieces(extent.offset, len);
  // Poison: zeros, with the first and last byte the complement of what must arrive.
  std::memset(dst, 0, len);
  const uint64_t first_seed = PatternSeed(extent.volume, pieces.front().salt);
  const uint64_t last_seed = PatternSeed(extent.volume, pieces.back().salt);
  dst[0] = static_cast<std::byte>(~PatternByte(first_seed, extent.offset));
  dst[len - 1] = static_cast<std::byte>(~PatternByte(last_seed, extent.offset + len - 1));
  const Guards g = GuardRanges(buffer, buffer_offset, len);
  std::memset(buffer.data() + g.before_at, static_cast<int>(kGuard), g.before_len);
  std::memset(buffer.data() + g.after_at, static_cast<int>(kGuard), g.after_len);

  absl::StatusOr<gdrstore::OpResult> r = client.Write(extent, buffer, buffer_offset);
  const std::string what = absl::StrCat("Write ", extent.volume, "@", extent.offset, " +", len,
                                        " -> buffer+", buffer_offset);
  if (!r.ok())
    return absl::Status(r.status().code(), absl::StrCat(what, ": ", r.status().message()));
  if (r->bytes != len) {
    return absl::InternalError(absl::StrCat(what, ": response says ", r->bytes, " bytes"));
  }
  for (const SaltMap::Piece& p : pieces) {
    const uint64_t seed = PatternSeed(extent.volume, p.salt);
    std::span<const std::byte> got(dst + (p.offset - extent.offset), p.length);
    if (auto bad = PatternMismatch(seed, p.offset, got)) {
      return absl::DataLossError(
          absl::StrFormat("%s: volume byte %u (salt %u) is 0x%02x, want 0x%02x", what,
                          p.offset + *bad, p.salt, static_cast<unsigned>(got[*bad]),
                          static_cast<unsigned>(PatternByte(seed, p.offset + *bad))));
    }
  }
  for (size_t i = 0; i < g.before_len; ++i) {
    if (buffer.data()[g.before_at + i] != kGuard) {
      return absl::DataLossError(absl::StrCat(what, ": guard byte ", g.before_len - i,
                                              " before the range was overwritten"));
    }
  }
  for (size_t i = 0; i < g.after_len; ++i) {
    if (buffer.data()[g.after_at + i] != kGuard) {
      return absl::DataLossError(
          absl::StrCat(what, ": guard byte ", i, " after the range was overwritten"));
    }
  }
  return absl::OkStatus();
}

absl::Status VerifiedRead(gdrstore::Client& client, const gdrstore::Buffer& buffer,
                          size_t buffer_offset, size_t check_offset, const gdrstore::Extent& extent,
                          uint64_t salt, SaltMap* salts) {
  const size_t len = extent.length;
  PatternFill(PatternSeed(extent.volume, salt), extent.offset,
              std::span<std::byte>(buffer.data() + buffer_offset, len));
  absl::StatusOr<gdrstore::OpResult> r = client.Read(extent, buffer, buffer_offset);
  const std::string what = absl::StrCat("Read buffer+", buffer_offset, " -> ", extent.volume, "@",
                                        extent.offset, " +", len, " (salt ", salt, ")");
  if (!r.ok())
    return absl::Status(r.status().code(), absl::StrCat(what, ": ", r.status().message()));
  if (r->bytes != len) {
    return absl::InternalError(absl::StrCat(what, ": response says ", r->bytes, " bytes"));
  }
  salts->Assign(extent.offset, len, salt);
  absl::Status back = VerifiedWrite(client, buffer, check_offset, extent, *salts);
  if (!back.ok()) return absl::Status(back.code(), absl::StrCat(what, ", then ", back.message()));
  return absl::OkStatus();
}

}  // namespace gdr::integ
