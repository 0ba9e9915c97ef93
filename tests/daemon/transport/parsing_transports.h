// A TransportSet whose initiators move nothing but read endpoints with the real transports'
// parsers (tcp/, rc/, local/ *_destination.h, dc_endpoint.h): what ValidateOp sees of a daemon
// offering a given set of transports, without sockets or devices.
#pragma once

#include <memory>

#include "daemon/transport/dc/dc_endpoint.h"
#include "daemon/transport/local/local_destination.h"
#include "daemon/transport/rc/rc_destination.h"
#include "daemon/transport/tcp/tcp_destination.h"
#include "daemon/transport/transport_set.h"
#include "tests/daemon/transport/fake_initiator.h"

namespace gdr::testing {

inline std::unique_ptr<TransportSet> ParsingTransports(const OfferedTransports& offered) {
  using Parsed = absl::StatusOr<std::shared_ptr<const Destination>>;
  auto set = std::make_unique<TransportSet>();
  for (TransportKind kind : kTransportKinds) {
    if (!offered.Has(kind)) continue;
    auto fake = std::make_unique<FakeInitiator>(kind, InitiatorStats{}, nullptr);
    switch (kind) {
      case TransportKind::kTcp:
        fake->set_parser([](const gdrstore::v1::RemoteBuffer& b) -> Parsed {
          return ParseTcpDestination(b);
        });
        break;
      case TransportKind::kRc:
        fake->set_parser([](const gdrstore::v1::RemoteBuffer& b) -> Parsed {
          return ParseRcDestination(b);
        });
        break;
      case TransportKind::kDc:
        fake->set_parser([](const gdrstore::v1::RemoteBuffer& b) -> Parsed {
          return dc::ParseDcDestination(b);
        });
        break;
      case TransportKind::kLocal:
        fake->set_parser([](const gdrstore::v1::RemoteBuffer& b) -> Parsed {
          return ParseLocalDestination(b);
        });
        break;
    }
    set->Add(std::move(fake));
  }
  return set;
}

}  // namespace gdr::testing
