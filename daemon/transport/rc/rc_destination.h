// Where an rc op's client memory is: the rc connection (RcAccept.connection_id) whose QPs reach
// it, read from a request's RcEndpoint. The rc transport's own destination type; nothing outside
// daemon/transport/rc/ looks inside it.
#pragma once

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "daemon/transport/transfer_op.h"
#include "gdrstore/v1/gdrstore.pb.h"

namespace gdr {

class RcDestination final : public Destination {
 public:
  static constexpr TransportKind kTransport = TransportKind::kRc;

  explicit RcDestination(uint64_t connection_id_in) : connection_id(connection_id_in) {}
  TransportKind transport() const override { return kTransport; }

  const uint64_t connection_id;  // RcAccept.connection_id, nonzero
};

// Checks buffer.rc (a nonzero connection id). INVALID_ARGUMENT naming the field.
absl::StatusOr<std::shared_ptr<const RcDestination>> ParseRcDestination(
    const gdrstore::v1::RemoteBuffer& buffer);

}  // namespace gdr
