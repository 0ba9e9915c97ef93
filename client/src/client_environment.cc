#include "gdrstore/client_environment.h"

#include <sys/un.h>

#include <cstdlib>
#include <optional>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "common/base/host_port.h"
#include "common/wire/token_file.h"
#include "gdrstore/connection_options.h"

namespace gdrstore {
namespace {

// The variable's value; empty when unset, as an empty value means nothing to use.
std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::string() : std::string(v);
}

// `s` (whose message quotes the value) as the variable's error.
absl::Status Named(const char* variable, const absl::Status& s) {
  return absl::Status(s.code(), absl::StrCat(variable, ": ", s.message()));
}

}  // namespace

absl::Status ApplyClientEnvironment(const ExplicitOptions& given, ClientOptions* options) {
  if (!given.agent) {
    if (std::string agent = Env("GDRSTORE_AGENT"); !agent.empty()) {
      // Checked here, where the variable can be named; connecting would only name the path.
      if (agent.size() >= sizeof(sockaddr_un::sun_path)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "GDRSTORE_AGENT: socket path '", agent, "' is ", agent.size(),
            " bytes; a Unix socket's path is at most ", sizeof(sockaddr_un::sun_path) - 1));
      }
      options->agent = std::move(agent);
    }
  }
  if (!given.daemon_address) {
    if (std::string address = Env("GDRSTORE_ADDRESS"); !address.empty()) {
      if (absl::StatusOr<gdr::HostPort> hp = gdr::SplitHostPort(address); !hp.ok()) {
        return Named("GDRSTORE_ADDRESS", hp.status());
      }
      options->daemon_address = std::move(address);
    }
  }
  if (!given.token) {
    if (std::string file = Env("GDRSTORE_TOKEN_FILE"); !file.empty()) {
      absl::StatusOr<std::string> token = gdr::ReadClientToken(file);
      if (!token.ok()) return Named("GDRSTORE_TOKEN_FILE", token.status());
      options->token = *std::move(token);
    }
  }
  return absl::OkStatus();
}

// Each option connection_options.h lists for the command lines only is a ClientOptions member.
#define GDR_IS_CLIENT_OPTION(member, ...)                                      \
  static_assert(sizeof(ClientOptions::member) > 0, #member " is no ClientOptions member");
GDRSTORE_CXX_CONNECTION_OPTIONS(GDR_IS_CLIENT_OPTION)
#undef GDR_IS_CLIENT_OPTION

absl::StatusOr<ClientOptions> ClientOptionsFromFlags(const ConnectionFlags& f,
                                                     const std::string& daemon_address,
                                                     FlagEnvironment environment) {
  const bool read_env = environment == FlagEnvironment::kRead;
  auto flag_or_env = [read_env](const std::string& flag, const char* variable) {
    return flag.empty() && read_env ? Env(variable) : flag;
  };
  ClientOptions o;
  if (!daemon_address.empty()) o.daemon_address = daemon_address;
  std::optional<Transport> transport = ParseTransport(f.transport);
  if (!transport) {
    return absl::InvalidArgumentError(
        absl::StrCat("--transport '", f.transport, "' is not one of tcp, rc, dc, local, auto"));
  }
  o.transport = *transport;
  if (f.timeout_ms <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("a timeout of ", f.timeout_ms,
                                                   " ms: it must be > 0"));
  }
  o.rpc_timeout = std::chrono::milliseconds(f.timeout_ms);
  o.target_host = f.target_host;
  o.local_socket = f.local_socket;
  o.agent = f.agent;
  if (!f.token_file.empty()) {
    absl::StatusOr<std::string> token = gdr::ReadClientToken(f.token_file);
    if (!token.ok()) return Named("--token-file", token.status());
    o.token = *std::move(token);
  }
  if (read_env) {
    // $GDRSTORE_AGENT and $GDRSTORE_TOKEN_FILE where the flags are absent, as the library
    // reads them; the address is the caller's.
    ExplicitOptions given;
    given.agent = !f.agent.empty();
    given.daemon_address = true;
    given.token = !f.token_file.empty();
    if (absl::Status s = ApplyClientEnvironment(given, &o); !s.ok()) return s;
  }
  o.require = flag_or_env(f.require, "GDRSTORE_REQUIRE");
  o.tls_ca = flag_or_env(f.tls_ca, "GDRSTORE_TLS_CA");
  o.tls_cert = flag_or_env(f.tls_cert, "GDRSTORE_TLS_CERT");
  o.tls_key = flag_or_env(f.tls_key, "GDRSTORE_TLS_KEY");
  o.tls_server_name = flag_or_env(f.tls_server_name, "GDRSTORE_TLS_SERVER_NAME");
  if (o.tls_cert.empty() != o.tls_key.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key go together");
  }
  o.rdma_device = f.rdma_device;
  o.rdma_address = f.rdma_addr;
  o.rdma_gid_index = f.gid_index;
  o.rc_qps = f.rc_qps;
  if (!f.rails.empty()) {
    for (absl::string_view device : absl::StrSplit(f.rails, ',')) {
      device = absl::StripAsciiWhitespace(device);  // "rxe0, rxe1" names rxe1, not " rxe1"
      if (!device.empty()) o.rails.emplace_back(device);
    }
    if (o.rails.empty()) return absl::InvalidArgumentError("--rails: no device named");
  }
  o.slice_bytes = f.slice_bytes;
  o.crc32c = f.crc32c;
  o.fail_when_full = f.fail_when_full;
  if (f.stream_calls != 0) o.stream_calls = f.stream_calls;
  return o;
}

}  // namespace gdrstore
