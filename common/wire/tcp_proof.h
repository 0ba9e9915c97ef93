// How a tcp link proves that its target belongs to the caller who named it. The caller puts a
// secret in the request's TcpEndpoint (only it and the daemon know it); before the daemon
// sends a byte of the store, or takes one into it, the target on the other end must show it
// holds that secret:
//
//   target -> daemon   HELLO      target nonce Nt (32 random bytes)
//   daemon -> target   CHALLENGE  daemon nonce Nd (32 random bytes)
//   target -> daemon   PROOF      HMAC-SHA256(secret, kProofLabel || Nd || Nt)
//
// The target speaks first so that a listener which is not a target (the victim of a request
// naming someone else's host:port) gets nothing at all from the daemon. The daemon's fresh
// nonce makes every proof single-use; the target's, mixed in, means a party that connects to
// a real target and sends it challenges never chooses the whole input the target MACs. The
// label separates these MACs from any other use of the secret. Proofs are compared in constant
// time (CRYPTO_memcmp). The frames are common/tcp_frame's; OpenSSL does the cryptography.
#pragma once

#include <array>
#include <cstddef>
#include <span>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/wire/tcp_frame.h"

namespace gdr::tcpwire {

// Secret lengths the daemon accepts in a TcpEndpoint; the client library makes 32-byte ones.
inline constexpr size_t kMinSecretBytes = 16;
inline constexpr size_t kMaxSecretBytes = 64;
inline constexpr size_t kSecretBytes = 32;
inline constexpr absl::string_view kProofLabel = "gdrstore tcp target proof v1";

using Digest = std::array<std::byte, 32>;

// `out.size()` bytes from OpenSSL's CSPRNG. INTERNAL when it cannot deliver.
absl::Status RandomBytes(std::span<std::byte> out);
// A fresh secret of kSecretBytes, as the bytes TcpEndpoint.secret carries.
absl::StatusOr<std::string> NewSecret();

// HMAC-SHA256(secret, kProofLabel || daemon_nonce || target_nonce).
HandshakeBody ComputeProof(absl::string_view secret, const HandshakeBody& daemon_nonce,
                           const HandshakeBody& target_nonce);
// SHA-256 of the secret: how the daemon tells links proved for different secrets apart
// without keeping (or comparing, in variable time) the secret itself in its pool's keys.
Digest SecretDigest(absl::string_view secret);

// The daemon's half, on a connected socket to `who` (HOST:PORT, for messages): waits for the
// HELLO, sends the CHALLENGE, checks the PROOF; every wait ends at `deadline`. OK only for a
// correct proof. PERMISSION_DENIED "tcp target WHO did not prove it holds the endpoint's
// secret: <why>" otherwise (silence, a close, a bad frame, a wrong proof); UNAVAILABLE when
// the challenge cannot be sent. The secret never appears in a message.
absl::Status ProveTarget(int fd, absl::string_view secret, absl::Time deadline,
                         const std::string& who);

// The target's half: sends the HELLO, reads the CHALLENGE (until `deadline`), sends the PROOF.
// INVALID_ARGUMENT for a bad frame, DEADLINE_EXCEEDED for silence, UNAVAILABLE for a close.
absl::Status AnswerChallenge(int fd, absl::string_view secret, absl::Time deadline);

}  // namespace gdr::tcpwire
