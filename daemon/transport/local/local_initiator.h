// The local transport: clients on the daemon's own host hand their memory over on a Unix socket
// (common/handoff: a memfd, a CUDA IPC handle, a VMM allocation's descriptor) and the daemon
// moves each op's bytes itself, on a small pool of copy threads: memcpy for host memory, CUDA
// copies for GPU memory, straight from store pages page-locked in pieces on background threads
// (page_locker.h) and through pinned bounce buffers before (a host without a driver never loads
// CUDA). Ops name a region by the session's number and key, the rkey the socket assigned and the
// client's own address.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <deque>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/base/fd_passing.h"
#include "common/handoff/handoff_server.h"
#include "daemon/store/store.h"
#include "daemon/transport/initiator.h"
#include "daemon/transport/local/copy_lanes.h"
#include "daemon/transport/local/gpu_copy.h"
#include "daemon/transport/local/local_destination.h"
#include "daemon/transport/local/local_options.h"

namespace gdr {

// Whether a peer on the local socket may open a session: root, the daemon's own uid (`self`),
// and whom `options` admits. PERMISSION_DENIED naming the peer's uid, gid and pid and what is
// admitted otherwise.
absl::Status AdmitLocalPeer(const LocalOptions& options, uid_t self, const PeerCredentials& peer);

// The socket mode options.socket_mode gives: itself when set, else 0600 when only root and the
// daemon's uid are admitted and 0666 when others are (their credentials decide).
mode_t LocalSocketMode(const LocalOptions& options);

class LocalInitiator final : public Initiator {
 public:
  // Starts the handoff server on options.socket_path (its error, naming the path, otherwise),
  // the copy threads and the page-locking threads (with options.lock_at_start, and a GPU on
  // the host, they lock the volumes served now in the background). `store` must outlive the
  // initiator: its volumes are what GPU copies page-lock. `server_name` is what HELLO_OK tells
  // clients ("gdrstored 1.4.0"). INVALID_ARGUMENT for an option out of range. `lock` locks a
  // piece of a volume (CudaPieceLock() unless a test gives another).
  static absl::StatusOr<std::unique_ptr<LocalInitiator>> Create(LocalOptions options,
                                                                const Store* store,
                                                                std::string server_name,
                                                                PieceLockFn lock = {});
  ~LocalInitiator() override;

  TransportKind kind() const override { return TransportKind::kLocal; }
  // buffer.local, as ParseLocalDestination reads it.
  absl::StatusOr<std::shared_ptr<const Destination>> ParseDestination(
      const gdrstore::v1::RemoteBuffer& buffer) const override {
    return ParseLocalDestination(buffer);
  }
  // Resolves the op's region (HandoffServer::Resolve: PERMISSION_DENIED for an unknown session
  // or a wrong key, INVALID_ARGUMENT for an unknown rkey or a range outside the region or a get
  // into a read-only region) and queues its copy; the region stays mapped until `done` has run,
  // even if its client goes away meanwhile. CANCELLED after Shutdown. `done` gets OK or the
  // copy's failure: DATA_LOSS when the store file shrank under it, FAILED_PRECONDITION when
  // the client's memfd did, the CUDA error for GPU memory, CANCELLED at shutdown. An injected
  // path fault (op.inject) does not apply: no fault kind reaches a local op
  // (common/wire/fault_spec.h); the local path's one break, a client whose socket closes, is
  // that client's own doing. Thread-safe; never copies on the calling thread.
  absl::Status Submit(const TransferOp& op, OpDone done) override;
  void SubmitBatch(std::span<Submission> batch) override;
  // UNAVAILABLE naming the copy thread that has been inside one copy for longer than
  // `max_stall`.
  absl::Status CheckHealth(absl::Duration max_stall) const override;
  void Shutdown() override;
  // in_use: copy threads copying now; capacity: copy threads; clients: sessions open; errors:
  // copies that failed; waiting: ops no copy thread has started yet.
  InitiatorStats stats() const override;
  std::string Describe() const override;
  // GetInfo.local: the socket's path and this host's boot id.
  void FillInfo(gdrstore::v1::GetInfoResponse* info) const override;
  // Each listed volume's page_locked_bytes.
  void FillStats(gdrstore::v1::GetStatsResponse* stats) const override;
  // The page-lock budget for file-backed volumes that options.lock_budget_bytes gives (unset:
  // half of MemTotal; 0 when /proc/meminfo cannot be read, logged).
  static uint64_t LockBudgetBytes(const LocalOptions& options);

  handoff::HandoffStats handoff_stats() const;

 private:
  struct OpState;
  struct Piece {
    std::shared_ptr<OpState> op;
    uint64_t offset = 0;  // into the op
    uint64_t length = 0;
  };

  LocalInitiator(LocalOptions options, std::string host_id);
  // The locker's start: OK when this host has a GPU (the driver loads), whose bounce slots it
  // then makes.
  absl::Status LockerReady();
  // Resolves `op` into its state and pieces (nothing queued); the refusal otherwise.
  absl::Status Prepare(const TransferOp& op, OpDone& done, std::vector<Piece>* pieces);
  void Run(size_t index);
  absl::Status Copy(const Piece& piece, BounceBuffer& bounce);
  // Counts `piece` done with `status`; the op's last piece runs its `done`.
  void Finish(const Piece& piece, const absl::Status& status);

  const LocalOptions options_;
  const std::string host_id_;  // /proc/sys/kernel/random/boot_id
  // Every volume (and the fault source) carries this initiator's StorePin (an attachment, so
  // it lives as long as the volume); volumes added later get theirs from the store's hook, and
  // with a GPU on the host are locked there and then (see Create).
  const Store* store_ = nullptr;
  uint64_t preparer_ = 0;
  StorePin* PinLater(const Volume& volume);
  std::shared_ptr<LockBudget> budget_;
  std::unique_ptr<PageLocker> locker_;
  std::unique_ptr<handoff::HandoffServer> server_;

  mutable absl::Mutex mu_;
  absl::CondVar work_;
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<Piece> queue_ ABSL_GUARDED_BY(mu_);
  CopyLanes lanes_ ABSL_GUARDED_BY(mu_);  // which piece a free copy thread takes
  std::vector<std::thread> threads_;
  std::vector<std::unique_ptr<BounceBuffer>> bounce_;  // one per copy thread
  // Per copy thread: when its current copy began (ns since the epoch), 0 while idle.
  std::unique_ptr<std::atomic<int64_t>[]> busy_since_;
  std::atomic<uint64_t> in_flight_{0};
  std::atomic<uint64_t> waiting_{0};
  std::atomic<uint64_t> errors_{0};
  std::atomic<uint32_t> busy_{0};
  std::atomic<uint64_t> staged_{0};  // GPU copies that went through a bounce buffer
  std::atomic<uint64_t> staged_bytes_{0};
};

}  // namespace gdr
