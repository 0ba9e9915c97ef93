#include "daemon/transport/rc/rc_destination.h"

namespace gdr {

absl::StatusOr<std::shared_ptr<const RcDestination>> ParseRcDestination(
    const gdrstore::v1::RemoteBuffer& buffer) {
  if (buffer.rc().connection_id() == 0) {
    return absl::InvalidArgumentError("buffer.rc.connection_id is 0 (call Connect first)");
  }
  return std::make_shared<const RcDestination>(buffer.rc().connection_id());
}

}  // namespace gdr
