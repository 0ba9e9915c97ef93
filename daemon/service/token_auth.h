// Admission of gdrstore.v1 calls by the daemon's token file (common/wire/token_file.h): a call is
// the line whose token it presents (`authorization: Bearer <token>`), else the san: line one of
// its verified client certificate's subjectAltNames equals; that line's grants say which volumes
// it may get from and put to. Off (every call admitted, every right) while no credential is
// set. The gRPC health and reflection services are not checked: probes and schema discovery
// need no secret. Credentials and grants change live (SIGHUP) without dropping calls.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "common/wire/token_file.h"

namespace gdr {

// What a call presented, kept so that a long call (a Stream) can be identified again after the
// credentials change.
struct Presented {
  std::optional<std::string> authorization;  // the metadata value, when sent
  std::vector<std::string> sans;  // the verified client certificate's subjectAltNames
  std::string peer;               // for logs

  // From a call: the `authorization` metadata, and the SANs of a TLS peer's certificate
  // (auth context property x509_subject_alternative_name; only when the transport is TLS and
  // the peer is authenticated).
  static Presented Of(const grpc::CallbackServerContext& ctx);
};

// The credentials in force, with a generation number that changes on every Set.
struct CredentialSet {
  std::vector<Credential> credentials;  // the file's lines; empty: the check is off
  Credential internal;  // the daemon's own token (TokenAuth::InternalToken), no volume right
  uint64_t generation = 0;
};

// Who a call is. Cheap to copy; keeps the credentials it was resolved against alive.
class Caller {
 public:
  // A caller of a daemon without credentials: every right on every volume.
  Caller() = default;
  // `credential` is one of *set's, or nullptr (the set is empty: every right).
  Caller(std::shared_ptr<const CredentialSet> set, const Credential* credential)
      : set_(std::move(set)), credential_(credential) {}

  // OK, or PERMISSION_DENIED naming the credential's label, the volume and the right it lacks.
  absl::Status Allows(absl::string_view volume, Right right) const;
  // Whether the caller has any right on `volume` (GetInfo, GetStats show only those).
  bool MaySee(absl::string_view volume) const;
  // OK, or PERMISSION_DENIED naming the credential when it lacks admin=yes (the Admin service).
  absl::Status AllowsAdmin() const;
  uint64_t generation() const { return set_ ? set_->generation : 0; }
  // The credential's label; empty when the check is off.
  absl::string_view label() const {
    return credential_ != nullptr ? absl::string_view(credential_->label) : absl::string_view();
  }

 private:
  std::shared_ptr<const CredentialSet> set_;
  const Credential* credential_ = nullptr;  // in *set_; nullptr: the check is off
};

class TokenAuth {
 public:
  TokenAuth();

  // Replaces the accepted credentials; an empty list turns the check off. Calls already
  // identified keep the grants they had until they look again (a Stream does per message).
  // Thread-safe.
  void Set(std::vector<Credential> credentials);
  bool enabled() const { return enabled_.load(std::memory_order_acquire); }
  // Whether the server verifies every client certificate it accepts against a CA (mTLS with
  // a client CA, GRPC_SSL_REQUEST[_AND_REQUIRE]_CLIENT_CERTIFICATE_AND_VERIFY). Until set, the
  // SANs of a certificate are ignored and san: lines match nothing: an unverified certificate
  // proves nothing. Thread-safe.
  void set_client_certificates_verified(bool verified) {
    certificates_verified_.store(verified, std::memory_order_release);
  }
  bool client_certificates_verified() const {
    return certificates_verified_.load(std::memory_order_acquire);
  }
  // Changes on every Set: a Stream compares it to know when to identify its caller again.
  uint64_t generation() const { return generation_.load(std::memory_order_acquire); }
  // A random token of this process, accepted with no volume right, for the daemon's own calls
  // to itself (the watchdog's in-process Ping); works whatever the file holds.
  const std::string& InternalToken() const { return internal_token_; }

  // The caller of a call; when the check is off, a caller with every right. The certificate's
  // SANs count only once client certificates are verified (above). UNAUTHENTICATED
  // when it presents neither a token nor a certificate that a line names; PERMISSION_DENIED
  // when its token is not accepted. Logs refusals (rate-limited). Never quotes a token.
  absl::StatusOr<Caller> Identify(const Presented& presented) const;
  absl::StatusOr<Caller> Check(const grpc::CallbackServerContext& ctx) const {
    return Identify(Presented::Of(ctx));
  }

  // The rule itself: the line of `credentials` a call is, given its authorization metadata
  // (nullptr: none was sent) and its verified certificate's SANs. A Bearer token must equal a
  // token line (compared in constant time over every line); without one, the first san: line
  // (file order) whose value equals one of `sans` is the caller.
  static absl::StatusOr<const Credential*> Match(const std::vector<Credential>& credentials,
                                                 const std::string* authorization,
                                                 const std::vector<std::string>& sans);
  // The rights rule: OK when `credential` has `right` on `volume`; else PERMISSION_DENIED.
  static absl::Status Allows(const Credential& credential, absl::string_view volume, Right right);

 private:
  const std::string internal_token_;
  std::atomic<bool> enabled_{false};
  std::atomic<bool> certificates_verified_{false};
  std::atomic<uint64_t> generation_{0};
  mutable absl::Mutex mu_;
  std::shared_ptr<const CredentialSet> set_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gdr
