#include "daemon/transport/local/local_destination.h"

#include "absl/strings/str_cat.h"
#include "common/wire/handoff_message.h"

namespace gdr {

absl::StatusOr<std::shared_ptr<const LocalDestination>> ParseLocalDestination(
    const gdrstore::v1::RemoteBuffer& buffer) {
  const gdrstore::v1::LocalEndpoint& local = buffer.local();
  if (local.session() == 0) {
    return absl::InvalidArgumentError(
        "buffer.local.session is 0 (hand the memory over on the daemon's local socket first; "
        "GetInfo.local names it)");
  }
  // The key proves the caller is the session's peer: its bytes never go into a message.
  if (local.key().size() != handoff::kKeyBytes) {
    return absl::InvalidArgumentError(absl::StrCat("buffer.local.key must be ",
                                                   handoff::kKeyBytes, " bytes, not ",
                                                   local.key().size()));
  }
  return std::make_shared<const LocalDestination>(local.session(), local.key());
}

}  // namespace gdr
