#include "client/gdrctl/global_options.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "client/gdrctl/size_flag.h"
#include "common/base/host_port.h"
#include "common/base/status_macros.h"
#include "gdrstore/client_environment.h"

namespace gdrctl {
namespace {

// The daemon's HOST:PORT from --daemon, or from -a (HOST, HOST:PORT, V6, [V6] or [V6]:PORT)
// and -p. A port in -a that disagrees with an explicit -p is refused rather than guessed at.
absl::StatusOr<std::string> DaemonAddress(const GlobalOptions& c) {
  if (!c.daemon.empty()) {
    if (absl::StatusOr<gdr::HostPort> hp = gdr::SplitHostPort(c.daemon); !hp.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--daemon: ", hp.status().message()));
    }
    return c.daemon;
  }
  const std::string& a = c.address;
  const size_t colons = std::count(a.begin(), a.end(), ':');
  if (a.empty()) return absl::InvalidArgumentError("-a: empty daemon host");
  if (a.front() == '[' && a.back() == ']') {
    return gdr::JoinHostPort(a.substr(1, a.size() - 2), c.port);
  }
  if (a.front() != '[' && colons != 1) return gdr::JoinHostPort(a, c.port);  // a host or a bare V6
  absl::StatusOr<gdr::HostPort> hp = gdr::SplitHostPort(a);
  if (!hp.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "-a: ", hp.status().message(), "; -a takes HOST, HOST:PORT or [V6]:PORT (or use -p)"));
  }
  if (c.port_given && hp->port != c.port) {
    return absl::InvalidArgumentError(absl::StrCat(
        "-a ", a, " names port ", hp->port, " but -p says ", c.port, ": give the port once"));
  }
  return gdr::JoinHostPort(hp->host, hp->port);
}

}  // namespace

void AddJsonFlag(CLI::App* app, GlobalOptions* g) {
  app->add_flag("--json", g->json, "machine-readable output");
}

