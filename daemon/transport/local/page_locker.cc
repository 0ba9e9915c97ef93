#include "daemon/transport/local/page_locker.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/base/log.h"
#include "common/base/thread_name.h"
#include "common/base/units.h"

namespace gdr {

namespace {

// How often a wait for a piece being locked says so: one piece is bounded by the driver, but a
// wait that says nothing looks like a hang.
constexpr absl::Duration kWaitLog = absl::Seconds(5);

std::string Rate(uint64_t bytes, absl::Duration d) {
  const double s = absl::ToDoubleSeconds(d);
  return s > 0 ? absl::StrFormat("%.2f GB/s", static_cast<double>(bytes) / s / 1e9) : "-";
}

}  // namespace

bool LockBudget::Take(uint64_t n) {
  uint64_t used = used_.load(std::memory_order_relaxed);
  do {
    if (used > limit_ || n > limit_ - used) return false;
  } while (!used_.compare_exchange_weak(used, used + n, std::memory_order_relaxed));
  return true;
}

// ---- VolumeLocks ----

VolumeLocks::VolumeLocks(std::string name, std::byte* data, uint64_t size, uint64_t piece_bytes,
                         std::shared_ptr<LockBudget> budget, bool read_only)
    : name_(std::move(name)),
      data_(data),
      size_(size),
      piece_bytes_(std::max<uint64_t>(piece_bytes, 1)),
      count_(static_cast<size_t>((size + piece_bytes_ - 1) / piece_bytes_)),
      budget_(std::move(budget)),
      read_only_mapping_(read_only),
      states_(std::make_unique<std::atomic<State>[]>(count_)) {
  for (size_t i = 0; i < count_; ++i) states_[i].store(State::kUnlocked);
  absl::MutexLock lock(&mu_);
  locks_.resize(count_);
  wanted_.assign(count_, false);
}

VolumeLocks::~VolumeLocks() { Close(); }

uint64_t VolumeLocks::PieceEnd(uint64_t offset) const {
  return std::min(size_, (offset / piece_bytes_ + 1) * piece_bytes_);
}

bool VolumeLocks::Direct(uint64_t offset, Direction direction) const {
  if (offset >= size_) return false;
  const State s = state(PieceOf(offset));
  // A get reads the pages (host -> GPU); a put writes them, which a read-only lock does not let
  // a GPU do.
  return s == State::kReadWrite ||
         (s == State::kReadOnly && direction == Direction::kStoreToClient);
}

bool VolumeLocks::settled() const {
  absl::MutexLock lock(&mu_);
  return settled_ == count_ || ((gave_up_ || budget_noted_ || closed_) && locking_ == 0);
}

bool VolumeLocks::closed() const {
  absl::MutexLock lock(&mu_);
  return closed_;
}

void VolumeLocks::Touch(uint64_t offset, uint64_t n, std::vector<size_t>* fresh) {
  if (n == 0 || offset >= size_) return;
  const size_t first = PieceOf(offset);
  const size_t last = PieceOf(std::min(size_, offset + n) - 1);
  absl::MutexLock lock(&mu_);
  if (closed_ || gave_up_) return;
  for (size_t i = first; i <= last; ++i) {
    if (wanted_[i] || state(i) != State::kUnlocked) continue;
    wanted_[i] = true;
    fresh->push_back(i);
  }
}

VolumeLocks::Claimed VolumeLocks::Claim(size_t piece) {
  absl::MutexLock lock(&mu_);
  if (closed_ || gave_up_ || piece >= count_ || state(piece) != State::kUnlocked) {
    return Claimed::kNone;
  }
  const uint64_t n = std::min(size_, (piece + 1) * piece_bytes_) - piece * piece_bytes_;
  if (budget_ != nullptr && !budget_->Take(n)) return Claimed::kBudget;
  states_[piece].store(State::kLocking, std::memory_order_release);
  ++locking_;
  if (first_claim_ == absl::InfinitePast()) first_claim_ = absl::Now();
  return Claimed::kPiece;
}

VolumeLocks::Claimed VolumeLocks::ClaimNext(size_t* piece) {
  for (;;) {
    size_t i = 0;
    {
      absl::MutexLock lock(&mu_);
      while (cursor_ < count_ && state(cursor_) != State::kUnlocked) ++cursor_;
      if (cursor_ == count_ || closed_ || gave_up_) return Claimed::kNone;
      i = cursor_;
    }
    // Claim takes the mutex again: a touched job may have claimed `i` in between, so on kNone
    // the cursor moves on.
    const Claimed c = Claim(i);
    if (c != Claimed::kNone) {
      *piece = i;
      return c;
    }
    absl::MutexLock lock(&mu_);
    if (closed_ || gave_up_) return Claimed::kNone;
    if (cursor_ == i) ++cursor_;
  }
}

void VolumeLocks::LockClaimed(size_t piece, const PieceLockFn& lock) {
  std::byte* p = data_ + piece * piece_bytes_;
  const uint64_t n = std::min(size_, (piece + 1) * piece_bytes_) - piece * piece_bytes_;
  bool try_read_write = false;
  {
    absl::MutexLock l(&mu_);
    try_read_write = !read_only_mapping_ && !read_write_refused_;
  }
  const absl::Time start = absl::Now();
  absl::Status rw_error;
  if (try_read_write) {
    absl::StatusOr<std::unique_ptr<PieceLock>> rw = lock(p, n, /*read_only=*/false);
    if (rw.ok()) {
      absl::MutexLock l(&mu_);
      locks_[piece] = std::move(*rw);
      Settle(piece, State::kReadWrite, absl::Now() - start);
      return;
    }
    rw_error = rw.status();
  }
  // Linux refuses a writable long-term lock on a shared mapping of a file whose pages need
  // dirty tracking (ext4, xfs); a read-only one it grants, and gets copy from it directly.
  absl::StatusOr<std::unique_ptr<PieceLock>> ro = lock(p, n, /*read_only=*/true);
  absl::MutexLock l(&mu_);
  if (!rw_error.ok() && !read_write_refused_) {
    read_write_refused_ = true;
    refusal_ = std::string(rw_error.message());
  }
  if (ro.ok()) {
    locks_[piece] = std::move(*ro);
    Settle(piece, State::kReadOnly, absl::Now() - start);
    return;
  }
  // Both refused: the rest of the volume is left unlocked (staged) rather than tried piece by
  // piece, since whatever refused this one (memory, the driver) will most likely refuse them.
  if (budget_ != nullptr) budget_->Give(n);
  gave_up_ = true;
  GDR_LOG(kWarning) << "local: volume " << name_ << ": cannot page-lock "
                    << FormatSize(n) << " at +" << piece * piece_bytes_
                    << "; its unlocked pieces' GPU copies go through bounce buffers"
                    << (rw_error.ok() ? "" : absl::StrCat(": ", rw_error.message()))
                    << "; read-only: " << ro.status().message();
  Settle(piece, State::kFailed, absl::Now() - start);
}

void VolumeLocks::Settle(size_t piece, State s, absl::Duration took) {
  const uint64_t n = std::min(size_, (piece + 1) * piece_bytes_) - piece * piece_bytes_;
  states_[piece].store(s, std::memory_order_release);
  if (s != State::kFailed) locked_bytes_.fetch_add(n, std::memory_order_relaxed);
  --locking_;
  ++settled_;
  locking_time_ += took;
  settled_cv_.SignalAll();
  if (s == State::kFailed || locked_bytes() != size_) return;
  // The whole volume is locked: its rate is what the driver gave (the time inside the locks)
  // and what a reader saw (since the first piece began, waits for idle copies included).
  GDR_LOG(kInfo) << "local: volume " << name_ << " page-locked for GPU copies"
                 << (read_write_refused_ || read_only_mapping_ ? " read-only" : "") << ": "
                 << FormatSize(size_) << " in " << count_ << " pieces, "
                 << absl::FormatDuration(locking_time_) << " locking ("
                 << Rate(size_, locking_time_) << "), "
                 << absl::FormatDuration(absl::Now() - first_claim_) << " since the first"
                 << (read_write_refused_
                         ? absl::StrCat("; puts from GPU memory go through bounce buffers: ",
                                        refusal_)
                         : "");
}

void VolumeLocks::NoteBudget() {
  absl::MutexLock lock(&mu_);
  if (budget_noted_ || budget_ == nullptr) return;
  budget_noted_ = true;
  GDR_LOG(kInfo) << "local: volume " << name_ << ": page-lock budget reached ("
                 << FormatSize(budget_->limit()) << ", --local-lock-budget) with "
                 << FormatSize(locked_bytes()) << " of " << FormatSize(size_)
                 << " locked; GPU copies of the rest go through bounce buffers";
}

void VolumeLocks::Close() {
  std::vector<std::unique_ptr<PieceLock>> gone;
  {
    absl::MutexLock lock(&mu_);
    closed_ = true;
    // A piece being locked is held by its locker's hold on the volume, so this wait only
    // happens when the owner goes first (the daemon stopping); it is one piece long.
    absl::Time since = absl::Now();
    while (locking_ > 0) {
      if (settled_cv_.WaitWithTimeout(&mu_, kWaitLog) && locking_ > 0) {
        GDR_LOG(kWarning) << "local: volume " << name_ << ": still waiting for a page lock in "
                          << "progress (" << absl::FormatDuration(absl::Now() - since) << ")";
      }
    }
    gone.swap(locks_);
    for (size_t i = 0; i < count_; ++i) {
      if (state(i) == State::kReadWrite || state(i) == State::kReadOnly) {
        states_[i].store(State::kUnlocked, std::memory_order_release);
      }
    }
  }
  const uint64_t locked = locked_bytes_.exchange(0);
  gone.clear();  // unlocked here, before the pages go
  if (budget_ != nullptr) budget_->Give(locked);
}

// ---- PageLocker ----

PageLocker::PageLocker(PageLockOptions options, PieceLockFn lock,
                       std::function<absl::Status()> ready)
    : options_(options), lock_(std::move(lock)), ready_check_(std::move(ready)) {
  absl::MutexLock l(&mu_);
  running_ = options_.threads;
  for (uint32_t i = 0; i < options_.threads; ++i) threads_.emplace_back([this] { Run(); });
}

PageLocker::~PageLocker() { Stop(); }

void PageLocker::LockWhole(std::shared_ptr<VolumeLocks> v, std::weak_ptr<const void> keep) {
  absl::MutexLock l(&mu_);
  if (stop_ || ready_ == Ready::kNo) return;
  whole_.push_back(Job{v, std::move(keep), 0});
  cv_.Signal();
}

void PageLocker::Touch(const std::shared_ptr<VolumeLocks>& v, std::weak_ptr<const void> keep,
                       uint64_t offset, uint64_t n) {
  if (v->complete()) return;  // the common case once locked: no mutex per copy
  std::vector<size_t> fresh;
  v->Touch(offset, n, &fresh);
  if (fresh.empty()) return;
  absl::MutexLock l(&mu_);
  if (stop_) return;
  for (size_t piece : fresh) touched_.push_back(Job{v, keep, piece});
  cv_.SignalAll();
}

void PageLocker::LockNow(VolumeLocks& v) {
  size_t piece = 0;
  for (;;) {
    if (stopping()) return;  // the daemon is stopping: the rest stays unlocked
    const VolumeLocks::Claimed c = v.ClaimNext(&piece);
    if (c == VolumeLocks::Claimed::kBudget) v.NoteBudget();
    if (c != VolumeLocks::Claimed::kPiece) return;
    v.LockClaimed(piece, lock_);
  }
}

void PageLocker::CopyEnds() {
  if (copies_.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  absl::MutexLock l(&mu_);
  last_copy_end_ = absl::Now();
  if (idle_waiters_ > 0) cv_.SignalAll();
}

void PageLocker::Stop() {
  {
    absl::MutexLock l(&mu_);
    stop_ = true;
    touched_.clear();
    whole_.clear();
    cv_.SignalAll();
    const absl::Time since = absl::Now();
    while (running_ > 0) {
      if (cv_.WaitWithTimeout(&mu_, kWaitLog) && running_ > 0) {
        GDR_LOG(kWarning) << "local: waiting for " << running_ << " page lock(s) in progress ("
                          << absl::FormatDuration(absl::Now() - since) << ")";
      }
    }
  }
  for (std::thread& t : threads_) t.join();
  threads_.clear();
}

uint32_t PageLocker::waiting_for_idle() const {
  absl::MutexLock l(&mu_);
  return idle_waiters_;
}

bool PageLocker::stopping() const {
  absl::MutexLock l(&mu_);
  return stop_;
}

bool PageLocker::HasWork() const {
  // Whole-volume work waits while the first of it checks for a GPU.
  return !touched_.empty() ||
         (!whole_.empty() && (ready_ == Ready::kUnchecked || ready_ == Ready::kYes));
}

bool PageLocker::Next(std::shared_ptr<VolumeLocks>* v, std::shared_ptr<const void>* keep,
                      size_t* piece, std::vector<std::shared_ptr<const void>>* drop) {
  // Touched pieces first, in the order copies touched them.
  while (!touched_.empty()) {
    Job job = std::move(touched_.front());
    touched_.pop_front();
    std::shared_ptr<VolumeLocks> locks = job.volume.lock();
    std::shared_ptr<const void> held = job.keep.lock();
    if (locks == nullptr || held == nullptr) continue;  // the volume is going
    const VolumeLocks::Claimed c = locks->Claim(job.piece);
    if (c == VolumeLocks::Claimed::kBudget) locks->NoteBudget();
    if (c != VolumeLocks::Claimed::kPiece) {
      drop->push_back(std::move(held));  // the last hold may free the volume: not under mu_
      continue;
    }
    *v = std::move(locks);
    *keep = std::move(held);
    *piece = job.piece;
    return true;
  }
  while (ready_ == Ready::kYes && !whole_.empty()) {
    Job& job = whole_.front();
    std::shared_ptr<VolumeLocks> locks = job.volume.lock();
    std::shared_ptr<const void> held = job.keep.lock();
    VolumeLocks::Claimed c = VolumeLocks::Claimed::kNone;
    if (locks != nullptr && held != nullptr) c = locks->ClaimNext(piece);
    if (c == VolumeLocks::Claimed::kPiece) {
      *v = std::move(locks);
      *keep = std::move(held);
      return true;
    }
    // Done, gone, given up or out of budget: the rest of this volume stays as it is.
    if (c == VolumeLocks::Claimed::kBudget) locks->NoteBudget();
    drop->push_back(std::move(held));
    whole_.pop_front();
  }
  return false;
}

void PageLocker::Run() {
  SetThreadName("local-lock");
  std::vector<std::shared_ptr<const void>> drop;
  mu_.Lock();
  for (;;) {
    while (!stop_ && !HasWork()) cv_.Wait(&mu_);
    if (stop_) break;
    if (touched_.empty() && ready_ == Ready::kUnchecked) {
      // The first whole-volume piece: is there a GPU to lock for? Checked on this thread (it
      // loads the driver), the others waiting for whole-volume work meanwhile.
      ready_ = Ready::kChecking;
      absl::Status ready = absl::OkStatus();
      if (ready_check_) {
        mu_.Unlock();
        ready = ready_check_();
        mu_.Lock();
      }
      ready_ = ready.ok() ? Ready::kYes : Ready::kNo;
      if (!ready.ok()) {
        whole_.clear();
        GDR_LOG(kInfo) << "local: volumes are not page-locked ahead of GPU copies: "
                       << ready.message();
      }
      cv_.SignalAll();
      continue;
    }
    // The driver may serialise a registration with the copies beside it, so a piece waits
    // until GPU copies have paused for options_.idle.
    if (options_.idle > absl::ZeroDuration()) {
      const absl::Time quiet = last_copy_end_ + options_.idle;
      if (copies_.load(std::memory_order_acquire) > 0 || absl::Now() < quiet) {
        ++idle_waiters_;
        if (copies_.load(std::memory_order_acquire) > 0) {
          cv_.Wait(&mu_);
        } else {
          cv_.WaitWithDeadline(&mu_, quiet);
        }
        --idle_waiters_;
        continue;
      }
    }
    std::shared_ptr<VolumeLocks> v;
    std::shared_ptr<const void> keep;
    size_t piece = 0;
    const bool found = Next(&v, &keep, &piece, &drop);
    mu_.Unlock();
    drop.clear();
    if (found) v->LockClaimed(piece, lock_);
    // The volume may be let go here, by its last holder: its pages unlocked and unmapped on
    // this thread, after the piece settled.
    v.reset();
    keep.reset();
    mu_.Lock();
  }
  --running_;
  cv_.SignalAll();
  mu_.Unlock();
}

}  // namespace gdr
