#include "common/wire/transport_kind.h"

namespace gdr {

namespace v1 = gdrstore::v1;

const char* TransportName(TransportKind kind) {
  switch (kind) {
    case TransportKind::kTcp: return "tcp";
    case TransportKind::kRc: return "rc";
    case TransportKind::kDc: return "dc";
    case TransportKind::kLocal: return "local";
  }
  return "unknown";
}

v1::Transport ToProto(TransportKind kind) {
  switch (kind) {
    case TransportKind::kTcp: return v1::TRANSPORT_TCP;
    case TransportKind::kRc: return v1::TRANSPORT_RC;
    case TransportKind::kDc: return v1::TRANSPORT_DC;
    case TransportKind::kLocal: return v1::TRANSPORT_LOCAL;
  }
  return v1::TRANSPORT_UNSPECIFIED;
}

std::optional<TransportKind> FromProto(v1::Transport transport) {
  for (TransportKind k : kTransportKinds) {
    if (ToProto(k) == transport) return k;
  }
  return std::nullopt;
}

const char* TransportName(v1::Transport transport) {
  const std::optional<TransportKind> k = FromProto(transport);
  return k ? TransportName(*k) : "unknown";
}

std::optional<TransportKind> TransportOfEndpoint(v1::RemoteBuffer::EndpointCase c) {
  switch (c) {
    case v1::RemoteBuffer::kTcp: return TransportKind::kTcp;
    case v1::RemoteBuffer::kRc: return TransportKind::kRc;
    case v1::RemoteBuffer::kDc: return TransportKind::kDc;
    case v1::RemoteBuffer::kLocal: return TransportKind::kLocal;
    case v1::RemoteBuffer::ENDPOINT_NOT_SET: break;
  }
  return std::nullopt;
}

}  // namespace gdr
