// A validated data op as the transports see it: which way bytes move, the store memory, and
// where the client's registered memory is. Built only by ValidateOp (daemon/service/
// validate_op.h), so every field has been range-checked against the store and the daemon's
// limits, and its destination by its transport.
#pragma once

#include <bitset>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <string>

#include "common/wire/transport_kind.h"
#include "daemon/store/direction.h"
#include "gdrstore/v1/gdrstore.pb.h"

namespace gdr {

class Volume;

// A transport fault an op carries when fault injection picked it (daemon/sim/
// fault_injector.h): the transport that moves the op breaks the path the op took, as a real
// failure would. Each transport says in its Submit what that means for it (tcp: the link the
// op's chunks went on is closed under them; rc: the QP its work requests went on is moved to
// the error state; dc and local: not applicable, no rule hits their ops).
enum class InjectedFault : uint8_t {
  kNone,
  kBreakPath,
};

// Where an op's client memory is, as the op's transport read it from the request's endpoint
// (Initiator::ParseDestination). The op carries it without looking inside; only the transport
// that made it does (DestinationOf). Immutable once made, so ops share it.
class Destination {
 public:
  virtual ~Destination() = default;
  // The transport that made it (and the only one that reads it).
  virtual TransportKind transport() const = 0;
};

// A Write's bytes carried in its answer instead of moved by the transport (tcp's inline
// answers, TcpEndpoint.inline_max): the op's client memory (`length` bytes at `address`) as the
// answer will carry it. The op's context owns it; the service reads `bytes` once the op is done.
// Only an op of exactly that memory may fill it; later ops may only write into what it holds.
struct InlineAnswer {
  uint64_t address = 0;
  uint64_t length = 0;
  std::string bytes;
};

struct TransferOp {
  // Which initiator moves the op's bytes (the endpoint kind of its RemoteBuffer).
  TransportKind transport = TransportKind::kTcp;
  Direction direction = Direction::kStoreToClient;
  std::string volume;
  // The volume itself, held by the op: a volume deleted meanwhile stays mapped (and registered
  // with the transports, which find their attachments on it) until its last op is done.
  std::shared_ptr<const Volume> store_volume;
  uint64_t offset = 0;
  std::byte* local = nullptr;  // store memory at `offset`; valid while store_volume is held
  uint64_t length = 0;
  uint64_t remote_address = 0;
  uint32_t rkey = 0;
  // The client's end, made by the transport `transport` names (never null in an op that
  // ValidateOp built). Its secrets, where it has any, are never logged.
  std::shared_ptr<const Destination> destination;
  // Who asked, as the RPC layer saw it (gRPC peer text: "ipv4:A:P", "ipv6:[A]:P", "unix:...").
  // A transport that connects to an address the request names decides with it whether it may.
  std::string caller;
  InjectedFault inject = InjectedFault::kNone;
  // Who the op is counted under in the per-client statistics (a credential's label or the
  // caller's address); the transports do not look at it.
  std::string client;
  // Writes only: where a transport that answers small Writes inline puts the bytes instead of
  // moving them (an op that later writes more into the same client memory, the corrupt-byte
  // fault, lands there too when the first went inline). Null: never inline.
  InlineAnswer* inline_answer = nullptr;
};

// `op`'s destination as the transport's own type D (which names its D::kTransport), or null
// when the op carries none or another transport's.
template <class D>
const D* DestinationOf(const TransferOp& op) {
  const Destination* d = op.destination.get();
  return d != nullptr && d->transport() == D::kTransport ? static_cast<const D*>(d) : nullptr;
}

// Which transports this daemon serves, a set of kinds; requests naming another answer
// UNIMPLEMENTED.
class OfferedTransports {
 public:
  OfferedTransports() = default;  // none
  OfferedTransports(std::initializer_list<TransportKind> kinds) {
    for (TransportKind k : kinds) Add(k);
  }
  void Add(TransportKind kind) { kinds_.set(static_cast<size_t>(kind)); }
  bool Has(TransportKind kind) const { return kinds_.test(static_cast<size_t>(kind)); }

 private:
  std::bitset<std::size(kTransportKinds)> kinds_;
};

}  // namespace gdr
