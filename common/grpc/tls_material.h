// TLS certificates and keys read from PEM files and checked before gRPC sees them: the files parse,
// the private key belongs to the first certificate, and the validity dates are known. The daemon
// checks every file set before serving it (at start and on each reload); the client library checks
// its own so that a bad file is named instead of failing every handshake.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace gdr {

// Paths of one file set; empty means absent.
struct TlsPaths {
  std::string cert;  // certificate chain, leaf first
  std::string key;   // private key of the leaf
  std::string ca;    // trusted CA certificates (the peer is verified against these)
};

// One checked file set: the PEM text as read, and what the leaf certificate says.
struct TlsMaterial {
  std::string cert_pem;
  std::string key_pem;
  std::string ca_pem;
  // Of the leaf certificate (unset when there is none).
  std::string subject;  // one line, "CN=gdrstored,O=example"
  absl::Time not_before = absl::InfinitePast();
  absl::Time not_after = absl::InfiniteFuture();

  // Reads and checks every non-empty path of `paths`. `cert` and `key` go together. Errors name the
  // file by its `label` ("--tls-cert", "tls_cert"), its path and what is wrong: NOT_FOUND /
  // PERMISSION_DENIED when it cannot be read, INVALID_ARGUMENT when it holds no PEM certificate (or
  // key), when the key does not match the certificate, or for a key without a certificate. Expiry
  // is not an error here: callers decide (Expired()).
  static absl::StatusOr<TlsMaterial> Load(const TlsPaths& paths, const std::string& cert_label,
                                          const std::string& key_label,
                                          const std::string& ca_label);

  bool has_identity() const { return !cert_pem.empty(); }
  bool Expired(absl::Time now) const { return now > not_after; }
  bool NotYetValid(absl::Time now) const { return now < not_before; }
  // "CN=gdrstored, valid 2025-01-01T00:00:00Z..2026-01-01T00:00:00Z".
  std::string Describe() const;
};

}  // namespace gdr
