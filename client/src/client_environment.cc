#include "gdrstore/client_environment.h"

#include <sys/un.h>

#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/base/host_port.h"
#include "common/wire/token_file.h"

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

}  // namespace gdrstore
