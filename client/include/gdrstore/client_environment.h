// The connection settings a client takes from the environment where its caller set none:
// GDRSTORE_AGENT, GDRSTORE_ADDRESS and GDRSTORE_TOKEN_FILE, as a pod's spec passes them. One
// reading for the C ABI (and so Python's Client()), C++ callers that ask for it, and gdrctl.
#pragma once

#include "absl/status/status.h"
#include "gdrstore/types.h"

namespace gdrstore {

// The connection fields a caller set itself, which the environment never replaces.
struct ExplicitOptions {
  bool agent = false;           // ClientOptions::agent
  bool daemon_address = false;  // ClientOptions::daemon_address
  bool token = false;           // ClientOptions::token, or a token file
};

// Fills each connection field of `*options` that `given` leaves to the environment:
//   agent          <- $GDRSTORE_AGENT       the node agent's socket (gdragent --socket)
//   daemon_address <- $GDRSTORE_ADDRESS     the daemon's HOST:PORT
//   token          <- $GDRSTORE_TOKEN_FILE  the first token of that file (gdrstored's format)
// A variable that is unset or empty changes nothing. With GDRSTORE_AGENT and GDRSTORE_ADDRESS
// both set, both fields are filled and the agent wins, as with both options given: every call
// goes through the agent, which reaches the daemons itself. Errors name the variable and its
// value: INVALID_ARGUMENT for an address that is not HOST:PORT or a path longer than a Unix
// socket's; the token file's own error when it cannot be read or holds no token. Reads the
// process's environment: not safe against another thread's setenv at the same time.
absl::Status ApplyClientEnvironment(const ExplicitOptions& given, ClientOptions* options);

}  // namespace gdrstore
