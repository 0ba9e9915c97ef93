#include "daemon/ops/daemon_config.h"

#include <CLI/CLI.hpp>

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/log.h"
#include "common/base/status_macros.h"
#include "common/wire/token_file.h"
#include "common/base/units.h"
#include "common/process/service_flags.h"
#include "daemon/ops/dc_flags.h"
#include "daemon/ops/local_flags.h"
#include "daemon/observe/metrics_exporter.h"
#include "daemon/ops/tls_flags.h"

namespace gdr {
namespace {

absl::StatusOr<uint64_t> SizeFlag(const std::string& flag, const std::string& text) {
  absl::StatusOr<uint64_t> v = ParseSize(text);
  if (!v.ok()) return absl::InvalidArgumentError(absl::StrCat("--", flag, ": ", v.status().message()));
  return v;
}

// The rails named by --rdma-device (CLI11 has split the comma lists and dropped empty items) into
// `verbs`: trimmed, in order, each once; none named leaves the one automatic rail.
absl::Status SetRails(const std::vector<std::string>& named, VerbsCoreOptions* verbs) {
  std::vector<std::string> rails;
  for (const std::string& raw : named) {
    const std::string name(absl::StripAsciiWhitespace(raw));
    if (name.empty()) {
      return absl::InvalidArgumentError("--rdma-device: an empty device name in the list");
    }
    if (std::find(rails.begin(), rails.end(), name) != rails.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--rdma-device: device '", name, "' is named twice (each device is one rail)"));
    }
    rails.push_back(name);
  }
  if (rails.size() > 1 && !verbs->device.address.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--rdma-addr picks one device, and --rdma-device names ", rails.size(), " rails (",
        absl::StrJoin(rails, ","), "); name the rails by device only"));
  }
  verbs->rails = rails.empty() ? std::vector<std::string>{""} : std::move(rails);
  return absl::OkStatus();
}

// --tcp-max-links-per-target: checked against the pool when given, else derived from it.
absl::Status SetMaxLinksPerTarget(bool given, TcpInitiatorOptions* tcp) {
  if (!given) {
    tcp->max_links_per_target = std::max(
        tcp->links_per_target,
        std::min(TcpInitiatorOptions{}.max_links_per_target, tcp->max_links));
    return absl::OkStatus();
  }
  if (tcp->max_links_per_target < tcp->links_per_target) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--tcp-max-links-per-target (", tcp->max_links_per_target,
        ") must be >= --tcp-links-per-target (", tcp->links_per_target, ")"));
  }
  if (tcp->max_links_per_target > tcp->max_links) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tcp-max-links-per-target (", tcp->max_links_per_target,
                     ") must be <= --tcp-max-links (", tcp->max_links, ")"));
  }
  return absl::OkStatus();
}

