// The parent's side of the scale group's client processes: spawns N copies of this binary in
// client mode, waits until each has connected and pre-faulted its buffer, starts them all with
// one write to a shared start pipe, collects one report line from each, and waits for every
// process it spawned. Whatever goes wrong, it kills only its own children, by PID.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "bench/scale_client.h"

namespace gdrbench {

struct FleetLimits {
  absl::Duration ready = absl::Seconds(120);  // every client connected and pre-faulted
  absl::Duration run = absl::Seconds(600);    // every started client reported
  absl::Duration exit = absl::Seconds(30);    // every client exited after its report
};

class ClientFleet {
 public:
  // Runs one client per entry of `clients` (ScaleClientArgs with their index = position) from
  // the binary `self`, their stderr appended to `log_path`. Returns one report per client, in
  // index order: kDone, or kFailed for a client that failed to start, failed an op, or exited
  // without a word (the message says which). A client that does not get ready, or does not
  // finish, within the limits is killed and the whole run fails with DEADLINE_EXCEEDED.
  static absl::StatusOr<std::vector<ClientReport>> Run(const std::string& self,
                                                       const std::vector<ScaleClientArgs>& clients,
                                                       const std::string& log_path,
                                                       const FleetLimits& limits);
  ~ClientFleet();
  ClientFleet(const ClientFleet&) = delete;
  ClientFleet& operator=(const ClientFleet&) = delete;

 private:
  struct Child {
    pid_t pid = -1;
    bool reaped = false;
    int wait_status = 0;
    bool has_report = false;  // `report` holds its latest line
    ClientReport report;
  };
  ClientFleet() = default;
  absl::Status Spawn(const std::string& self, const std::vector<ScaleClientArgs>& clients,
                     const std::string& log_path);
  // Reads report lines and reaps exited children until `settled` holds for every child or the
  // deadline passes.
  template <typename Pred>
  absl::Status Pump(absl::Time deadline, Pred settled, const char* phase);
  void Drain();
  void ReapExited();
  void KillAll();

  std::vector<Child> children_;
  int start_w_ = -1, report_r_ = -1;
  std::string pending_;  // a partial report line
};

}  // namespace gdrbench
