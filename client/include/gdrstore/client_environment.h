// The connection settings a client takes from the environment where its caller set none:
// GDRSTORE_AGENT, GDRSTORE_ADDRESS and GDRSTORE_TOKEN_FILE, as a pod's spec passes them. One
// reading for the C ABI (and so Python's Client()), C++ callers that ask for it, and gdrctl.
// Also the connection flags gdrctl and gdragent both take, and their one conversion.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
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

// The connection options as command lines take them (gdrctl's global options, gdragent's
// upstream flags; the flags themselves: gdrstore/connection_options.h), as text and numbers
// before any is checked. The daemon's address is the caller's to resolve.
struct ConnectionFlags {
  std::string transport = "tcp";  // --transport
  std::string target_host;        // --target-host
  int64_t timeout_ms = 120000;    // --timeout-ms (gdragent: --upstream-timeout-ms)
  std::string local_socket;       // --local-socket
  std::string agent;              // --agent
  std::string require;            // --require
  std::string rdma_device;        // --rdma-device
  std::string rdma_addr;          // --rdma-addr
  int gid_index = -1;             // --rdma-gid-index
  uint32_t rc_qps = 2;            // --rc-qps
  std::string rails;              // --rails: a comma list of devices, or auto; empty: one
  uint64_t slice_bytes = 1 << 20;  // --slice-size
  std::string token_file;          // --token-file
  std::string tls_ca, tls_cert, tls_key, tls_server_name;  // --tls-ca ...
  bool crc32c = false;          // --crc
  bool fail_when_full = false;  // --fail-when-full
  uint32_t stream_calls = 0;    // --stream-calls (gdragent); 0: ClientOptions' default
};

// Whether flags left empty are filled from the environment (a command a person runs) or not (a
// service, whose configuration is all it goes by).
enum class FlagEnvironment { kRead, kIgnore };

// ClientOptions from `flags`, with `daemon_address` (HOST:PORT; empty: ClientOptions' default).
// With kRead, $GDRSTORE_AGENT and $GDRSTORE_TOKEN_FILE (as ApplyClientEnvironment reads them),
// $GDRSTORE_TLS_CA, $GDRSTORE_TLS_CERT, $GDRSTORE_TLS_KEY, $GDRSTORE_TLS_SERVER_NAME and
// $GDRSTORE_REQUIRE fill the flags left empty. INVALID_ARGUMENT naming the flag: a transport
// that is none of tcp, rc, dc, local, auto; --rails naming no device; --tls-cert without
// --tls-key or the reverse; a timeout of 0 ms or less. The token file's own error (its code)
// prefixed with "--token-file: " when it cannot be read.
absl::StatusOr<ClientOptions> ClientOptionsFromFlags(const ConnectionFlags& flags,
                                                     const std::string& daemon_address,
                                                     FlagEnvironment environment);

}  // namespace gdrstore
