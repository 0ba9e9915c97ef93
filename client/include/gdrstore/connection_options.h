/* The connection options, defined once: how a client reaches a daemon (or the node agent). The
 * C ABI's gdrstore_client_options (gdrstore.h) takes its fields from this list, in its order,
 * and the library's conversion to gdrstore::ClientOptions (c_api_handle.cc) follows it; the
 * Python package, gdrctl, gdragent and the workload CLI are checked against it by
 * tests/python/test_connection_options.py. Plain C, included by gdrstore.h. */
#ifndef GDRSTORE_CONNECTION_OPTIONS_H_
#define GDRSTORE_CONNECTION_OPTIONS_H_

/* X(field, c_type, from_c, member, gdrctl, gdragent, workload, python, cluster):
 *   field     the gdrstore_client_options field, and the Python ctypes field of the same name
 *   c_type    its C type
 *   from_c    how the library turns a set field into gdrstore::ClientOptions::member:
 *             TEXT (a string copied), TRANSPORT (a transport's name, parsed), TOKEN_FILE (the
 *             file's first token read), MILLIS (milliseconds), FLAG (nonzero: true), COUNT
 *             (a number as it is; 0: the member's default)
 *   member    the gdrstore::ClientOptions member it sets
 *   gdrctl, gdragent, workload: the flag each command line takes it as; "" where that one has
 *             none, for the reason the entry's comment gives
 *   python    the keyword argument of gdrstore.Client (and connect) that sets it
 *   cluster   1 when gdrstore.Cluster takes that keyword too (each member reached with it)
 * The C struct's layout follows this order, and callers built against an older header pass
 * a shorter struct: entries are only ever appended. */
