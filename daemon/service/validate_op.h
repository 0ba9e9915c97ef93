// Request validation: a data op's request checked against the store and the daemon's limits
// before anything moves, and turned into the TransferOp the transports take. What needs no store
// is common/wire/op_request_checks.h (gdragent runs it too); the endpoint is read by the
// transport it names, through the TransportSet.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "daemon/store/direction.h"
#include "daemon/transport/transfer_op.h"
#include "gdrstore/v1/gdrstore.pb.h"

namespace gdr {

class Store;
class TransportSet;

// Checks one request against the store and limits (see the status table in gdrstore.proto):
// what every op shares (extent, volume, range, lengths, rkey, address range), then which
// transport its endpoint names and whether `transports` runs it, then that transport's own
// reading of the endpoint (Initiator::ParseDestination). `extent` / `buffer` are nullptr when
// the request did not set them. Thread-safe as the store and transports are.
absl::StatusOr<TransferOp> ValidateOp(Direction direction, const gdrstore::v1::Extent* extent,
                                      const gdrstore::v1::RemoteBuffer* buffer, const Store& store,
                                      uint64_t max_op_bytes, const TransportSet& transports);

}  // namespace gdr
