// The tcp transport's target: runs inside the client process, owns the registered regions and
// serves the daemon's one-sided requests against them. Every request is checked (rkey, bounds)
// before any byte of client memory is touched; a refused write's payload is drained, not stored.
// Each connection first proves to the daemon that this target holds the secret the client puts
// in its endpoints (common/wire/tcp_proof.h), so the daemon knows it reached the caller's target.
#pragma once

#include <atomic>
#include <functional>
#include <cstdint>
#include <list>
#include <memory>
#include <random>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "client/src/transport/region.h"
#include "client/src/transport/tcp/staging_pool.h"
#include "common/cuda/gpu.h"
#include "common/cuda/staging_pipe.h"
#include "common/base/socket.h"
#include "common/wire/tcp_frame.h"
#include "gdrstore/types.h"

namespace gdr {

struct TcpTargetStats {
  uint64_t refused = 0;     // requests answered with an error status
  uint64_t bad_frames = 0;  // connections dropped for a malformed frame or a failed opening
  uint32_t connections = 0;
  uint64_t accepted = 0;    // connections accepted since start
  cuda::StagingStats gpu;  // staging copies into / out of GPU regions, all links
};

// Pinned staging ring of each daemon link that touches GPU memory (per link and GPU).
struct GpuStagingOptions {
  size_t slot_bytes = gdrstore::kGpuStagingSlotBytes;
  int slots = 4;
  // Pipes made for a GPU when memory on it is first registered (the daemon's default
  // --tcp-max-links-per-target); links past them make their own.
  size_t prewarm = 16;
};

class TcpTarget {
 public:
  // Listens on bind_host:port (0 = ephemeral), makes a fresh random secret and starts the
  // accept thread. INTERNAL when no random secret can be made.
  static absl::StatusOr<std::shared_ptr<TcpTarget>> Start(const std::string& bind_host,
                                                           uint16_t port,
                                                           uint32_t max_connections,
                                                           GpuStagingOptions staging = {});
  ~TcpTarget();  // Stop()

  // Closes the listener and every connection, joins all threads. Idempotent.
  void Stop();

  // Registers `region` under a fresh random nonzero rkey (written into region->rkey). The
  // first GPU region of a GPU makes that GPU's staging pipes here (logged when it cannot).
  void Register(const std::shared_ptr<Region>& region);
  void Deregister(uint32_t rkey);

  uint16_t port() const { return port_; }
  // What goes into TcpEndpoint.secret. Never logged.
  const std::string& secret() const { return secret_; }
  TcpTargetStats stats() const;

 private:
  struct Connection {
    ScopedFd fd;
    std::thread thread;
    std::atomic<bool> finished{false};
    std::atomic<bool> proven{false};  // answered the daemon's challenge
    bool dropped = false;              // shut down to make room (under mu_): its slot is free
  };
  TcpTarget() = default;
  void AcceptLoop();
  void Serve(Connection* conn);
  std::shared_ptr<Region> Lookup(uint32_t rkey) const;
  tcpwire::TargetStatus Check(const Region* region, const tcpwire::Header& h) const;
  void ReapFinishedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Connections still in their challenge at once: past this, or when every slot is taken, the
  // oldest of them is dropped for the newcomer, so that anyone who reaches the port cannot hold
  // the slots with idle sockets (a daemon's link answers within milliseconds; idle ones age).
  // Room for the links that several daemons open at once for one bulk op (up to
  // --tcp-max-links-per-target, 16 by default, each), so none of theirs is dropped.
  static constexpr size_t kMaxUnproven = 64;
  // A daemon link that has not sent its CHALLENGE by then is dropped.
  static constexpr absl::Duration kChallengeTimeout = absl::Seconds(10);

  ScopedFd listen_fd_;
  uint16_t port_ = 0;
  std::string secret_;
  uint32_t max_connections_ = 0;
  GpuStagingOptions staging_;
  std::unique_ptr<StagingPool<cuda::StagingPipe>> pipes_;
  std::thread acceptor_;

  mutable absl::Mutex regions_mu_;
  absl::flat_hash_map<uint32_t, std::shared_ptr<Region>> regions_ ABSL_GUARDED_BY(regions_mu_);
  std::mt19937_64 rng_ ABSL_GUARDED_BY(regions_mu_);

  mutable absl::Mutex mu_;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  std::list<std::unique_ptr<Connection>> connections_ ABSL_GUARDED_BY(mu_);
  std::atomic<uint64_t> refused_{0};
  std::atomic<uint64_t> bad_frames_{0};
  std::atomic<uint64_t> accepted_{0};
  std::atomic<uint64_t> gpu_to_device_{0}, gpu_from_device_{0}, gpu_copy_ns_{0}, gpu_wait_ns_{0};
};

}  // namespace gdr
