// Where a local op's client memory is: the handoff session (common/handoff) that the client
// opened on the daemon's Unix socket, and the session's key, read from a request's
// LocalEndpoint. The local transport's own destination type; nothing outside
// daemon/transport/local/ looks inside it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "daemon/transport/transfer_op.h"
#include "gdrstore/v1/gdrstore.pb.h"

namespace gdr {

class LocalDestination final : public Destination {
 public:
  static constexpr TransportKind kTransport = TransportKind::kLocal;

  LocalDestination(uint64_t session_in, std::string key_in)
      : session(session_in), key(std::move(key_in)) {}
  TransportKind transport() const override { return kTransport; }

  const uint64_t session;  // HELLO_OK's session, nonzero
  // HELLO_OK's key (handoff::kKeyBytes): what proves the caller is the session's peer. Never
  // logged and never put in a message; HandoffServer::Resolve compares it in constant time.
  const std::string key;
};

// Checks buffer.local (a nonzero session, a key of exactly 16 bytes) and copies it.
// INVALID_ARGUMENT naming the field; the key's bytes are never quoted, only its length.
absl::StatusOr<std::shared_ptr<const LocalDestination>> ParseLocalDestination(
    const gdrstore::v1::RemoteBuffer& buffer);

}  // namespace gdr
