// Harness of the integration suite: starts the real gdrstored binary as a child process
// (child_process.h), learns the daemon's ephemeral port from --port-file, waits for it on the
// gRPC health check, and ends only the processes it started, by PID. Also reads /proc figures
// (open fds, VmRSS) that the leak tests compare against a baseline.
#pragma once

#include <grpcpp/security/credentials.h>
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "gdrstore/client.h"
#include "tests/integration/child_process.h"

namespace grpc {
class ChannelCredentials;
}

namespace gdr::integ {

// grpc.health.v1.Health/Check for the server-wide service (""), hand-serialized. Returns true
// for SERVING, false for any other serving status; the RPC's status when the call fails.
// `credentials` null: plaintext.
absl::StatusOr<bool> HealthCheck(const std::string& address, absl::Duration timeout,
                                 std::shared_ptr<grpc::ChannelCredentials> credentials = nullptr);

// Open file descriptors of `pid` (entries of /proc/PID/fd).
absl::StatusOr<int> CountOpenFds(pid_t pid);
// "fd -> target" lines of /proc/PID/fd, for failure messages.
std::string DescribeOpenFds(pid_t pid);
// VmRSS of `pid` in bytes, from /proc/PID/status.
absl::StatusOr<uint64_t> ResidentBytes(pid_t pid);

// How DaemonProcess::Start launches the daemon and decides it is ready.
struct DaemonStart {
  std::string listen = "127.0.0.1:0";  // the health check still goes to 127.0.0.1:PORT
  // Credentials of the readiness health check (a TLS daemon); null: plaintext.
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  // False: the port file alone means ready (a daemon no client of the test can handshake with).
  bool health_check = true;
  absl::Duration ready_timeout = absl::Seconds(30);
};

// A running gdrstored on 127.0.0.1 with an ephemeral port.
class DaemonProcess {
 public:
  static absl::StatusOr<std::unique_ptr<DaemonProcess>> Start(const std::vector<std::string>& args,
                                                              const DaemonStart& how);
  // Spawns GDR_GDRSTORED_BIN with `--listen 127.0.0.1:0 --port-file F` plus `args`, waits for the
  // port file and then for the health check to report SERVING, all within `ready_timeout`.
  // When the daemon dies or never gets ready the error carries its stderr.
  static absl::StatusOr<std::unique_ptr<DaemonProcess>> Start(
      const std::vector<std::string>& args, absl::Duration ready_timeout = absl::Seconds(30));
  // SIGTERM if still running, so the daemon stops the way it does in service and a sanitized
  // build checks it for leaks at exit; SIGKILL if it has not exited after its drain timeout.
  ~DaemonProcess();

  pid_t pid() const { return child_->pid(); }
  uint16_t port() const { return port_; }
  std::string address() const;  // "127.0.0.1:PORT"
  bool Running() { return child_->Running(); }
  // SIGTERM, then waits up to `timeout`; the raw wait status.
  absl::StatusOr<int> Terminate(absl::Duration timeout);
  absl::Status Signal(int sig) { return child_->Signal(sig); }
  // SIGSTOP, then waits until the kernel reports every thread stopped: delivery is
  // asynchronous, and an op sent right after kill() could still be served. A hung daemon.
  absl::Status Stop();
  absl::StatusOr<int> Wait(absl::Duration timeout) { return child_->Wait(timeout); }
  std::string Stderr() const;  // what the daemon logged so far
  const std::string& dir() const { return dir_->path(); }

 private:
  DaemonProcess() = default;
  std::unique_ptr<TempDir> dir_;
  std::unique_ptr<ChildProcess> child_;
  uint16_t port_ = 0;
};

// A client of `d` on the default transport (tcp), with `token` and CRC32C checks when given;
// nullptr (and a test failure naming why) when it cannot connect.
std::unique_ptr<gdrstore::Client> ConnectClient(const DaemonProcess& d,
                                                const std::string& token = "",
                                                bool crc32c = false);
// The same with `options` (daemon_address set to d's).
std::unique_ptr<gdrstore::Client> ConnectClient(const DaemonProcess& d,
                                                gdrstore::ClientOptions options);

}  // namespace gdr::integ
