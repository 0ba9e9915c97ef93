#include "agent/agent_config.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/base/host_port.h"
#include "common/base/status_macros.h"
#include "common/base/units.h"
#include "common/process/service_flags.h"
#include "gdrstore/client_environment.h"

namespace gdr::agent {
namespace {

absl::StatusOr<mode_t> ParseMode(const std::string& text) {
  uint32_t mode = 0;
  for (char c : text) {
    if (c < '0' || c > '7') break;
    mode = mode * 8 + static_cast<uint32_t>(c - '0');
  }
  if (text.empty() || text.size() > 4 || text.find_first_not_of("01234567") != std::string::npos ||
      mode > 0777) {
    return absl::InvalidArgumentError(
        absl::StrCat("--socket-mode '", text, "' is not an octal mode such as 0660"));
  }
  // The socket must at least let its owner (the agent's uid) connect.
  if ((mode & 0600) != 0600) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--socket-mode ", text, " leaves the owner without read and write on the socket"));
  }
  return static_cast<mode_t>(mode);
}

// "auto" (0: the agent derives it from RLIMIT_NOFILE) or a count in 1..`max`.
absl::StatusOr<uint32_t> ParseAutoCount(const char* flag, const std::string& text,
                                        uint32_t max) {
  if (text == "auto") return 0;
  uint32_t n = 0;
  if (!absl::SimpleAtoi(text, &n) || n < 1 || n > max) {
    return absl::InvalidArgumentError(absl::StrCat(flag, " '", text.substr(0, 32),
                                                   "' is neither auto nor a number in 1..", max));
  }
  return n;
}

// The upstream client's settings from the flags: the connection flags gdrctl takes too
// (gdrstore::ConnectionFlags, turned into options by the library's one function) and where the
// daemons are.
struct UpstreamFlags : gdrstore::ConnectionFlags {
  std::vector<std::string> daemons;
  std::string daemon_service;
  int64_t resolve_interval_ms = 10000;
  std::string cluster_url, cluster_file;
  std::string cluster_tls_ca, cluster_tls_cert, cluster_tls_key;
  std::string slice_size = "1MiB";  // --slice-size, as a size; ParseSize makes it slice_bytes
};

void AddUpstreamFlags(CLI::App& app, UpstreamFlags* f) {
  app.add_option("--daemon", f->daemons,
                 "a storage daemon (gdrstored) HOST:PORT, repeatable: each op goes to the daemon "
                 "that serves its volume");
  app.add_option("--daemon-service", f->daemon_service,
                 "instead of --daemon: NAME:PORT, the daemons at every address NAME resolves to "
                 "(a headless Service), resolved again every --resolve-interval-ms");
  app.add_option("--resolve-interval-ms", f->resolve_interval_ms,
                 "with --daemon-service: how often its name is resolved again")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{100}, int64_t{3600} * 1000));
  app.add_option("--cluster", f->cluster_url,
                 "instead of --daemon: a cluster of daemons, etcd://HOST:PORT[,HOST:PORT]/PREFIX");
  app.add_option("--cluster-tls-ca", f->cluster_tls_ca,
                 "with --cluster: TLS to etcd, trusting the CA(s) of this PEM");
  app.add_option("--cluster-tls-cert", f->cluster_tls_cert,
                 "with --cluster: the client certificate (PEM) etcd's --client-cert-auth asks for");
  app.add_option("--cluster-tls-key", f->cluster_tls_key, "private key of --cluster-tls-cert");
  app.add_option("--cluster-file", f->cluster_file,
                 "instead of --daemon: a cluster of daemons listed in this members file (JSON)");
  app.add_option("--transport", f->transport,
                 "how the daemon reaches memory the agent registered: tcp, rc, dc, local (a "
                 "daemon on this host, handed the clients' memory as it came) or auto")
      ->capture_default_str()
      ->check(CLI::IsMember({"tcp", "rc", "dc", "local", "auto"}));
  app.add_option("--target-host", f->target_host,
                 "tcp: the address the daemon connects back to (default: automatic)");
  app.add_option("--rdma-device", f->rdma_device, "rc/dc: RDMA device by name");
  app.add_option("--rdma-addr", f->rdma_addr, "rc: RDMA device by local IP address");
  app.add_option("--rdma-gid-index", f->gid_index, "rc: GID index (-1: RoCE v2 IPv4-mapped)")
      ->capture_default_str();
  app.add_option("--rc-qps", f->rc_qps, "rc: QPs to connect")
      ->capture_default_str()
      ->check(CLI::Range(1u, 64u));
  app.add_option("--rails", f->rails, "rc over several RDMA devices: a comma list, or auto");
  app.add_option("--slice-size", f->slice_size,
                 "with --rails: ops this large are cut into slices of this size, spread over "
                 "the rails")
      ->capture_default_str();
  app.add_option("--token-file", f->token_file,
                 "send the first token of this file to the daemon ('authorization: Bearer')");
  app.add_option("--tls-ca", f->tls_ca, "TLS to the daemon, trusting the CA(s) of this PEM");
  app.add_option("--tls-cert", f->tls_cert, "client certificate (PEM) for mTLS daemons");
  app.add_option("--tls-key", f->tls_key, "private key of --tls-cert");
  app.add_option("--tls-server-name", f->tls_server_name,
                 "name checked against the daemon's certificate instead of its host");
  app.add_option("--upstream-timeout-ms", f->timeout_ms,
                 "deadline of an op whose caller gave none")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{24} * 3600 * 1000));
  app.add_option("--local-socket", f->local_socket,
                 "--transport local: the daemon's handoff socket (default: the path it names)");
  app.add_option("--require", f->require,
                 "fail instead of falling back: comma-separated terms every upstream op's path "
                 "must meet (rc, dc, local; for GPU memory dma-buf, peermem, ...)");
  app.add_flag("--crc", f->crc32c,
               "ask the daemons for the CRC32C of every op's bytes and check it (a mismatch "
               "fails the op: DATA_LOSS)");
  app.add_flag("--fail-when-full", f->fail_when_full,
               "an op a daemon would not admit yet fails at once with RESOURCE_EXHAUSTED instead "
               "of waiting for room within its deadline");
  app.add_option("--stream-calls", f->stream_calls,
                 "gRPC calls each upstream Stream spreads its ops over (0: the library's, 4)")
      ->capture_default_str()
      ->check(CLI::Range(0u, gdrstore::kMaxStreamCalls));
}

