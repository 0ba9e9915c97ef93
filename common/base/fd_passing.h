// Messages that carry file descriptors over a Unix socket (SCM_RIGHTS), and the credentials of
// the process at the other end (SO_PEERCRED): how memory crosses from a client process to the
// daemon or the node agent without a copy (common/handoff).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/base/socket.h"

namespace gdr {

// Who is at the other end of a connected Unix socket, as the kernel recorded it at connect().
struct PeerCredentials {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
};

// SO_PEERCRED of `sock`; the errno's status otherwise.
absl::StatusOr<PeerCredentials> PeerCredentialsOf(int sock);

// Sends `bytes` as one message (SOCK_SEQPACKET keeps its boundary) with `fds` attached. Retries
// EINTR, never raises SIGPIPE: UNAVAILABLE when the peer is gone.
absl::Status SendWithFds(int sock, absl::string_view bytes, absl::Span<const int> fds);

// One message received: its bytes and the descriptors that came with it (owned now).
struct ReceivedMessage {
  std::string bytes;
  std::vector<ScopedFd> fds;
  bool eof = false;  // the peer closed its end: bytes and fds are empty
  // The message carried descriptors the kernel could not install here (this process is at its
  // RLIMIT_NOFILE): the bytes are kept, fds is empty, and the sender's copies are unaffected.
  bool fds_lost = false;
};

// Receives one message of at most `max_bytes` with at most `max_fds` descriptors, waiting until
// `deadline` (absl::InfiniteFuture(): for ever). A message longer than `max_bytes`, or with
// more descriptors than `max_fds`, is INVALID_ARGUMENT saying which (any descriptors that came
// are closed); DEADLINE_EXCEEDED; UNAVAILABLE with errno's text on a socket error. Descriptors
// arrive with FD_CLOEXEC set; those the kernel could not install set fds_lost.
absl::StatusOr<ReceivedMessage> ReceiveWithFds(int sock, size_t max_bytes, size_t max_fds,
                                               absl::Time deadline);

}  // namespace gdr
