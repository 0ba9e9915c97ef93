// The one transport enum of the project's code and its one name table. The wire has its own
// enum (gdrstore.v1.Transport) and endpoint oneof, and the public client API its own (with
// "auto"); each converts here, so a name is spelled once.
#pragma once

#include <optional>

#include "gdrstore/v1/gdrstore.pb.h"

namespace gdr {

enum class TransportKind { kTcp, kRc, kDc, kLocal };

inline constexpr TransportKind kTransportKinds[] = {TransportKind::kTcp, TransportKind::kRc,
                                                    TransportKind::kDc, TransportKind::kLocal};

// "tcp", "rc", "dc", "local": flags, logs, GetInfo lines and errors all use these.
const char* TransportName(TransportKind kind);

gdrstore::v1::Transport ToProto(TransportKind kind);
// nullopt for TRANSPORT_UNSPECIFIED and values this build does not know (a newer peer).
std::optional<TransportKind> FromProto(gdrstore::v1::Transport transport);
// The name of a wire value: TransportName, or "unknown" where FromProto has none.
const char* TransportName(gdrstore::v1::Transport transport);
// The transport a RemoteBuffer's endpoint names; nullopt when none is set.
std::optional<TransportKind> TransportOfEndpoint(gdrstore::v1::RemoteBuffer::EndpointCase c);

}  // namespace gdr
