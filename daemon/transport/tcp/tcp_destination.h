// Where a tcp op's client memory is: the client's target (host, port) and the secret it must
// prove it holds, read from a request's TcpEndpoint. The tcp transport's own destination type;
// nothing outside daemon/transport/tcp/ looks inside it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "daemon/transport/transfer_op.h"
#include "gdrstore/v1/gdrstore.pb.h"

namespace gdr {

class TcpDestination final : public Destination {
 public:
  static constexpr TransportKind kTransport = TransportKind::kTcp;

  TcpDestination() = default;
  TcpDestination(std::string host_in, uint16_t port_in, std::string secret_in)
      : host(std::move(host_in)), port(port_in), secret(std::move(secret_in)) {}
  TransportKind transport() const override { return kTransport; }

  std::string host;
  uint16_t port = 0;
  // TcpEndpoint.secret: what the target must prove it holds before a byte moves. Never logged
  // and never compared directly (the tcp pool compares digests); Key() leaves it out.
  std::string secret;
  // TcpEndpoint.inline_max: the largest Write the client takes in the answer (0: none).
  uint32_t inline_max = 0;
  // TcpEndpoint.chunk_bytes: the piece size the target asked for (0: the daemon's own).
  uint32_t chunk_bytes = 0;
  std::string Key() const;  // "host:port", bracketed for IPv6
};

// Checks buffer.tcp (host 1..255 bytes without NUL, port 1..65535, secret within the wire's
// bounds, chunk_bytes 0 or askable) and copies it. INVALID_ARGUMENT naming the field; the
// secret is never quoted.
absl::StatusOr<std::shared_ptr<const TcpDestination>> ParseTcpDestination(
    const gdrstore::v1::RemoteBuffer& buffer);

}  // namespace gdr
