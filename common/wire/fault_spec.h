// Fault rules in text (gdrctl fault set, --fault, the config file) and their checks. The text
// is comma-separated KEY=VALUE fields:
//
//   kind=error|stall|corrupt|drop-link|qp-error|rail-down   (required)
//   volume=NAME  client=LABEL-OR-ADDRESS  ops=any|get|put
//   rate=P (0 < P <= 1)  every=N  count=N  for=DURATION  seed=N
//   code=NAME-OR-NUMBER (error)  delay=DURATION (stall)  rail=DEVICE (rail-down)
//
// DURATION as absl::ParseDuration takes it ("250ms", "5s", "1m"); whole milliseconds. The
// meaning of each field is gdrstore.v1.FaultSpec's (proto/gdrstore/v1/admin.proto). drop-link
// and qp-error are one fault, "break the path the op took", spelled for the transport whose
// ops it hits (BreakPathTransport).
#pragma once

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/wire/transport_kind.h"
#include "gdrstore/v1/admin.pb.h"

namespace gdr {

// "error", "stall", ...; "unspecified" for FAULT_KIND_UNSPECIFIED or an unknown value.
const char* FaultKindName(gdrstore::v1::FaultKind kind);

// Whether `kind` is a transport fault, "break the path the op took" (each transport does it in
// its own way: tcp closes the link the op's chunks went on, rc moves its QP to the error
// state), and the transport whose ops alone it hits: drop-link tcp's, qp-error rc's. nullopt
// for the other kinds.
std::optional<TransportKind> BreakPathTransport(gdrstore::v1::FaultKind kind);

// Text -> spec, then CheckFaultSpec. INVALID_ARGUMENT naming the field that is wrong.
absl::StatusOr<gdrstore::v1::FaultSpec> ParseFaultSpec(absl::string_view text);

// The spec in the text form above (fields at their defaults left out).
std::string FormatFaultSpec(const gdrstore::v1::FaultSpec& spec);

// Whether a spec (from the network, so hostile) is one a daemon can run: a known kind; a volume
// name or client of sane syntax; rate in (0, 1] and not with every; code 1..16 for error and
// only there; delay only for stall, rail only (and required) for rail-down; for_ms required by
// rail-down and by a stall without delay; corrupt only on gets; bounds on every number.
// INVALID_ARGUMENT naming the field.
absl::Status CheckFaultSpec(const gdrstore::v1::FaultSpec& spec);

}  // namespace gdr