absl::Status FinishTargets(const UpstreamFlags& f, AgentConfig* cfg) {
  const int ways = (f.daemons.empty() ? 0 : 1) + (f.daemon_service.empty() ? 0 : 1) +
                   (f.cluster_url.empty() ? 0 : 1) + (f.cluster_file.empty() ? 0 : 1);
  if (ways == 0) {
    return absl::InvalidArgumentError(
        "--daemon HOST:PORT (or --daemon-service NAME:PORT, --cluster URL, or --cluster-file "
        "PATH) is required: the agent serves ops through storage daemons");
  }
  if (ways > 1) {
    return absl::InvalidArgumentError(
        "--daemon, --daemon-service, --cluster and --cluster-file are four ways to name the "
        "daemons: give one");
  }
  if (!f.daemon_service.empty()) {
    absl::StatusOr<HostPort> hp = SplitHostPort(f.daemon_service);
    if (!hp.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--daemon-service '", f.daemon_service, "': ", hp.status().message()));
    }
    if (f.transport == "local") {
      return absl::InvalidArgumentError(
          "--transport local serves one daemon on this host; --daemon-service names daemons "
          "reached over tcp, rc or dc");
    }
  }
  for (const std::string& d : f.daemons) {
    if (absl::StatusOr<HostPort> hp = SplitHostPort(d); !hp.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--daemon '", d, "': ", hp.status().message()));
    }
    if (std::count(f.daemons.begin(), f.daemons.end(), d) > 1) {
      return absl::InvalidArgumentError(absl::StrCat("--daemon ", d, " is named twice"));
    }
  }
  if (!f.cluster_url.empty() && f.cluster_url.rfind("etcd://", 0) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--cluster '", f.cluster_url, "' is not an etcd://HOST:PORT/PREFIX URL (a members file "
        "is --cluster-file)"));
  }
  if ((!f.cluster_tls_ca.empty() || !f.cluster_tls_cert.empty() || !f.cluster_tls_key.empty()) &&
      f.cluster_url.empty()) {
    return absl::InvalidArgumentError(
        "--cluster-tls-ca/cert/key are for etcd: they need --cluster etcd://...");
  }
  if (f.cluster_tls_cert.empty() != f.cluster_tls_key.empty()) {
    return absl::InvalidArgumentError(
        "--cluster-tls-cert and --cluster-tls-key go together: give both or neither");
  }
  if ((!f.cluster_url.empty() || !f.cluster_file.empty()) && f.transport == "local") {
    return absl::InvalidArgumentError(
        "--transport local serves one daemon on this host; a cluster is reached over tcp, rc "
        "or dc");
  }
  cfg->daemons = f.daemons;
  cfg->daemon_service = f.daemon_service;
  cfg->resolve_interval = absl::Milliseconds(f.resolve_interval_ms);
  cfg->cluster_url = f.cluster_url;
  cfg->cluster_file = f.cluster_file;
  cfg->cluster_tls_ca = f.cluster_tls_ca;
  cfg->cluster_tls_cert = f.cluster_tls_cert;
  cfg->cluster_tls_key = f.cluster_tls_key;
  return absl::OkStatus();
}