void AddGlobalOptions(CLI::App& app, GlobalOptions* g) {
  GlobalOptions& c = *g;
  app.add_option("-a,--address", c.address, "daemon host: HOST, HOST:PORT or [V6]:PORT")
      ->capture_default_str();
  app.add_option("-p,--port", c.port, "daemon gRPC port")->capture_default_str();
  app.add_option("--daemon", c.daemon,
                 "daemon HOST:PORT (overrides -a/-p); without either, $GDRSTORE_ADDRESS");
  app.add_option("--target-host", c.target_host,
                 "address the daemon uses to reach this client's tcp target (default: automatic)");
  app.add_option("--timeout-ms", c.timeout_ms, "deadline of each RPC")->capture_default_str();
  AddJsonFlag(&app, g);
  app.add_option("--transport", c.transport,
                 "how the daemon reaches this process's memory: tcp, rc, dc (mlx5 DCT), local "
                 "(a daemon on this host; memory handed over, no copy) or auto (local, else dc, "
                 "else rc, else tcp)")
      ->capture_default_str()
      ->check(CLI::IsMember({"tcp", "rc", "dc", "local", "auto"}));
  app.add_option("--local-socket", c.local_socket,
                 "local: the daemon's handoff socket (default: the path the daemon names)");
  app.add_option("--agent", c.agent,
                 "go through the node agent at this socket (gdragent --socket): it reaches the "
                 "daemons, so --transport and the RDMA, TLS and token options are its own); "
                 "default $GDRSTORE_AGENT");
  app.add_option("--require", c.require,
                 "fail instead of falling back: comma-separated terms every op's path must meet "
                 "(tcp, rc, dc, local, agent, direct; for GPU memory dma-buf, peermem, staged, "
                 "cuda-ipc, vmm-fd); default $GDRSTORE_REQUIRE");
  app.add_option("--rdma-device", c.rdma_device, "rc: RDMA device by name (default: first ACTIVE)");
  app.add_option("--rdma-addr", c.rdma_addr, "rc: RDMA device by local IP address");
  app.add_option("--rdma-gid-index", c.gid_index, "rc: GID index (-1: RoCE v2 IPv4-mapped)")
      ->capture_default_str();
  app.add_option("--rc-qps", c.rc_qps, "rc: QPs to connect")
      ->capture_default_str()
      ->check(CLI::Range(1u, 64u));
  app.add_option("--rails", c.rails,
                 "rc over several RDMA devices: a comma list (rxe0,rxe1) or auto (every ACTIVE "
                 "one); large ops are striped over them");
  app.add_flag("--crc", c.crc32c,
               "ask the daemon for the CRC32C of every op's bytes and check it against the "
               "buffer (a mismatch fails the op: DATA_LOSS)");
  app.add_flag("--fail-when-full", c.fail_when_full,
               "an op the daemon would not admit yet (its in-flight limits) fails at once with "
               "RESOURCE_EXHAUSTED instead of waiting for room within its deadline");
  AddSizeOption(&app, "--slice-size", &c.slice_bytes,
                "with --rails: ops this large are cut into slices of this size, spread over the "
                "rails (default 1MiB)");
  app.add_option("--token-file", c.token_file,
                 "send the first token of this file as 'authorization: Bearer' (daemons with "
                 "--token-file; grants after the token are the daemon's business and ignored "
                 "here); default $GDRSTORE_TOKEN_FILE");
  app.add_option("--tls-ca", c.tls_ca,
                 "TLS to the daemon, trusting the CA(s) of this PEM file (daemons with "
                 "--tls-cert); default $GDRSTORE_TLS_CA");
  app.add_option("--tls-cert", c.tls_cert,
                 "client certificate (PEM) for daemons with --tls-client-ca; default "
                 "$GDRSTORE_TLS_CERT");
  app.add_option("--tls-key", c.tls_key, "private key of --tls-cert; default $GDRSTORE_TLS_KEY");
  app.add_option("--tls-server-name", c.tls_server_name,
                 "name to check the daemon's certificate against instead of the -a host; "
                 "default $GDRSTORE_TLS_SERVER_NAME");
  app.add_option("--cluster", c.cluster_url,
                 "write/read/bench on a cluster volume of the cluster kept in etcd: "
                 "etcd://HOST:PORT[,HOST:PORT]/PREFIX (each member reached with the transport "
                 "and security flags given here)");
  app.add_option("--cluster-file", c.cluster_file,
                 "the same with a static members file (JSON: members and volumes)");
  app.add_option("--cluster-tls-ca", c.cluster_tls_ca,
                 "with --cluster: TLS to etcd, trusting the CA(s) of this PEM");
  app.add_option("--cluster-tls-cert", c.cluster_tls_cert,
                 "with --cluster: the client certificate (PEM) etcd's --client-cert-auth asks for");
  app.add_option("--cluster-tls-key", c.cluster_tls_key, "private key of --cluster-tls-cert");
  app.set_version_flag("--version", GDR_VERSION);
}

absl::Status FinishGlobalOptions(const CLI::App& app, GlobalOptions* g) {
  g->port_given = app.count("--port") > 0;
  g->daemon_explicit =
      app.count("--daemon") > 0 || app.count("--address") > 0 || app.count("--port") > 0;
  if (g->timeout_ms <= 0) return absl::InvalidArgumentError("--timeout-ms must be > 0");
  absl::StatusOr<std::string> d = DaemonAddress(*g);
  if (!d.ok()) return d.status();
  g->daemon = *std::move(d);
  if (!g->daemon_explicit) {
    // $GDRSTORE_ADDRESS, read as the library reads it, where the command line named no daemon.
    gdrstore::ClientOptions env;
    env.daemon_address.clear();
    gdrstore::ExplicitOptions others;
    others.agent = others.token = true;
    GDR_RETURN_IF_ERROR(gdrstore::ApplyClientEnvironment(others, &env));
    if (!env.daemon_address.empty()) {
      g->daemon = std::move(env.daemon_address);
      g->daemon_explicit = true;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<gdrstore::ClientOptions> ClientOptionsOf(const GlobalOptions& c) {
  // The daemon was resolved by FinishGlobalOptions ($GDRSTORE_ADDRESS included).
  return gdrstore::ClientOptionsFromFlags(c, c.daemon, gdrstore::FlagEnvironment::kRead);
}

}  // namespace gdrctl
