#include "common/wire/tcp_proof.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

#include "absl/strings/str_cat.h"
#include "common/base/socket.h"

namespace gdr::tcpwire {
namespace {

absl::Status Refused(const std::string& who, absl::string_view why) {
  return absl::PermissionDeniedError(absl::StrCat(
      "tcp target ", who, " did not prove it holds the endpoint's secret: ", why));
}

// Why a read of the opening exchange failed, in words for the refusal.
std::string ReadFailure(const absl::Status& s, absl::string_view frame) {
  if (absl::IsDeadlineExceeded(s)) return absl::StrCat("no ", frame, " in time");
  if (absl::IsUnavailable(s)) return absl::StrCat("the connection closed before its ", frame);
  return absl::StrCat("reading its ", frame, ": ", s.message());
}

}  // namespace

absl::Status RandomBytes(std::span<std::byte> out) {
  if (out.empty()) return absl::OkStatus();
  if (RAND_bytes(reinterpret_cast<unsigned char*>(out.data()), static_cast<int>(out.size())) !=
      1) {
    return absl::InternalError("RAND_bytes failed: the system random source is unavailable");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> NewSecret() {
  std::string secret(kSecretBytes, '\0');
  absl::Status s = RandomBytes(std::as_writable_bytes(std::span(secret.data(), secret.size())));
  if (!s.ok()) return s;
  return secret;
}

HandshakeBody ComputeProof(absl::string_view secret, const HandshakeBody& daemon_nonce,
                           const HandshakeBody& target_nonce) {
  std::array<unsigned char, kProofLabel.size() + 2 * kHandshakeBodySize> msg;
  unsigned char* p = msg.data();
  std::memcpy(p, kProofLabel.data(), kProofLabel.size());
  std::memcpy(p + kProofLabel.size(), daemon_nonce.data(), kHandshakeBodySize);
  std::memcpy(p + kProofLabel.size() + kHandshakeBodySize, target_nonce.data(),
              kHandshakeBodySize);
  HandshakeBody out{};
  unsigned int len = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()), msg.data(), msg.size(),
       reinterpret_cast<unsigned char*>(out.data()), &len);
  return out;
}

Digest SecretDigest(absl::string_view secret) {
  // The daemon digests every op's secret. OpenSSL 3's SHA256() fetches the algorithm on each
  // call, which cost three times the digest itself; fetched once, it is shared by all threads.
  static EVP_MD* const sha256 = EVP_MD_fetch(nullptr, "SHA256", nullptr);
  Digest d{};
  auto* out = reinterpret_cast<unsigned char*>(d.data());
  if (sha256 == nullptr || EVP_Digest(secret.data(), secret.size(), out, nullptr, sha256,
                                      nullptr) != 1) {
    SHA256(reinterpret_cast<const unsigned char*>(secret.data()), secret.size(), out);
  }
  return d;
}

absl::Status ProveTarget(int fd, absl::string_view secret, absl::Time deadline,
                         const std::string& who) {
  std::array<std::byte, kHandshakeFrameSize> frame;
  absl::Status s = ReadFullBefore(fd, frame.data(), frame.size(), deadline);
  if (!s.ok()) return Refused(who, ReadFailure(s, "HELLO"));
  absl::StatusOr<HandshakeBody> target_nonce = DecodeHandshake(frame, Opcode::kHello);
  if (!target_nonce.ok()) {
    return Refused(who, absl::StrCat("bad HELLO: ", target_nonce.status().message()));
  }
  HandshakeBody daemon_nonce;
  if (s = RandomBytes(daemon_nonce); !s.ok()) return s;
  EncodeHandshake(Opcode::kChallenge, daemon_nonce, frame);
  if (s = WriteFull(fd, frame.data(), frame.size()); !s.ok()) {
    return absl::UnavailableError(
        absl::StrCat("tcp link to ", who, " lost while sending the CHALLENGE: ", s.message()));
  }
  s = ReadFullBefore(fd, frame.data(), frame.size(), deadline);
  if (!s.ok()) return Refused(who, ReadFailure(s, "PROOF"));
  absl::StatusOr<HandshakeBody> proof = DecodeHandshake(frame, Opcode::kProof);
  if (!proof.ok()) return Refused(who, absl::StrCat("bad PROOF: ", proof.status().message()));
  const HandshakeBody want = ComputeProof(secret, daemon_nonce, *target_nonce);
  if (CRYPTO_memcmp(want.data(), proof->data(), want.size()) != 0) {
    return Refused(who, "wrong PROOF");
  }
  return absl::OkStatus();
}

absl::Status AnswerChallenge(int fd, absl::string_view secret, absl::Time deadline) {
  HandshakeBody target_nonce;
  absl::Status s = RandomBytes(target_nonce);
  if (!s.ok()) return s;
  std::array<std::byte, kHandshakeFrameSize> frame;
  EncodeHandshake(Opcode::kHello, target_nonce, frame);
  if (s = WriteFull(fd, frame.data(), frame.size()); !s.ok()) return s;
  if (s = ReadFullBefore(fd, frame.data(), frame.size(), deadline); !s.ok()) return s;
  absl::StatusOr<HandshakeBody> daemon_nonce = DecodeHandshake(frame, Opcode::kChallenge);
  if (!daemon_nonce.ok()) return daemon_nonce.status();
  EncodeHandshake(Opcode::kProof, ComputeProof(secret, *daemon_nonce, target_nonce), frame);
  return WriteFull(fd, frame.data(), frame.size());
}

}  // namespace gdr::tcpwire
