#include "daemon/transport/dc/dc_endpoint.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/verbs/queue_pair.h"
#include "common/verbs/verbs_status.h"

namespace gdr::dc {

std::string DescribeDest(const DestKey& key) {
  std::string gid;
  for (size_t i = 0; i < key.addr.gid.size(); i += 2) {
    absl::StrAppendFormat(&gid, "%s%02x%02x", i == 0 ? "" : ":", key.addr.gid[i],
                          key.addr.gid[i + 1]);
  }
  return absl::StrFormat("DCT 0x%06x at GID %s LID %u", key.dct_number, gid, key.addr.lid);
}

absl::StatusOr<DcDestination> ParseDcEndpoint(const gdrstore::v1::DcEndpoint& endpoint) {
  if (!verbs::IsQpNumber(endpoint.dct_number())) {
    return absl::InvalidArgumentError(absl::StrCat("buffer.dc.dct_number ", endpoint.dct_number(),
                                                   " is not in 1..0xFFFFFF (24 bits)"));
  }
  if (!endpoint.gid().empty() && endpoint.gid().size() != 16) {
    return absl::InvalidArgumentError(absl::StrCat("buffer.dc.gid has ", endpoint.gid().size(),
                                                   " bytes; a GID has 16 (or none with a LID)"));
  }
  if (endpoint.lid() > 0xFFFF) {
    return absl::InvalidArgumentError(
        absl::StrCat("buffer.dc.lid ", endpoint.lid(), " is not in 0..0xFFFF"));
  }
  // 0: an older client, the daemon's MTU is assumed.
  if (ibv_mtu unused; endpoint.mtu() != 0 && !verbs::MtuFromBytes(endpoint.mtu(), &unused).ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "buffer.dc.mtu ", endpoint.mtu(), " is not a path MTU (256, 512, 1024, 2048 or 4096)"));
  }
  DcDestination d;
  d.mtu = endpoint.mtu();
  d.key.dct_number = endpoint.dct_number();
  d.key.addr.lid = static_cast<uint16_t>(endpoint.lid());
  if (!endpoint.gid().empty()) {
    std::copy(endpoint.gid().begin(), endpoint.gid().end(), d.key.addr.gid.begin());
  }
  const bool gid_zero = std::all_of(d.key.addr.gid.begin(), d.key.addr.gid.end(),
                                    [](uint8_t b) { return b == 0; });
  if (gid_zero && d.key.addr.lid == 0) {
    return absl::InvalidArgumentError(
        "buffer.dc needs a GID (RoCE, routed) or a nonzero LID (InfiniBand)");
  }
  d.access_key = DcAccessKey(endpoint.dc_key());
  return d;
}

absl::StatusOr<std::shared_ptr<const DcDestination>> ParseDcDestination(
    const gdrstore::v1::RemoteBuffer& buffer) {
  absl::StatusOr<DcDestination> d = ParseDcEndpoint(buffer.dc());
  if (!d.ok()) return d.status();
  return std::make_shared<const DcDestination>(*std::move(d));
}

}  // namespace gdr::dc
