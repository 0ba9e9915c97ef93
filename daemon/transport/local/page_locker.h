// Page-locking store volumes for the local transport's GPU copies in pieces, off every copy's
// path: a volume's pieces are locked on background threads (pieces a GPU copy touched first,
// then, for volumes served from the start on a host with a GPU, the rest in order) within a
// budget of file-backed bytes; a copy goes straight from a piece once it is locked and through a
// bounce buffer before. No CUDA here: what locks a piece is injected (gpu_copy.h gives the real
// one), so the bookkeeping is tested without a GPU.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/store/direction.h"

namespace gdr {

// A piece's page lock, undone when it is destroyed.
class PieceLock {
 public:
  virtual ~PieceLock() = default;
};

// Locks [p, p + n) for GPU copies, read_only: for copies out of it only. The attempt's error
// otherwise. Called on a locker thread (or the thread making a volume), never under a lock.
using PieceLockFn =
    std::function<absl::StatusOr<std::unique_ptr<PieceLock>>(std::byte* p, uint64_t n,
                                                             bool read_only)>;

// Bytes of file-backed volumes locked at once, across volumes: their page-cache pages cannot be
// reclaimed while locked. Thread-safe.
class LockBudget {
 public:
  explicit LockBudget(uint64_t limit) : limit_(limit) {}
  // Takes n bytes if they fit; false otherwise.
  bool Take(uint64_t n);
  void Give(uint64_t n) { used_.fetch_sub(n, std::memory_order_relaxed); }
  uint64_t used() const { return used_.load(std::memory_order_relaxed); }
  uint64_t limit() const { return limit_; }

 private:
  const uint64_t limit_;
  std::atomic<uint64_t> used_{0};
};

// One volume's pieces: which are locked and how, which a copy asked for, which to lock next.
// Shared by the volume's StorePin and the PageLocker; Direct() and the figures are lock-free
// for the copy threads, the rest takes the volume's own mutex (after the PageLocker's, never
// before). Thread-safe.
class VolumeLocks {
 public:
  enum class State : uint8_t { kUnlocked, kLocking, kReadWrite, kReadOnly, kFailed };
  // What Claim found.
  enum class Claimed { kPiece, kNone, kBudget };

  // `budget`: the file-backed bytes' budget (nullptr: not counted, memory volumes, whose pages
  // are resident anyway). `read_only`: the mapping is read-only, so no read-write lock is tried.
  VolumeLocks(std::string name, std::byte* data, uint64_t size, uint64_t piece_bytes,
              std::shared_ptr<LockBudget> budget, bool read_only);
  ~VolumeLocks();  // Close()
  VolumeLocks(const VolumeLocks&) = delete;
  VolumeLocks& operator=(const VolumeLocks&) = delete;

  const std::string& name() const { return name_; }
  uint64_t size() const { return size_; }
  std::byte* data() const { return data_; }
  uint64_t piece_bytes() const { return piece_bytes_; }
  size_t pieces() const { return count_; }
  // The piece holding byte `offset` (< size()), and where it ends (a copy is cut there: one
  // direct copy never spans two registrations).
  size_t PieceOf(uint64_t offset) const { return static_cast<size_t>(offset / piece_bytes_); }
  uint64_t PieceEnd(uint64_t offset) const;
  State state(size_t piece) const { return states_[piece].load(std::memory_order_acquire); }
  // Whether a copy in `direction` may run straight from or into the piece holding `offset`:
  // locked read-write, or read-only for a get (which reads the pages).
  bool Direct(uint64_t offset, Direction direction) const;
  uint64_t locked_bytes() const { return locked_bytes_.load(std::memory_order_relaxed); }
  // Every piece locked; or every piece settled (locked, failed, or never to be: the volume gave
  // up after a failure, or the budget ran out for it).
  bool complete() const { return locked_bytes() == size_; }
  bool settled() const;
  // Close has begun: nothing more is claimed.
  bool closed() const;

  // Marks the pieces [offset, offset + n) touches as wanted; appends each one not wanted or
  // locked before to `fresh` (in order), for the PageLocker's queue.
  void Touch(uint64_t offset, uint64_t n, std::vector<size_t>* fresh);
  // Claims `piece` to lock (kLocking), taking its bytes from the budget: kPiece; kNone when it
  // is not unlocked or the volume is closed or gave up; kBudget when the bytes do not fit.
  Claimed Claim(size_t piece);
  // Claims the next unlocked piece in order from the background cursor (*piece set): as Claim;
  // kNone when no piece is left.
  Claimed ClaimNext(size_t* piece);
  // Locks claimed `piece` with `lock`: read-write unless the mapping is read-only or a
  // read-write lock was refused before, then read-only; both refused: the piece is kFailed and
  // the volume gives up (the rest stays unlocked: staged). Never call under a lock.
  void LockClaimed(size_t piece, const PieceLockFn& lock);
  // No piece is claimed after it; waits for a piece being locked (logging while it takes long:
  // one piece is bounded by the driver), then releases every lock and gives their bytes back.
  // The pages may go once it returns. Idempotent.
  void Close();
  // Once: logs that locking stopped at the budget, with what it got.
  void NoteBudget();

