// gdrstored's settings: flags, an optional config file (same keys as the long flags, TOML/INI
// `key = value`), and the checks that turn them into the structures the daemon runs on.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/base/log.h"
#include "daemon/ops/cluster_flags.h"
#include "daemon/ops/fault_flags.h"
#include "daemon/ops/tls_flags.h"
#include "daemon/service/store_service.h"
#include "daemon/store/store.h"
#include "daemon/transport/dc/dc_options.h"
#include "daemon/transport/local/local_options.h"
#include "daemon/transport/rc/rc_options.h"
#include "daemon/store/volume_dir.h"
#include "daemon/transport/tcp/tcp_options.h"
#include "daemon/verbs_core/verbs_core_options.h"

namespace gdr {

struct DaemonConfig {
  std::string listen = "127.0.0.1:50051";
  std::string port_file;  // when set, the bound port is written here once serving
  // Prometheus /metrics over HTTP on this IP:PORT (0: any free port); empty: off.
  std::string metrics_listen;
  std::string metrics_port_file;  // when set, the bound metrics port is written here
  std::vector<VolumeSpec> volumes;  // --volume, then the files of every --volume-dir
  std::vector<VolumeDir> volume_dirs;
  // Volumes at once, made at start and at run time (Admin CreateVolume).
  uint32_t max_volumes = 4096;
  ServiceLimits limits;
  TcpInitiatorOptions tcp;
  // rc: kAuto opens any RDMA device and runs without rc when there is none; kOn (implied by
  // --rdma-device / --rdma-addr) makes a missing device fatal; kOff never opens one.
  enum class RcMode { kAuto, kOn, kOff };
  RcMode rc_mode = RcMode::kAuto;
  RcInitiatorOptions rc;
  // dc: auto offers it where the device is mlx5 and can do DC; it runs with or without rc.
  dc::DcTransportConfig dc;
  // local: on when local.socket_path is set (--local-socket); off otherwise.
  LocalOptions local;
  // The RDMA devices (rails) rc spans and the first of which dc runs on, and their pollers.
  VerbsCoreOptions verbs;
  absl::Duration drain_timeout = absl::Seconds(10);
  LogLevel log_level = LogLevel::kInfo;
  // Credentials callers must present and their volume grants, read from token_file (re-read
  // on SIGHUP; common/wire/token_file.h); none: open.
  std::string token_file;
  std::vector<Credential> tokens;
  // TLS/mTLS on the gRPC port (files re-read on change and on SIGHUP), and --insecure.
  TlsSettings tls;
  // Membership of a cluster kept in etcd (--cluster).
  ClusterSettings cluster;
  // Fault rules of the configuration (--fault) and the seed (--fault-seed).
  FaultSettings faults;
  // --trace: every answered op recorded to this file (reopened on SIGHUP), up to
  // trace_max_bytes per file; empty: no trace.
  std::string trace;
  uint64_t trace_max_bytes = uint64_t{256} << 20;

  // Whether the RDMA device is opened at all (rc or dc may run), and whether failing to open
  // it is fatal (a transport that needs it is on, or a device was named).
  bool WantsRdmaDevice() const {
    return rc_mode != RcMode::kOff || dc.mode != dc::DcTransportConfig::Mode::kOff;
  }
  bool NeedsRdmaDevice() const {
    return rc_mode == RcMode::kOn || dc.mode == dc::DcTransportConfig::Mode::kOn ||
           verbs.NamesDevice();
  }
};

// Parses argv (and the file named by --config). On --help returns a status of code
// kCancelled whose message is the help text; on bad input INVALID_ARGUMENT naming the flag.
absl::StatusOr<DaemonConfig> ParseDaemonConfig(int argc, char** argv);

}  // namespace gdr
