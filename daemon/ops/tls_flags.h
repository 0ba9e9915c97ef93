// gdrstored's transport-security flags (--tls-cert, --tls-key, --tls-client-ca, --insecure) and the
// rule they serve: a daemon reachable from other hosts must not run open by accident.
#pragma once

#include <string>

#include "absl/status/status.h"

namespace CLI {
class App;
}

namespace gdr {

struct TlsSettings {
  std::string cert;       // PEM certificate chain served to clients; empty: no TLS
  std::string key;        // its private key
  std::string client_ca;  // mTLS: client certificates required and verified
                          // against this CA
  bool insecure = false;  // accept a non-loopback listen address with neither TLS nor tokens

  bool enabled() const { return !cert.empty(); }
  bool mutual() const { return !client_ca.empty(); }
};

// Registers the flags on `app` (config-file keys tls-cert, tls-key, tls-client-ca, insecure).
void AddTlsFlags(CLI::App& app, TlsSettings* values);

// INVALID_ARGUMENT when only one of --tls-cert/--tls-key is given, or --tls-client-ca without them.
// The files themselves are checked by TlsReloader.
absl::Status CheckTlsFlags(const TlsSettings& tls);

// Whether a gRPC listen address stays on this host: a unix socket, localhost, 127.0.0.0/8 or ::1.
// Anything else (0.0.0.0, [::], a host name, an interface address) is reachable.
bool IsLoopbackListen(const std::string& listen);

// FAILED_PRECONDITION naming the three ways out (TLS, tokens, --insecure) when `listen` is not
// loopback and callers are neither encrypted nor authenticated.
absl::Status CheckListenExposure(const std::string& listen, const TlsSettings& tls,
                                 bool tokens_configured);

}  // namespace gdr