 private:
  void Settle(size_t piece, State s, absl::Duration took);

  const std::string name_;
  std::byte* const data_;
  const uint64_t size_;
  const uint64_t piece_bytes_;
  const size_t count_;
  const std::shared_ptr<LockBudget> budget_;
  const bool read_only_mapping_;
  std::unique_ptr<std::atomic<State>[]> states_;
  std::atomic<uint64_t> locked_bytes_{0};

  mutable absl::Mutex mu_;
  absl::CondVar settled_cv_;  // a kLocking piece settled
  std::vector<std::unique_ptr<PieceLock>> locks_ ABSL_GUARDED_BY(mu_);
  std::vector<bool> wanted_ ABSL_GUARDED_BY(mu_);
  size_t cursor_ ABSL_GUARDED_BY(mu_) = 0;    // ClaimNext's next candidate
  size_t locking_ ABSL_GUARDED_BY(mu_) = 0;   // pieces claimed and not yet settled
  size_t settled_ ABSL_GUARDED_BY(mu_) = 0;   // pieces locked or failed
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  bool gave_up_ ABSL_GUARDED_BY(mu_) = false;
  bool budget_noted_ ABSL_GUARDED_BY(mu_) = false;
  bool read_write_refused_ ABSL_GUARDED_BY(mu_) = false;
  std::string refusal_ ABSL_GUARDED_BY(mu_);  // why read-write was refused
  absl::Time first_claim_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  absl::Duration locking_time_ ABSL_GUARDED_BY(mu_) = absl::ZeroDuration();
};

struct PageLockOptions {
  uint64_t piece_bytes = uint64_t{128} << 20;
  uint32_t threads = 2;
  // A piece starts only once no GPU copy has run for this long (0: alongside copies).
  absl::Duration idle = absl::Milliseconds(100);
};

// The locker threads and their queues: pieces touched, first come first locked, across volumes;
// then the volumes to lock whole, in the order given. A volume is held (its `keep`) only while a
// piece of it is being locked, so a volume removed meanwhile goes with its last op or its last
// piece, and its pages are never unmapped under a lock. Thread-safe.
class PageLocker {
 public:
  // `ready` runs once on a locker thread before the first whole-volume piece: its error (no
  // GPU on this host) drops whole-volume locking, logged (touched pieces still lock: only a GPU
  // op touches one). Starts options.threads threads.
  PageLocker(PageLockOptions options, PieceLockFn lock, std::function<absl::Status()> ready);
  ~PageLocker();  // Stop()
  PageLocker(const PageLocker&) = delete;
  PageLocker& operator=(const PageLocker&) = delete;

  // Locks every piece of `v` in the background, after the touched ones; `keep` holds its pages.
  void LockWhole(std::shared_ptr<VolumeLocks> v, std::weak_ptr<const void> keep);
  // A GPU copy touched [offset, offset + n) of `v`: its pieces not locked yet are queued.
  void Touch(const std::shared_ptr<VolumeLocks>& v, std::weak_ptr<const void> keep,
             uint64_t offset, uint64_t n);
  // Locks every piece of `v` on the calling thread now (a volume nobody can reach yet), as far
  // as the budget allows; after Stop, no further piece.
  void LockNow(VolumeLocks& v);
  // A GPU copy begins / ends: pieces wait for the copies to pause (options.idle).
  void CopyBegins() { copies_.fetch_add(1, std::memory_order_relaxed); }
  void CopyEnds();
  // No piece starts after it; returns once every locker thread is out (a piece being locked
  // finishes first, logged while it takes long). Idempotent.
  void Stop();

  // For tests: the locker threads that found work and are waiting for the copies to pause.
  uint32_t waiting_for_idle() const;
  // Stop has begun.
  bool stopping() const;

 private:
  struct Job {
    std::weak_ptr<VolumeLocks> volume;
    std::weak_ptr<const void> keep;
    size_t piece = 0;  // touched jobs
  };
  void Run();
  // Claims the next piece to lock (*v, *piece) and holds its volume (*keep); false: none.
  // Holds of volumes passed over go to *drop, let go after mu_ (the last one frees a volume).
  bool Next(std::shared_ptr<VolumeLocks>* v, std::shared_ptr<const void>* keep, size_t* piece,
            std::vector<std::shared_ptr<const void>>* drop) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool HasWork() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const PageLockOptions options_;
  const PieceLockFn lock_;
  const std::function<absl::Status()> ready_check_;
  std::atomic<uint64_t> copies_{0};
  enum class Ready { kUnchecked, kChecking, kYes, kNo };

  mutable absl::Mutex mu_;
  absl::CondVar cv_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  Ready ready_ ABSL_GUARDED_BY(mu_) = Ready::kUnchecked;
  std::deque<Job> touched_ ABSL_GUARDED_BY(mu_);
  std::deque<Job> whole_ ABSL_GUARDED_BY(mu_);
  absl::Time last_copy_end_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  uint32_t idle_waiters_ ABSL_GUARDED_BY(mu_) = 0;
  uint32_t running_ ABSL_GUARDED_BY(mu_) = 0;  // locker threads not yet out
  std::vector<std::thread> threads_;
};

}  // namespace gdr
