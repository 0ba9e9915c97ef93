// A validated data op as the transports see it: which way bytes move, the store memory, and
// where the client's registered memory is. Built only by ValidateOp, so every field has been
// range-checked against the store and the daemon's limits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "common/wire/transport_kind.h"
#include "daemon/store/direction.h"
#include "daemon/transport/dc_endpoint.h"
#include "gdrstore/v1/gdrstore.pb.h"

namespace gdr {

class Store;

// A transport fault an op carries when fault injection picked it (daemon/service/
// fault_injector.h): the transport that moves the op makes it happen, as a real link or QP
// failure would.
enum class InjectedFault : uint8_t {
  kNone,
  kDropLink,  // tcp: the link the op's chunks went on is closed under them
  kQpError,   // rc: the QP the op's work requests went on is moved to the error state
};

struct TcpDestination {
  std::string host;
  uint16_t port = 0;
  // TcpEndpoint.secret: what the target must prove it holds before a byte moves. Never logged
  // and never compared directly (the tcp pool compares digests); Key() leaves it out.
  std::string secret;
  std::string Key() const;  // "host:port", bracketed for IPv6
};

struct TransferOp {
  // Which initiator moves the op's bytes (the endpoint kind of its RemoteBuffer).
  TransportKind transport = TransportKind::kTcp;
  Direction direction = Direction::kStoreToClient;
  std::string volume;
  uint64_t offset = 0;
  std::byte* local = nullptr;  // store memory at `offset`; valid for the daemon's life
  uint64_t length = 0;
  uint64_t remote_address = 0;
  uint32_t rkey = 0;
  TcpDestination tcp;
  uint64_t rc_connection_id = 0;  // transport rc: RcAccept.connection_id, nonzero
  dc::DcDestination dc;  // transport dc: the client's DCT (its access key is never logged)
  // Who asked, as the RPC layer saw it (gRPC peer text: "ipv4:A:P", "ipv6:[A]:P", "unix:...").
  // A transport that connects to an address the request names decides with it whether it may.
  std::string caller;
  InjectedFault inject = InjectedFault::kNone;
  // Who the op is counted under in the per-client statistics (a credential's label or the
  // caller's address); the transports do not look at it.
  std::string client;
};

// Which transports this daemon serves; requests naming another answer UNIMPLEMENTED.
struct OfferedTransports {
  bool tcp = true;
  bool rc = false;
  bool dc = false;
  bool Has(TransportKind kind) const {
    return kind == TransportKind::kTcp ? tcp : kind == TransportKind::kRc ? rc : dc;
  }
};

// Checks one request against the store and limits (see the status table in gdrstore.proto).
// `extent` / `buffer` are nullptr when the request did not set them.
absl::StatusOr<TransferOp> ValidateOp(Direction direction, const gdrstore::v1::Extent* extent,
                                      const gdrstore::v1::RemoteBuffer* buffer, const Store& store,
                                      uint64_t max_op_bytes, const OfferedTransports& offered);

}  // namespace gdr
