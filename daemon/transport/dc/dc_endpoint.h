// Where a request's DC target is (its validated DcEndpoint, the destination dc ops carry): the
// key an address handle is cached under, the scheduling identity of a DCT, and the DC access
// key wrapper that keeps the secret out of every log line.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <ostream>
#include <string>

#include "absl/hash/hash.h"
#include "absl/status/statusor.h"
#include "daemon/transport/transfer_op.h"
#include "gdrstore/v1/gdrstore.pb.h"

namespace gdr::dc {

using DcGid = std::array<uint8_t, 16>;

// The DC access key a client's DCT was created with. A secret: streaming it prints
// "<dc key redacted>", so a log line that includes a destination can never leak it.
class DcAccessKey {
 public:
  DcAccessKey() = default;
  explicit DcAccessKey(uint64_t value) : value_(value) {}
  uint64_t value() const { return value_; }
  bool operator==(const DcAccessKey&) const = default;
  friend std::ostream& operator<<(std::ostream& os, const DcAccessKey&) {
    return os << "<dc key redacted>";
  }

 private:
  uint64_t value_ = 0;
};

// Where a DC target lives on the fabric: the AH is built from this (GID for RoCE/routed
// traffic, LID for InfiniBand).
struct AhKey {
  DcGid gid{};
  uint16_t lid = 0;
  bool operator==(const AhKey&) const = default;
  template <typename H>
  friend H AbslHashValue(H h, const AhKey& k) {
    return H::combine(std::move(h), k.gid, k.lid);
  }
};

// A destination for scheduling: one DCT on one port. The access key is carried per work
// request, not part of the identity, so a stale key cannot split a destination in two.
struct DestKey {
  uint32_t dct_number = 0;
  AhKey addr;
  bool operator==(const DestKey&) const = default;
  template <typename H>
  friend H AbslHashValue(H h, const DestKey& k) {
    return H::combine(std::move(h), k.dct_number, k.addr);
  }
};

// A request's DC endpoint after validation.
struct DcDestination final : public Destination {
  static constexpr TransportKind kTransport = TransportKind::kDc;
  TransportKind transport() const override { return kTransport; }

  DestKey key;
  DcAccessKey access_key;
  uint32_t mtu = 0;  // the DCT's path MTU in bytes; 0: not sent (an older client)
};

// "DCT 0x1234 at fe80::...:1 (lid 0)": never includes the access key.
std::string DescribeDest(const DestKey& key);

// Range-checks a DcEndpoint from the wire: DCT number 1..0xFFFFFF, GID empty or 16 bytes,
// LID 0..0xFFFF, GID or LID present, MTU 0 (not sent) or 256/512/1024/2048/4096.
// INVALID_ARGUMENT naming the field otherwise. The error messages never quote the key.
absl::StatusOr<DcDestination> ParseDcEndpoint(const gdrstore::v1::DcEndpoint& endpoint);
// ParseDcEndpoint of buffer.dc, as the destination a dc op carries.
absl::StatusOr<std::shared_ptr<const DcDestination>> ParseDcDestination(
    const gdrstore::v1::RemoteBuffer& buffer);

}  // namespace gdr::dc