#define GDRSTORE_CONNECTION_OPTIONS(X)                                                          \
  /* "HOST:PORT"; NULL: $GDRSTORE_ADDRESS, else 127.0.0.1:50051. A cluster's members have     \
   * their own addresses. */                                                                  \
  X(daemon_address, const char*, TEXT, daemon_address, "--daemon", "--daemon", "--daemon",     \
    "address", 0)                                                                              \
  /* "tcp", "rc", "dc", "local" or "auto"; NULL: tcp */                                        \
  X(transport, const char*, TRANSPORT, transport, "--transport", "--transport", "--transport", \
    "transport", 1)                                                                            \
  /* The bearer token; NULL or "": none. No command line takes a secret as an argument (it     \
   * would show in ps): they take --token-file. */                                            \
  X(token, const char*, TEXT, token, "", "", "", "token", 1)                                    \
  /* Reads the token from this file (its first token line; grants after it are ignored);      \
   * NULL (and token NULL): $GDRSTORE_TOKEN_FILE, else none */                                 \
  X(token_file, const char*, TOKEN_FILE, token, "--token-file", "--token-file", "--token-file", \
    "token_file", 1)                                                                           \
  /* rc/dc: the RDMA device; NULL: chosen as the C++ library does */                           \
  X(rdma_device, const char*, TEXT, rdma_device, "--rdma-device", "--rdma-device",              \
    "--rdma-device", "rdma_device", 1)                                                         \
  /* The deadline of each op; 0: none. gdragent's own timeouts are others (--hello-...). */    \
  X(rpc_timeout_ms, uint32_t, MILLIS, rpc_timeout, "--timeout-ms", "--upstream-timeout-ms",     \
    "--timeout", "timeout", 1)                                                                 \
  /* TLS: the PEM CA file the daemon's certificate must chain to */                            \
  X(tls_ca, const char*, TEXT, tls_ca, "--tls-ca", "--tls-ca", "--tls-ca", "tls_ca", 1)          \
  /* TLS: the client certificate (PEM), for mTLS daemons */                                    \
  X(tls_cert, const char*, TEXT, tls_cert, "--tls-cert", "--tls-cert", "--tls-cert", "tls_cert", \
    1)                                                                                         \
  /* TLS: its private key (PEM) */                                                             \
  X(tls_key, const char*, TEXT, tls_key, "--tls-key", "--tls-key", "--tls-key", "tls_key", 1)    \
  /* TLS: the name to verify instead of the address's host */                                  \
  X(tls_server_name, const char*, TEXT, tls_server_name, "--tls-server-name",                   \
    "--tls-server-name", "--tls-server-name", "tls_server_name", 1)                            \
  /* Nonzero: ask the daemon for the CRC32C of every op's bytes and check it (a mismatch:      \
   * GDRSTORE_DATA_LOSS) */                                                                    \
  X(crc32c, uint32_t, FLAG, crc32c, "--crc", "--crc", "--crc", "crc32c", 1)                     \
  /* 0: an op the daemon would not admit yet (its in-flight limits as GetInfo states them)     \
   * waits in this process until answers free room, within the op's deadline; nonzero: it     \
   * fails at once with GDRSTORE_RESOURCE_EXHAUSTED */                                         \
  X(fail_when_full, uint32_t, FLAG, fail_when_full, "--fail-when-full", "--fail-when-full",     \
    "--fail-when-full", "fail_when_full", 1)                                                   \
  /* The node agent's socket (gdragent --socket): every call goes through it; daemon_address, \
   * transport, token and TLS are the agent's own. NULL: $GDRSTORE_AGENT, else the daemon     \
   * directly; "": the daemon directly. A malformed variable fails the open, naming it        \
   * (gdrstore/client_environment.h). gdragent is the agent; a cluster's members are reached  \
   * directly. */                                                                              \
  X(agent, const char*, TEXT, agent, "--agent", "", "--agent", "agent", 0)                      \
  /* transport local: the daemon's handoff socket; NULL: the path its GetInfo names. A        \
   * cluster is reached over tcp, rc or dc. */                                                 \
  X(local_socket, const char*, TEXT, local_socket, "--local-socket", "--local-socket",          \
    "--local-socket", "local_socket", 0)                                                       \
  /* Terms every op's path must meet instead of falling back ("local", "rc,dma-buf", "agent"; \
   * ClientOptions::require). NULL: any path */                                                \
  X(require, const char*, TEXT, require, "--require", "--require", "--require", "require", 1)    \
  /* Stream RPCs each Stream spreads its ops over, 1..64 (gdrstore::StreamOptions); 0: the    \
   * library's, 4. One call's messages go one at a time, which bounds a lone Stream's small    \
   * ops; more calls cost CPU, so a process among many on a host short of cores may want 1    \
   * (docs/benchmarks.md). gdrctl takes it per run: `gdrctl bench --stream-calls`. */          \
  X(stream_calls, uint32_t, COUNT, stream_calls, "", "--stream-calls", "--stream-calls",        \
    "stream_calls", 1)

/* The options of gdrstore::ClientOptions the C ABI does not carry, which both command lines
 * take (gdrstore::ConnectionFlags; tests/python/test_connection_options.py reads their --help):
 * Y(member, gdrctl, gdragent), the flags as above. */
#define GDRSTORE_CXX_CONNECTION_OPTIONS(Y)                                                      \
  /* tcp: the address the daemon connects back to */                                          \
  Y(target_host, "--target-host", "--target-host")                                             \
  /* rc: the RDMA device by a local IP address on it, and the GID index */                     \
  Y(rdma_address, "--rdma-addr", "--rdma-addr")                                                \
  Y(rdma_gid_index, "--rdma-gid-index", "--rdma-gid-index")                                    \
  /* rc: QPs offered to the daemon */                                                          \
  Y(rc_qps, "--rc-qps", "--rc-qps")                                                            \
  /* rc over several RDMA devices, and the slice large ops are cut into over them */           \
  Y(rails, "--rails", "--rails")                                                               \
  Y(slice_bytes, "--slice-size", "--slice-size")

#endif /* GDRSTORE_CONNECTION_OPTIONS_H_ */