absl::StatusOr<gdrstore::ClientOptions> FinishUpstream(const UpstreamFlags& f,
                                                       gdrstore::ConnectionFlags* kept) {
  gdrstore::ConnectionFlags& flags = *kept;
  flags = f;
  absl::StatusOr<uint64_t> slice = ParseSize(f.slice_size);
  if (!slice.ok() || *slice == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--slice-size '", f.slice_size, "': ",
        slice.ok() ? "a slice of 0 bytes" : slice.status().message()));
  }
  flags.slice_bytes = *slice;
  // A service goes by its configuration alone: no GDRSTORE_* variable fills a flag.
  return gdrstore::ClientOptionsFromFlags(flags, "", gdrstore::FlagEnvironment::kIgnore);
}

}  // namespace

absl::StatusOr<AgentConfig> ParseAgentConfig(int argc, char** argv) {
  AgentConfig cfg;
  CLI::App app{"gdragent: the node agent. Serves processes on this host (containers "
               "included) through one Unix socket: they hand it their memory (a memfd, a CUDA "
               "IPC handle or a VMM fd) and their ops, and it moves the bytes through its own "
               "connection to a storage daemon"};
  app.set_config("--config", "", "config file (TOML/INI: key = value, keys as the long flags)");
  std::string socket_mode = "0660", max_bytes = "0", log_level = "info";
  std::string max_channels = "auto", fd_reserve = "auto";
  int64_t drain_ms = 10000, hello_ms = 5000;
  app.add_option("--socket", cfg.socket_path, "the Unix socket clients connect to")
      ->capture_default_str();
  app.add_option("--socket-mode", socket_mode, "permissions of the socket file (octal)")
      ->capture_default_str();
  app.add_option("--allow-uid", cfg.allow_uids,
                 "a uid that may use the agent besides root and the agent's own, repeatable");
  app.add_option("--allow-gid", cfg.allow_gids,
                 "processes running with this (effective, primary) gid may use the agent, "
                 "repeatable");
  app.add_option("--max-bytes-per-client", max_bytes,
                 "memory one client session may have registered at once (0: unlimited)")
      ->capture_default_str();
  app.add_option("--max-regions-per-client", cfg.max_regions_per_client,
                 "regions one client session may have registered at once")
      ->capture_default_str()
      ->check(CLI::Range(1u, 1u << 20));
  app.add_option("--max-ops-per-client", cfg.max_ops_per_client,
                 "ops one client session may have in flight; more are refused "
                 "RESOURCE_EXHAUSTED (not started, may be sent again)")
      ->capture_default_str()
      ->check(CLI::Range(1u, 1u << 20));
  app.add_option("--max-channels-per-client", max_channels,
                 "channels (OPEN_CHANNEL) one client session may have open at once, each a "
                 "descriptor of the agent; auto: a 16th of the descriptors above --fd-reserve, "
                 "1..64")
      ->capture_default_str();
  app.add_option("--max-streams-per-client", cfg.max_streams_per_client,
                 "Stream calls one client session may have open at once; more are refused "
                 "RESOURCE_EXHAUSTED")
      ->capture_default_str()
      ->check(CLI::Range(1u, 1u << 16));
  app.add_option("--max-clients", cfg.max_clients, "client sessions open at once")
      ->capture_default_str()
      ->check(CLI::Range(1u, 1u << 16));
  app.add_option("--fd-reserve", fd_reserve,
                 "descriptors no client may take: a new connection or channel that would leave "
                 "fewer free under RLIMIT_NOFILE is refused; auto: an eighth of the limit, "
                 "16..1024")
      ->capture_default_str();
  app.add_option("--hello-timeout-ms", hello_ms,
                 "a connection that does not say HELLO (or finish a request) within this is "
                 "closed")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{600000}));
  app.add_option("--upstream-streams", cfg.upstream_streams,
                 "Stream calls to each daemon that carry the clients' ops")
      ->capture_default_str()
      ->check(CLI::Range(1u, 256u));
  app.add_option("--cluster-workers", cfg.cluster_workers,
                 "with --cluster: cluster ops run at once (each blocks a worker until all its "
                 "pieces are answered)")
      ->capture_default_str()
      ->check(CLI::Range(1u, 1024u));
  app.add_option("--drain-timeout-ms", drain_ms,
                 "on SIGTERM, wait this long for ops in flight before cancelling them")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{600000}));
  app.add_option("--log-level", log_level, "debug, info, warning, error")->capture_default_str();
  UpstreamFlags upstream;
  AddUpstreamFlags(app, &upstream);
  app.set_version_flag("--version", GDR_VERSION);
  GDR_RETURN_IF_ERROR(
      ParseServiceFlags(app, argc, argv, absl::StrCat("gdragent ", GDR_VERSION, "\n")));
  if (cfg.socket_path.empty() || cfg.socket_path.front() != '/') {
    return absl::InvalidArgumentError(
        absl::StrCat("--socket '", cfg.socket_path, "' must be an absolute path"));
  }
  // sockaddr_un.sun_path holds 108 bytes with the terminating NUL.
  if (cfg.socket_path.size() > 107) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--socket: ", cfg.socket_path.size(), " bytes is longer than a Unix socket path may be "
        "(107)"));
  }
  GDR_ASSIGN_OR_RETURN(cfg.socket_mode, ParseMode(socket_mode));
  absl::StatusOr<uint64_t> bytes = ParseSize(max_bytes);
  if (!bytes.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max-bytes-per-client: ", bytes.status().message()));
  }
  cfg.max_bytes_per_client = *bytes;
  GDR_ASSIGN_OR_RETURN(cfg.max_channels_per_client,
                       ParseAutoCount("--max-channels-per-client", max_channels, 4096));
  GDR_ASSIGN_OR_RETURN(cfg.fd_reserve, ParseAutoCount("--fd-reserve", fd_reserve, 1u << 20));
  cfg.hello_timeout = absl::Milliseconds(hello_ms);
  cfg.drain_timeout = absl::Milliseconds(drain_ms);
  absl::StatusOr<LogLevel> level = ParseLogLevel(log_level);
  if (!level.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--log-level: ", level.status().message()));
  }
  cfg.log_level = *level;
  GDR_RETURN_IF_ERROR(FinishTargets(upstream, &cfg));
  GDR_ASSIGN_OR_RETURN(cfg.upstream, FinishUpstream(upstream, &cfg.upstream_flags));
  return cfg;
}

}  // namespace gdr::agent
