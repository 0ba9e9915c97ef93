// The agent's side toward its storage daemon: one gdrstore::Client (the transport, TLS and
// token the agent was configured with), the memory clients hand the agent registered with it,
// and their ops forwarded over a few long-lived Stream calls ("lanes") that are replaced when
// they fail, so a daemon restart costs the ops in flight and nothing after them.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/handoff/imported_region.h"
#include "gdrstore/client.h"

namespace gdr::agent {

// One op as the agent forwards it: what to move and where in an upstream Buffer.
struct UpstreamOp {
  gdrstore::OpKind kind = gdrstore::OpKind::kWrite;
  gdrstore::Extent extent;
  const gdrstore::Buffer* buffer = nullptr;  // must outlive the op (until `done` has run)
  size_t offset = 0;                         // into *buffer
  bool crc32c = false;                       // ask the daemon for the bytes' CRC32C
  // time_point::max(): the configured upstream timeout from now.
  std::chrono::system_clock::time_point deadline = std::chrono::system_clock::time_point::max();
};

class Upstream {
 public:
  // Opens the client (tcp: starts its target; rc/dc: opens the device and connects) and
  // `streams` lanes. The client's error naming the daemon otherwise.
  static absl::StatusOr<std::unique_ptr<Upstream>> Connect(const gdrstore::ClientOptions& options,
                                                           uint32_t streams);
  // Closes the lanes (waiting for their ops) and the client. Call only once no op is running.
  ~Upstream();
  Upstream(const Upstream&) = delete;
  Upstream& operator=(const Upstream&) = delete;

  // Registers memory the agent imported with the upstream transport, in place: host memory
  // through RegisterHostMemory (a read-only mapping for puts only), GPU memory through
  // RegisterGpuMemory on its device pointer. The client's error otherwise. Thread-safe.
  absl::StatusOr<std::unique_ptr<gdrstore::Buffer>> Register(
      const handoff::ImportedRegion& region);

  // A lane for a caller that wants its ops to share one upstream Stream (one Stream call's
  // messages); round-robin.
  uint32_t PickLane();
  // Forwards `op` on lane `lane` (its CRC32C and deadline as the op's own options); `done`
  // runs once, on a gRPC or timer thread, possibly inline. Not admitted refusals keep their
  // mark (IsNotAdmitted). Thread-safe; never blocks.
  using Done = std::function<void(absl::StatusOr<gdrstore::OpResult>)>;
  void Submit(const UpstreamOp& op, uint32_t lane, Done done);

  // The daemon's GetInfo for `request` (one page of its volumes), asynchronously, within
  // `deadline`. `done` runs once, on a gRPC thread.
  using InfoDone = std::function<void(absl::StatusOr<gdrstore::v1::GetInfoResponse>)>;
  void GetInfo(const gdrstore::v1::GetInfoRequest& request,
               std::chrono::system_clock::time_point deadline, InfoDone done);
  // Every page of it, joined (every volume the daemon shows the agent), asked for in turn
  // within `deadline` in all. INTERNAL when the daemon's cursor does not move on.
  void GetAllInfo(std::chrono::system_clock::time_point deadline, InfoDone done);

  // "agent -> 127.0.0.1:50051 over tcp (tcp target 127.0.0.1:41234)".
  std::string Path() const;
  const std::string& address() const { return address_; }
  // Registrations live in the client now (each region's until its last op is done).
  uint64_t live_registrations() const { return client_->registration_stats().live; }
  uint64_t lanes_replaced() const { return replaced_.load(); }

 private:
  struct InfoPages;
  Upstream(std::unique_ptr<gdrstore::Client> client, std::string address);
  // GetAllInfo's next page; the last one (or a failure) answers.
  void AskPage(std::shared_ptr<InfoPages> pages);
  std::chrono::system_clock::time_point DeadlineOf(const UpstreamOp& op) const;
  // `retried`: the op was sent again once already after its lane had ended under it.
  void SubmitOnLane(const UpstreamOp& op, uint32_t lane, bool retried, Done done);
  // Replaces lane `lane` if it still runs generation `generation`; the old stream goes to the
  // closer thread.
  void Retire(uint32_t lane, uint64_t generation);
  void CloseRetired();

  struct Lane {
    std::shared_ptr<gdrstore::OpStream> stream;
    uint64_t generation = 0;
  };

  const std::string address_;
  std::unique_ptr<gdrstore::Client> client_;
  std::atomic<uint32_t> next_lane_{0};
  std::atomic<uint64_t> replaced_{0};
  absl::Mutex mu_;
  std::vector<Lane> lanes_ ABSL_GUARDED_BY(mu_);
  // Retired streams, closed (which may wait for their ops) off the gRPC threads.
  std::deque<std::shared_ptr<gdrstore::OpStream>> retired_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread closer_;
};

}  // namespace gdr::agent
