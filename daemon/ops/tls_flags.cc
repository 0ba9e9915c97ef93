#include "daemon/ops/tls_flags.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <CLI/CLI.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace gdr {

void AddTlsFlags(CLI::App& app, TlsSettings* v) {
  app.add_option("--tls-cert", v->cert,
                 "serve gRPC over TLS with this PEM certificate chain (with "
                 "--tls-key). The files "
                 "are re-read when they change and on SIGHUP");
  app.add_option("--tls-key", v->key, "PEM private key of --tls-cert");
  app.add_option("--tls-client-ca", v->client_ca,
                 "mTLS: require client certificates signed by a CA of this PEM file");
  app.add_flag("--insecure", v->insecure,
               "allow a non-loopback --listen address with neither TLS nor "
               "--token-file");
}

absl::Status CheckTlsFlags(const TlsSettings& tls) {
  if (tls.cert.empty() != tls.key.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key go together: give both or neither");
  }
  if (tls.mutual() && !tls.enabled()) {
    return absl::InvalidArgumentError(
        "--tls-client-ca needs --tls-cert and "
        "--tls-key (mTLS runs on top of TLS)");
  }
  return absl::OkStatus();
}

bool IsLoopbackListen(const std::string& listen) {
  if (absl::StartsWith(listen, "unix:") || absl::StartsWith(listen, "unix-abstract:")) return true;
  // HOST:PORT or [V6]:PORT; port 0 (ephemeral) is fine here, so not SplitHostPort.
  std::string host;
  if (absl::StartsWith(listen, "[")) {
    const size_t close = listen.find(']');
    if (close == std::string::npos) return false;
    host = listen.substr(1, close - 1);
  } else {
    host = listen.substr(0, listen.rfind(':'));
  }
  if (host == "localhost") return true;
  in_addr v4{};
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  if (inet_pton(AF_INET6, host.c_str(), &v6) == 1) return IN6_IS_ADDR_LOOPBACK(&v6);
  return false;
}

absl::Status CheckListenExposure(const std::string& listen, const TlsSettings& tls,
                                 bool tokens_configured) {
  if (tls.enabled() || tokens_configured || tls.insecure || IsLoopbackListen(listen)) {
    return absl::OkStatus();
  }
  return absl::FailedPreconditionError(
      absl::StrCat("refusing to listen on ", listen,
                   ": it is reachable from other hosts, and with neither TLS nor tokens "
                   "anyone who reaches "
                   "it could read and write every volume. Give --tls-cert/--tls-key (and "
                   "--tls-client-ca "
                   "for mTLS), or --token-file, or --insecure to run open on purpose"));
}

}  // namespace gdr
