// The gdrstored child that every gdr_bench group measures: started on loopback with an
// ephemeral port, ready once a Ping answers, stopped with SIGTERM (SIGKILL after 15 s).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace gdrbench {

struct DaemonStart {
  std::string binary;                    // gdrstored to run
  std::vector<std::string> extra_flags;  // appended after the bench's own flags
  uint64_t volume_bytes = 0;             // size of vol0, the only volume
  uint64_t max_op_bytes = 0;             // --max-op-size
  std::chrono::milliseconds ready_timeout{20000};
};

// A gdrstored child process on 127.0.0.1. Its log goes to a file in a private temp directory
// (shown when it fails to come up). The destructor stops it and reaps it. Not thread-safe.
class DaemonProcess {
 public:
  // Spawns the daemon and waits until a Ping answers. UNAVAILABLE (with the log's tail) when it
  // exits during start-up, DEADLINE_EXCEEDED when it does not answer within ready_timeout.
  static absl::StatusOr<std::unique_ptr<DaemonProcess>> Start(const DaemonStart& how);
  ~DaemonProcess();
  DaemonProcess(const DaemonProcess&) = delete;
  DaemonProcess& operator=(const DaemonProcess&) = delete;

  const std::string& address() const { return address_; }  // "127.0.0.1:PORT"
  const std::string& command() const { return command_; }  // the command line it runs
  pid_t pid() const { return pid_; }

 private:
  DaemonProcess() = default;
  absl::Status WaitReady(std::chrono::milliseconds timeout);
  void Stop();
  std::string LogTail() const;

  pid_t pid_ = -1;
  std::string dir_, port_file_, log_file_, address_, command_;
};

}  // namespace gdrbench
