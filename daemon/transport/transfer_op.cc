#include "daemon/transport/transfer_op.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/base/host_port.h"
#include "common/base/status_macros.h"
#include "common/wire/tcp_proof.h"
#include "common/base/units.h"
#include "daemon/store/store.h"

namespace gdr {

std::string TcpDestination::Key() const { return JoinHostPort(host, port); }

absl::StatusOr<TransferOp> ValidateOp(Direction direction, const gdrstore::v1::Extent* extent,
                                      const gdrstore::v1::RemoteBuffer* buffer, const Store& store,
                                      uint64_t max_op_bytes, const OfferedTransports& offered) {
  if (extent == nullptr) return absl::InvalidArgumentError("request has no extent");
  if (buffer == nullptr) return absl::InvalidArgumentError("request has no buffer");
  if (extent->length() == 0) return absl::InvalidArgumentError("extent.length is 0");
  if (extent->length() > max_op_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "extent.length ", extent->length(), " is above the daemon's max op size of ",
        max_op_bytes, " bytes (", FormatSize(max_op_bytes), "); split the transfer"));
  }
  const Volume* volume = store.Find(extent->volume());
  if (volume == nullptr) {
    std::string known;
    for (const auto& [name, v] : store.volumes()) absl::StrAppend(&known, known.empty() ? "" : ", ", name);
    // Quote only a printable, bounded prefix of what the client sent.
    std::string shown = extent->volume().substr(0, 64);
    for (char& c : shown)
      if (c < 0x20 || c > 0x7e) c = '?';
    return absl::NotFoundError(
        absl::StrCat("volume '", shown, "' does not exist (volumes: ", known, ")"));
  }
  if (extent->offset() > volume->size() || extent->length() > volume->size() - extent->offset()) {
    return absl::OutOfRangeError(absl::StrCat("extent [", extent->offset(), ", +",
                                              extent->length(), ") is past the end of volume '",
                                              volume->name(), "' (", volume->size(), " bytes)"));
  }
  // A file volume whose file was truncated behind the daemon's back: refused here, naming the
  // file, rather than faulting (SIGBUS) wherever its pages are touched.
  GDR_RETURN_IF_ERROR(volume->CheckBacked());
  if (buffer->length() != extent->length()) {
    return absl::InvalidArgumentError(absl::StrCat("buffer.length ", buffer->length(),
                                                   " differs from extent.length ",
                                                   extent->length()));
  }
  if (buffer->rkey() == 0) return absl::InvalidArgumentError("buffer.rkey is 0");
  if (buffer->address() > UINT64_MAX - buffer->length()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("buffer [0x%x, +%u) wraps the address space", buffer->address(),
                        buffer->length()));
  }
  TransferOp op;
  op.direction = direction;
  op.volume = volume->name();
  op.offset = extent->offset();
  op.local = volume->data() + extent->offset();
  op.length = extent->length();
  op.remote_address = buffer->address();
  op.rkey = buffer->rkey();
  using RB = gdrstore::v1::RemoteBuffer;
  const std::optional<TransportKind> kind = TransportOfEndpoint(buffer->endpoint_case());
  if (kind && !offered.Has(*kind)) {
    return absl::UnimplementedError(absl::StrCat("transport ", TransportName(*kind),
                                                 " is not offered by this daemon (see GetInfo)"));
  }
  switch (buffer->endpoint_case()) {
    case RB::kTcp: {
      const auto& tcp = buffer->tcp();
      if (tcp.host().empty() || tcp.host().size() > 255 ||
          tcp.host().find('\0') != std::string::npos) {
        return absl::InvalidArgumentError("buffer.tcp.host must be 1..255 bytes");
      }
      if (tcp.port() == 0 || tcp.port() > 65535) {
        return absl::InvalidArgumentError(
            absl::StrCat("buffer.tcp.port ", tcp.port(), " is not in 1..65535"));
      }
      // The secret is the caller's proof of ownership of the target: required, and its bytes
      // never go into a message (only its length).
      if (tcp.secret().size() < tcpwire::kMinSecretBytes ||
          tcp.secret().size() > tcpwire::kMaxSecretBytes) {
        return absl::InvalidArgumentError(absl::StrCat(
            "buffer.tcp.secret must be ", tcpwire::kMinSecretBytes, "..",
            tcpwire::kMaxSecretBytes, " bytes, not ", tcp.secret().size(),
            " (the target proves it holds it before any byte moves)"));
      }
      op.transport = TransportKind::kTcp;
      op.tcp.host = tcp.host();
      op.tcp.port = static_cast<uint16_t>(tcp.port());
      op.tcp.secret = tcp.secret();
      return op;
    }
    case RB::kRc:
      if (buffer->rc().connection_id() == 0) {
        return absl::InvalidArgumentError("buffer.rc.connection_id is 0 (call Connect first)");
      }
      op.transport = TransportKind::kRc;
      op.rc_connection_id = buffer->rc().connection_id();
      return op;
    case RB::kDc: {
      GDR_ASSIGN_OR_RETURN(op.dc, dc::ParseDcEndpoint(buffer->dc()));
      op.transport = TransportKind::kDc;
      return op;
    }
    case RB::ENDPOINT_NOT_SET:
      return absl::InvalidArgumentError(
          "buffer has no endpoint (or one this daemon does not know): set dc, rc or tcp");
  }
  return absl::InvalidArgumentError("buffer endpoint kind is unknown");
}

}  // namespace gdr
