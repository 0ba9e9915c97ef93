#include "daemon/transport/tcp/tcp_destination.h"

#include "absl/strings/str_cat.h"
#include "common/base/host_port.h"
#include "common/wire/tcp_frame.h"
#include "common/wire/tcp_proof.h"

namespace gdr {

std::string TcpDestination::Key() const { return JoinHostPort(host, port); }

absl::StatusOr<std::shared_ptr<const TcpDestination>> ParseTcpDestination(
    const gdrstore::v1::RemoteBuffer& buffer) {
  const gdrstore::v1::TcpEndpoint& tcp = buffer.tcp();
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
        "buffer.tcp.secret must be ", tcpwire::kMinSecretBytes, "..", tcpwire::kMaxSecretBytes,
        " bytes, not ", tcp.secret().size(),
        " (the target proves it holds it before any byte moves)"));
  }
  if (tcp.chunk_bytes() != 0 && !tcpwire::IsAskableChunk(tcp.chunk_bytes())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "buffer.tcp.chunk_bytes ", tcp.chunk_bytes(), " is not 0 or in ", tcpwire::kMinAskedChunk,
        "..", tcpwire::kMaxAskedChunk));
  }
  auto dest = std::make_shared<TcpDestination>(tcp.host(), static_cast<uint16_t>(tcp.port()),
                                               tcp.secret());
  dest->inline_max = tcp.inline_max();  // any value: the daemon's own limit bounds it
  dest->chunk_bytes = tcp.chunk_bytes();
  return dest;
}

}  // namespace gdr
