// Striped puts of a seeded pattern and gets checked against it, for the cluster tests.
#pragma once

#include <cstdint>
#include <cstring>
#include <span>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/base/pattern.h"
#include "gdrstore/cluster.h"

namespace gdr::integ {

inline absl::Status PutPattern(gdrstore::ClusterClient& c, const gdrstore::ClusterBuffer& buf,
                        const std::string& volume, uint64_t offset, uint64_t length,
                        uint64_t salt) {
  const uint64_t seed = PatternSeed(volume, salt);
  PatternFill(seed, offset, std::span(buf.data(), length));
  return c.Put(volume, offset, length, buf);
}

inline absl::Status GetVerified(gdrstore::ClusterClient& c, const gdrstore::ClusterBuffer& buf,
                         const std::string& volume, uint64_t offset, uint64_t length,
                         uint64_t salt) {
  std::memset(buf.data(), 0xEE, length);
  if (absl::Status st = c.Get(volume, offset, length, buf); !st.ok()) return st;
  auto bad = PatternMismatch(PatternSeed(volume, salt), offset,
                             std::span<const std::byte>(buf.data(), length));
  if (bad) {
    return absl::DataLossError(absl::StrCat("byte ", *bad, " of [", offset, ", +", length,
                                            ") differs"));
  }
  return absl::OkStatus();
}

}  // namespace gdr::integ