// Each --volume-dir's files join the volumes (names unique across all of them); at most one
// directory is writable, since volumes made at run time need one place for their files.
absl::Status AddVolumeDirs(const std::vector<std::string>& texts, DaemonConfig* cfg) {
  for (const std::string& text : texts) {
    absl::StatusOr<VolumeDir> dir = ParseVolumeDir(text);
    if (!dir.ok()) return dir.status();
    for (const VolumeDir& seen : cfg->volume_dirs) {
      if (seen.writable && dir->writable) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--volume-dir: ", seen.path, " and ", dir->path, " are both writable; one may be"));
      }
    }
    if (absl::Status s = OpenVolumeDir(&*dir); !s.ok()) {
      return absl::InvalidArgumentError(s.message());
    }
    std::vector<std::string> skipped;
    absl::StatusOr<std::vector<VolumeSpec>> specs =
        ScanVolumeDir(*dir, cfg->max_volumes, &skipped);
    if (!specs.ok()) return absl::InvalidArgumentError(specs.status().message());
    for (const std::string& why : skipped) {
      GDR_LOG(kWarning) << "--volume-dir " << dir->path << ": skipped " << why;
    }
    for (VolumeSpec& spec : *specs) {
      for (const VolumeSpec& seen : cfg->volumes) {
        if (seen.name == spec.name) {
          return absl::InvalidArgumentError(absl::StrCat(
              "--volume-dir ", dir->path, ": volume '", spec.name, "' is named twice (",
              seen.file.empty() ? "by --volume" : seen.file, " and ", spec.file, ")"));
        }
      }
      cfg->volumes.push_back(std::move(spec));
    }
    cfg->volume_dirs.push_back(*std::move(dir));
  }
  if (cfg->volumes.size() > cfg->max_volumes) {
    return absl::InvalidArgumentError(absl::StrCat(cfg->volumes.size(), " volumes are more than "
                                                   "--max-volumes ", cfg->max_volumes));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<DaemonConfig> ParseDaemonConfig(int argc, char** argv) {
  DaemonConfig cfg;
  CLI::App app{"gdrstored: serves one-sided RDMA transfers between a simulated store and "
               "clients' (GPU) memory over gRPC"};
  app.set_config("--config", "", "config file (TOML/INI: key = value, keys as the long flags)");
  std::vector<std::string> volumes, volume_dirs;
  std::string max_op = "256MiB", chunk = "1MiB", max_bytes = "4GiB", log_level = "info";
  std::string tcp_inline = "16KiB";
  int64_t connect_ms = 3000, op_timeout_ms = 30000, idle_s = 60, drain_ms = 10000;
  int64_t turn_ms = 200, handover_ms = 2000, tcp_spin_us = 0;
  app.add_option("--listen", cfg.listen, "gRPC listen address HOST:PORT (port 0 = ephemeral)")
      ->capture_default_str();
  app.add_option("--port-file", cfg.port_file, "write the bound gRPC port to this file once serving");
  app.add_option("--metrics-listen", cfg.metrics_listen,
                 "serve Prometheus metrics at http://ADDR/metrics, ADDR = IPV4:PORT or "
                 "[IPV6]:PORT (port 0 = any free port); default: off");
  app.add_option("--metrics-port-file", cfg.metrics_port_file,
                 "write the bound metrics port to this file once serving");
  app.add_option("--volume", volumes, "volume NAME=SIZE[,file=/abs/path][,media=PRESET]"
                 "[,latency_us=N][,p99_us=N][,bandwidth=SIZE/s][,read_bandwidth=SIZE/s]"
                 "[,write_bandwidth=SIZE/s][,iops=N][,read_iops=N][,write_iops=N]"
                 "[,queue_depth=N][,seed=N], repeatable (default vol0=256MiB; presets "
                 "nvme-gen4, nvme-gen5, sata-ssd, hdd, object-store; docs/simulation.md)");
  app.add_option("--volume-dir", volume_dirs,
                 "serve every file under DIR as a volume named by its relative path: "
                 "DIR[,writable][,media options as in --volume]; read-only unless writable, "
                 "and a writable one holds the files of volumes made at run time; repeatable");
  app.add_option("--max-volumes", cfg.max_volumes,
                 "volumes at once, from the flags, the directories and Admin CreateVolume")
      ->capture_default_str()
      ->check(CLI::Range(1u, 1u << 20));
  app.add_option("--max-op-size", max_op, "largest extent of one op")->capture_default_str();
  app.add_option("--chunk-size", chunk, "transfers are split into chunks of this size")
      ->capture_default_str();
  app.add_option("--max-inflight-per-stream", cfg.limits.max_inflight_per_stream,
                 "ops in flight on one Stream call")->capture_default_str()->check(CLI::Range(1u, 1u << 20));
  app.add_option("--max-inflight-ops", cfg.limits.max_inflight_ops, "ops in flight, daemon-wide")
      ->capture_default_str()->check(CLI::Range(1u, 1u << 24));
  app.add_option("--max-inflight-bytes", max_bytes, "bytes in flight, daemon-wide")
      ->capture_default_str();
  app.add_option("--tcp-max-links", cfg.tcp.max_links, "tcp initiator pool size (all clients)")
      ->capture_default_str()->check(CLI::Range(1u, 4096u));
  app.add_option("--tcp-links-per-target", cfg.tcp.links_per_target,
                 "tcp links one client target keeps however many others there are (its share)")
      ->capture_default_str()->check(CLI::Range(1u, 64u));
  CLI::Option* max_per_target =
      app.add_option("--tcp-max-links-per-target", cfg.tcp.max_links_per_target,
                     "tcp links one client target may have while the pool has room; those "
                     "past its share go back first when other clients need links (default: "
                     "16, or --tcp-max-links if smaller, never below --tcp-links-per-target)")
          ->check(CLI::Range(1u, 4096u));
  app.add_option("--tcp-connect-timeout-ms", connect_ms, "connect timeout to a client target")
      ->capture_default_str()->check(CLI::Range(int64_t{1}, int64_t{600000}));
  app.add_option("--op-timeout-ms", op_timeout_ms,
                 "a link with work but no answer for this long fails its ops")
      ->capture_default_str()->check(CLI::Range(int64_t{1}, int64_t{3600000}));
  app.add_option("--tcp-idle-timeout-s", idle_s, "idle tcp links are closed after this")
      ->capture_default_str()->check(CLI::Range(int64_t{1}, int64_t{86400}));
  app.add_option("--tcp-link-turn-ms", turn_ms,
                 "with more clients than --tcp-max-links, a link serves one client at least "
                 "this long before it is handed to a waiting one")
      ->capture_default_str()->check(CLI::Range(int64_t{1}, int64_t{60000}));
  app.add_option("--tcp-handover-timeout-ms", handover_ms,
                 "a link whose turn ended and whose client has not finished its ops by then "
                 "has those ops failed (UNAVAILABLE), so the waiting client gets the link")
      ->capture_default_str()->check(CLI::Range(int64_t{1}, int64_t{3600000}));
  app.add_option("--tcp-poll-spin-us", tcp_spin_us,
                 "a link waiting for answers polls its socket this long before sleeping "
                 "(lower small-op latency for a core spinning; 0 = off)")
      ->capture_default_str()->check(CLI::Range(int64_t{0}, int64_t{10000}));
  app.add_option("--tcp-inline-max", tcp_inline,
                 "a tcp Write of at most this size, to a client that takes answers inline, "
                 "gets its bytes in the answer instead of over a link (0 = never; at most 64KiB)")
      ->capture_default_str();
  std::vector<std::string> target_allow;
  app.add_option("--tcp-target-allow", target_allow,
                 "CIDR a request's tcp target may be in besides the caller's own address, "
                 "repeatable (e.g. 10.0.0.0/8)");
  app.add_option("--drain-timeout-ms", drain_ms,
                 "on SIGTERM, wait this long for in-flight RPCs before cancelling them")
      ->capture_default_str()->check(CLI::Range(int64_t{0}, int64_t{600000}));
  std::string rc_mode = "auto", poll_mode = "adaptive";
  int64_t reset_timeout_ms = 10000, spin_us = 50;
  uint32_t sq_depth = cfg.rc.qp.sq_depth, rd_atomic = cfg.rc.qp.max_rd_atomic;
  uint32_t rc_traffic_class = cfg.rc.qp.traffic_class, rc_sl = cfg.rc.qp.service_level;
  app.add_option("--rc", rc_mode,
                 "rc transport: auto (use an RDMA device if there is one), on (fail without one), off")
      ->capture_default_str();
  std::vector<std::string> rails;
  app.add_option("--rdma-device", rails,
                 "RDMA device by name (e.g. rxe0, mlx5_0); repeatable or comma-separated "
                 "(rxe0,rxe1): each device is one rail, in this order")
      ->delimiter(',');
  app.add_option("--rdma-addr", cfg.verbs.device.address,
                 "RDMA device by local IP address (resolved to device, port and RoCE v2 GID)");
  app.add_option("--rdma-port", cfg.verbs.device.port, "device port (0: first ACTIVE)")
      ->capture_default_str()->check(CLI::Range(0, 255));
  app.add_option("--rdma-gid-index", cfg.verbs.device.gid_index,
                 "GID index (-1: RoCE v2 IPv4-mapped entry, found in sysfs)")
      ->capture_default_str()->check(CLI::Range(-1, 65535));
  app.add_option("--rdma-poll-mode", poll_mode, "completion polling: busy, event, adaptive")
      ->capture_default_str();
  app.add_option("--rdma-poll-spin-us", spin_us, "adaptive: poll this long before sleeping")
      ->capture_default_str()->check(CLI::Range(int64_t{0}, int64_t{1000000}));
  app.add_option("--rdma-cq-depth", cfg.verbs.poller.cq_depth, "completion queue entries")
      ->capture_default_str()->check(CLI::Range(16u, 1u << 22));
  app.add_option("--rc-max-qps", cfg.rc.max_qps, "RC QPs per rail, all clients")
      ->capture_default_str()->check(CLI::Range(1u, 65536u));
  app.add_option("--rc-max-qps-per-client", cfg.rc.max_qps_per_client,
                 "RC QPs of one client connection")->capture_default_str()->check(CLI::Range(1u, 64u));
  app.add_option("--rc-sq-depth", sq_depth, "send queue depth of each RC QP")
      ->capture_default_str()->check(CLI::Range(1u, 16384u));
  app.add_option("--rc-max-rd-atomic", rd_atomic, "RDMA READs in flight per RC QP")
      ->capture_default_str()->check(CLI::Range(1u, 255u));
  app.add_option("--rc-traffic-class", rc_traffic_class,
                 "GRH traffic class of RC QPs (DSCP << 2 | ECN); clients answer with it too")
      ->capture_default_str()->check(CLI::Range(0u, 255u));
  app.add_option("--rc-service-level", rc_sl, "service level of RC QPs; clients answer with it too")
      ->capture_default_str()->check(CLI::Range(0u, 15u));
  app.add_option("--rc-reset-timeout-ms", reset_timeout_ms,
                 "a client that does not reconnect a reset QP within this loses its connection")
      ->capture_default_str()->check(CLI::Range(int64_t{1}, int64_t{600000}));
  DcFlagValues dc_flags;
  AddDcFlags(app, &dc_flags);
  LocalFlagValues local_flags;
  AddLocalFlags(app, &local_flags);
  app.add_option("--log-level", log_level, "debug, info, warning, error")->capture_default_str();
  app.add_option("--token-file", cfg.token_file,
                 "callers must send 'authorization: Bearer <token>' with a token of this file, or "
                 "a client certificate a san: line names; each line grants volumes: "
                 "'<token>|san:<SAN> [name=L] [get=V1,V2|*] [put=...]', a bare token may do "
                 "all (re-read on SIGHUP and when the file changes). Default: no token needed");
  std::string trace_max = "256MiB";
  app.add_option("--trace", cfg.trace,
                 "record every op (time, client, get/put, volume, offset, length, status, "
                 "latency) to this file (binary; read by gdrctl trace show / replay); SIGHUP "
                 "starts it afresh at the same path (rotate it first)");
  app.add_option("--trace-max-bytes", trace_max,
                 "a trace file stops recording at this size; later ops are counted as dropped "
                 "(GetStats trace)")
      ->capture_default_str();
  AddTlsFlags(app, &cfg.tls);
  AddClusterFlags(app, &cfg.cluster);
  AddFaultFlags(app, &cfg.faults);
  GDR_RETURN_IF_ERROR(ParseServiceFlags(app, argc, argv));
  if (volumes.empty() && volume_dirs.empty()) volumes.push_back("vol0=256MiB");
  for (const std::string& v : volumes) {
    absl::StatusOr<VolumeSpec> spec = ParseVolumeSpec(v);
    // The line itself is named: a reload's refusal must say which of several it was.
    if (!spec.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--volume '", absl::CHexEscape(v),
                                                     "': ", spec.status().message()));
    }
    // Refused here, not only by Store::Create, so that a reload refuses it too.
    for (const VolumeSpec& seen : cfg.volumes) {
      if (seen.name == spec->name) {
        return absl::InvalidArgumentError(
            absl::StrCat("--volume: volume '", spec->name, "' given twice"));
      }
    }
    cfg.volumes.push_back(*spec);
  }
  GDR_RETURN_IF_ERROR(AddVolumeDirs(volume_dirs, &cfg));
  GDR_ASSIGN_OR_RETURN(cfg.limits.max_op_bytes, SizeFlag("max-op-size", max_op));
  GDR_ASSIGN_OR_RETURN(cfg.tcp.chunk_bytes, SizeFlag("chunk-size", chunk));
  GDR_ASSIGN_OR_RETURN(cfg.limits.max_inflight_bytes, SizeFlag("max-inflight-bytes", max_bytes));
  GDR_ASSIGN_OR_RETURN(cfg.trace_max_bytes, SizeFlag("trace-max-bytes", trace_max));
  if (cfg.trace_max_bytes < 4096) {
    return absl::InvalidArgumentError(
        absl::StrCat("--trace-max-bytes must be at least 4KiB, not ", trace_max));
  }
  if (cfg.limits.max_op_bytes == 0) return absl::InvalidArgumentError("--max-op-size must be > 0");
  if (cfg.limits.max_inflight_bytes == 0) {
    return absl::InvalidArgumentError("--max-inflight-bytes must be > 0");
  }
  if (cfg.tcp.chunk_bytes < 4096 || cfg.tcp.chunk_bytes > (64u << 20)) {
    return absl::InvalidArgumentError("--chunk-size must be between 4KiB and 64MiB");
  }
  cfg.limits.chunk_bytes = cfg.tcp.chunk_bytes;
  GDR_ASSIGN_OR_RETURN(const uint64_t inline_max, SizeFlag("tcp-inline-max", tcp_inline));
  if (inline_max > TcpInitiatorOptions::kMaxInline) {
    return absl::InvalidArgumentError(absl::StrCat("--tcp-inline-max must be at most 64KiB, not ",
                                                   tcp_inline));
  }
  cfg.tcp.inline_max = static_cast<uint32_t>(inline_max);
  cfg.limits.max_links = cfg.tcp.max_links;
  GDR_RETURN_IF_ERROR(SetMaxLinksPerTarget(max_per_target->count() != 0, &cfg.tcp));
  cfg.tcp.link.connect_timeout = absl::Milliseconds(connect_ms);
  cfg.tcp.op_timeout = absl::Milliseconds(op_timeout_ms);
  cfg.tcp.idle_timeout = absl::Seconds(idle_s);
  cfg.tcp.turn = absl::Milliseconds(turn_ms);
  cfg.tcp.link.poll_spin = absl::Microseconds(tcp_spin_us);
  cfg.tcp.handover_timeout = absl::Milliseconds(handover_ms);
  for (const std::string& text : target_allow) {
    absl::StatusOr<Cidr> cidr = Cidr::Parse(text);
    if (!cidr.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--tcp-target-allow: ", cidr.status().message()));
    }
    cfg.tcp.target_allow.push_back(*cidr);
  }
  cfg.drain_timeout = absl::Milliseconds(drain_ms);
  if (rc_mode == "auto") {
    cfg.rc_mode = DaemonConfig::RcMode::kAuto;
  } else if (rc_mode == "on") {
    cfg.rc_mode = DaemonConfig::RcMode::kOn;
  } else if (rc_mode == "off") {
    cfg.rc_mode = DaemonConfig::RcMode::kOff;
  } else {
    return absl::InvalidArgumentError(absl::StrCat("--rc must be auto, on or off, not '", rc_mode, "'"));
  }
  GDR_ASSIGN_OR_RETURN(cfg.dc, FinishDcFlags(dc_flags));
  GDR_ASSIGN_OR_RETURN(cfg.local, FinishLocalFlags(app, local_flags));
  GDR_RETURN_IF_ERROR(SetRails(rails, &cfg.verbs));
  if (cfg.verbs.NamesDevice()) {
    if (cfg.rc_mode == DaemonConfig::RcMode::kOff &&
        cfg.dc.mode == dc::DcTransportConfig::Mode::kOff) {
      return absl::InvalidArgumentError(
          "--rdma-device/--rdma-addr name a device for rc or dc, and both are off");
    }
    if (cfg.rc_mode == DaemonConfig::RcMode::kAuto) cfg.rc_mode = DaemonConfig::RcMode::kOn;
  }
  absl::StatusOr<verbs::PollMode> pm = verbs::ParsePollMode(poll_mode);
  if (!pm.ok()) return absl::InvalidArgumentError(absl::StrCat("--rdma-poll-mode: ", pm.status().message()));
  cfg.verbs.poller.mode = *pm;
  cfg.verbs.poller.spin = absl::Microseconds(spin_us);
  cfg.rc.qp.sq_depth = sq_depth;
  cfg.rc.qp.max_rd_atomic = static_cast<uint8_t>(rd_atomic);
  cfg.rc.qp.traffic_class = static_cast<uint8_t>(rc_traffic_class);
  cfg.rc.qp.service_level = static_cast<uint8_t>(rc_sl);
  cfg.rc.chunk_bytes = cfg.tcp.chunk_bytes;
  cfg.rc.reset_timeout = absl::Milliseconds(reset_timeout_ms);
  absl::StatusOr<LogLevel> level = ParseLogLevel(log_level);
  if (!level.ok()) return absl::InvalidArgumentError(absl::StrCat("--log-level: ", level.status().message()));
  cfg.log_level = *level;
  if (!cfg.token_file.empty()) {
    absl::StatusOr<std::vector<Credential>> tokens = ReadTokenFile(cfg.token_file);
    if (!tokens.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--token-file: ", tokens.status().message()));
    }
    cfg.tokens = *std::move(tokens);
  }
  if (!cfg.metrics_listen.empty()) GDR_RETURN_IF_ERROR(CheckMetricsListen(cfg.metrics_listen));
  if (!cfg.metrics_port_file.empty() && cfg.metrics_listen.empty()) {
    return absl::InvalidArgumentError("--metrics-port-file needs --metrics-listen");
  }
  GDR_RETURN_IF_ERROR(CheckTlsFlags(cfg.tls));
  GDR_RETURN_IF_ERROR(CheckClusterFlags(cfg.cluster));
  GDR_RETURN_IF_ERROR(CheckFaultFlags(&cfg.faults));
  GDR_RETURN_IF_ERROR(CheckListenExposure(cfg.listen, cfg.tls, !cfg.token_file.empty()));
  return cfg;
}

}  // namespace gdr
