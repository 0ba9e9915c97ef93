// Certificates for the TLS tests, made by the `openssl` command in a scratch directory: CAs, server
// certificates (SAN DNS:localhost, IP:127.0.0.1), client certificates with the identities a test
// names, and certificates whose validity ended in the past.
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace gdr::integ {

// A certificate and its key, as PEM files.
struct CertFiles {
  std::string cert;
  std::string key;
};

class TestPki {
 public:
  // Works in `dir` (which must exist and outlive the object).
  explicit TestPki(std::string dir) : dir_(std::move(dir)) {}

  // A self-signed CA: NAME.ca.pem / NAME.ca.key. `name` is a file-name-safe word.
  absl::StatusOr<CertFiles> MakeCa(const std::string& name);

  enum class Use { kServer, kClient, kPeer };
  // A certificate NAME.pem / NAME.key signed by `ca`. kServer: SAN DNS:localhost, IP:127.0.0.1,
  // extendedKeyUsage serverAuth; kClient: SAN `san` (e.g. "URI:spiffe://t/a" or "DNS:client-a"),
  // clientAuth; kPeer: kServer's SAN, serverAuth and clientAuth (a server that also calls its
  // peers, as etcd members do). `expired`: valid from 2020-01-01 to 2020-01-02 only.
  absl::StatusOr<CertFiles> Issue(const CertFiles& ca, const std::string& name, Use use,
                                  const std::string& san = "", bool expired = false);

 private:
  absl::Status Openssl(const std::vector<std::string>& args, const std::string& tag);
  std::string dir_;
  int runs_ = 0;
};

}  // namespace gdr::integ
