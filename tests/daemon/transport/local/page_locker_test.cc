// The local transport's piece-by-piece page locking (daemon/transport/local/page_locker.h) with
// a fake locker in place of cuMemHostRegister, on real threads: the order pieces are locked in
// (touched first, then the whole volume in order), the budget of file-backed bytes, stopping
// and closing while a piece is being locked, a refused read-write lock falling back to
// read-only and a refused read-only lock to staged copies, and Direct() read by other threads
// while pieces are locked.
#include "daemon/transport/local/page_locker.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gdr {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using State = VolumeLocks::State;

constexpr uint64_t kPiece = 64 << 10;
// Waits are for conditions, bounded so a broken locker fails the test instead of hanging it.
constexpr absl::Duration kPatience = absl::Seconds(60);

// A volume's bytes (never touched by the fake) and what holds them while a piece is locked.
struct Memory {
  explicit Memory(uint64_t size) : bytes(size), keep(std::make_shared<int>(0)) {}
  std::byte* data() { return bytes.data(); }
  std::vector<std::byte> bytes;
  std::shared_ptr<int> keep;
};

// Stands in for cuMemHostRegister: records each call (piece index by address, read-only or
// not), counts the locks alive, can hold the first call until released, refuses what `refuse`
// says to.
class FakeLocker {
 public:
  struct Call {
    const std::byte* base = nullptr;
    uint64_t offset = 0;
    uint64_t n = 0;
    bool read_only = false;
  };
  class Held final : public PieceLock {
   public:
    explicit Held(FakeLocker* f) : f_(f) { f_->live_.fetch_add(1); }
    ~Held() override { f_->live_.fetch_sub(1); }

   private:
    FakeLocker* f_;
  };

  // Calls on pieces of `base` count from it.
  void Watch(const std::byte* base) {
    absl::MutexLock l(&mu_);
    bases_.push_back(base);
  }

  PieceLockFn Fn() {
    return [this](std::byte* p, uint64_t n,
                  bool read_only) -> absl::StatusOr<std::unique_ptr<PieceLock>> {
      Call c{nullptr, 0, n, read_only};
      {
        absl::MutexLock l(&mu_);
        for (const std::byte* b : bases_) {
          if (p >= b && (c.base == nullptr || b > c.base)) c.base = b;
        }
        c.offset = static_cast<uint64_t>(p - c.base);
        ++in_progress_;
        if (hold_first_ && calls_.empty()) {
          auto released = [this] { return released_; };
          mu_.Await(absl::Condition(&released));
        }
        calls_.push_back(c);
        --in_progress_;
        if (on_return_) on_return_(c);
      }
      if (refuse_) {
        absl::Status s = refuse_(c);
        if (!s.ok()) return s;
      }
      {
        absl::MutexLock l(&mu_);
        done_[{c.base, c.offset}] = true;
      }
      return std::make_unique<Held>(this);
    };
  }

  void HoldFirst() {
    absl::MutexLock l(&mu_);
    hold_first_ = true;
  }
  void Release() {
    absl::MutexLock l(&mu_);
    released_ = true;
  }
  bool WaitInProgress(int n) {
    absl::MutexLock l(&mu_);
    auto cond = [this, n] { return in_progress_ >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&cond), kPatience);
  }
  std::vector<uint64_t> Pieces(const std::byte* base) {
    absl::MutexLock l(&mu_);
    std::vector<uint64_t> out;
    for (const Call& c : calls_) {
      if (c.base == base) out.push_back(c.offset / kPiece);
    }
    return out;
  }
  std::vector<Call> Calls() {
    absl::MutexLock l(&mu_);
    return calls_;
  }
  bool Done(const std::byte* base, uint64_t offset) {
    absl::MutexLock l(&mu_);
    auto it = done_.find({base, offset});
    return it != done_.end() && it->second;
  }
  int live() const { return live_.load(); }

  std::function<absl::Status(const Call&)> refuse_;
  std::function<void(const Call&)> on_return_;  // under the fake's mutex

 private:
  absl::Mutex mu_;
  std::vector<const std::byte*> bases_;
  std::vector<Call> calls_;
  std::map<std::pair<const std::byte*, uint64_t>, bool> done_;
  int in_progress_ = 0;
  bool hold_first_ = false;
  bool released_ = false;
  std::atomic<int> live_{0};
};

PageLockOptions Options(uint32_t threads, absl::Duration idle = absl::ZeroDuration()) {
  PageLockOptions o;
  o.piece_bytes = kPiece;
  o.threads = threads;
  o.idle = idle;
  return o;
}

std::function<absl::Status()> Ready() {
  return [] { return absl::OkStatus(); };
}

// Polls `done` until true or kPatience passes (the locker has no completion callback: a test
// waits for the state it checks).
template <typename F>
bool WaitFor(F done) {
  const absl::Time deadline = absl::Now() + kPatience;
  while (!done()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(1));
  }
  return true;
}

TEST(PageLockerTest, TouchedPiecesGoFirstThenTheWholeVolumeInOrder) {
  FakeLocker fake;
  fake.HoldFirst();
  Memory m(10 * kPiece);
  fake.Watch(m.data());
  auto v = std::make_shared<VolumeLocks>("v", m.data(), 10 * kPiece, kPiece, nullptr, false);
  PageLocker locker(Options(1), fake.Fn(), Ready());
  locker.LockWhole(v, m.keep);
  ASSERT_TRUE(fake.WaitInProgress(1));  // piece 0, held
  // Touched while piece 0 is being locked: 8, then 5 and 6 (one copy over both), 8 again.
  locker.Touch(v, m.keep, 8 * kPiece + 100, 10);
  locker.Touch(v, m.keep, 5 * kPiece + 7, kPiece);
  locker.Touch(v, m.keep, 8 * kPiece, kPiece);
  fake.Release();
  ASSERT_TRUE(WaitFor([&] { return v->complete(); }));
  EXPECT_THAT(fake.Pieces(m.data()), ElementsAre(0, 8, 5, 6, 1, 2, 3, 4, 7, 9));
  EXPECT_EQ(v->locked_bytes(), 10 * kPiece);
  for (size_t i = 0; i < 10; ++i) EXPECT_EQ(v->state(i), State::kReadWrite) << i;
  EXPECT_EQ(fake.live(), 10);
  locker.Stop();
  v->Close();
  EXPECT_EQ(fake.live(), 0);
  EXPECT_EQ(v->locked_bytes(), 0u);
  EXPECT_FALSE(v->Direct(0, Direction::kStoreToClient));
}

TEST(PageLockerTest, TouchedPiecesOfSeveralVolumesGoInTouchOrder) {
  FakeLocker fake;
  fake.HoldFirst();
  Memory a(4 * kPiece), b(4 * kPiece);
  fake.Watch(a.data());
  fake.Watch(b.data());
  auto va = std::make_shared<VolumeLocks>("a", a.data(), 4 * kPiece, kPiece, nullptr, false);
  auto vb = std::make_shared<VolumeLocks>("b", b.data(), 4 * kPiece, kPiece, nullptr, false);
  PageLocker locker(Options(1), fake.Fn(), Ready());
  locker.Touch(va, a.keep, 3 * kPiece, 1);
  ASSERT_TRUE(fake.WaitInProgress(1));
  locker.Touch(vb, b.keep, 2 * kPiece, 1);
  locker.Touch(va, a.keep, 1 * kPiece, 1);
  locker.Touch(vb, b.keep, 0, 1);
  fake.Release();
  ASSERT_TRUE(WaitFor([&] { return va->locked_bytes() + vb->locked_bytes() == 4 * kPiece; }));
  std::vector<std::string> order;
  for (const FakeLocker::Call& c : fake.Calls()) {
    order.push_back(absl::StrCat(c.base == a.data() ? "a" : "b", c.offset / kPiece));
  }
  EXPECT_THAT(order, ElementsAre("a3", "b2", "a1", "b0"));
  // Only touched pieces: no whole-volume locking was asked for.
  EXPECT_EQ(va->state(0), State::kUnlocked);
  EXPECT_EQ(vb->state(3), State::kUnlocked);
}

TEST(PageLockerTest, TheBudgetBoundsFileBackedVolumesOnly) {
  FakeLocker fake;
  Memory fa(4 * kPiece), fb(4 * kPiece), mem(4 * kPiece);
  fake.Watch(fa.data());
  fake.Watch(fb.data());
  fake.Watch(mem.data());
  auto budget = std::make_shared<LockBudget>(3 * kPiece);
  auto a = std::make_shared<VolumeLocks>("a", fa.data(), 4 * kPiece, kPiece, budget, false);
  auto b = std::make_shared<VolumeLocks>("b", fb.data(), 4 * kPiece, kPiece, budget, false);
  auto m = std::make_shared<VolumeLocks>("m", mem.data(), 4 * kPiece, kPiece, nullptr, false);
  PageLocker locker(Options(1), fake.Fn(), Ready());
  locker.LockWhole(a, fa.keep);
  locker.LockWhole(b, fb.keep);
  locker.LockWhole(m, mem.keep);
  ASSERT_TRUE(WaitFor([&] { return m->complete() && a->settled() && b->settled(); }));
  EXPECT_EQ(a->locked_bytes(), 3 * kPiece);
  EXPECT_EQ(b->locked_bytes(), 0u);
  EXPECT_EQ(budget->used(), 3 * kPiece);
  EXPECT_TRUE(a->Direct(2 * kPiece, Direction::kClientToStore));
  EXPECT_FALSE(a->Direct(3 * kPiece, Direction::kStoreToClient));  // staged: over budget
  EXPECT_EQ(a->state(3), State::kUnlocked);
  EXPECT_THAT(fake.Pieces(fb.data()), ElementsAre());
  // A volume let go gives its bytes back; the next touch of another uses them.
  a->Close();
  EXPECT_EQ(budget->used(), 0u);
  EXPECT_EQ(fake.live(), 4);  // m's
  locker.Touch(b, fb.keep, 2 * kPiece, 1);
  ASSERT_TRUE(WaitFor([&] { return b->Direct(2 * kPiece, Direction::kStoreToClient); }));
  EXPECT_EQ(budget->used(), kPiece);
  EXPECT_THAT(fake.Pieces(fb.data()), ElementsAre(2));
}

TEST(PageLockerTest, LockNowLocksOnTheCallingThreadWithinTheBudget) {
  FakeLocker fake;
  Memory f(5 * kPiece - 4096);  // the last piece shorter
  fake.Watch(f.data());
  auto budget = std::make_shared<LockBudget>(3 * kPiece);
  auto v = std::make_shared<VolumeLocks>("v", f.data(), 5 * kPiece - 4096, kPiece, budget, false);
  EXPECT_EQ(v->pieces(), 5u);
  EXPECT_EQ(v->PieceEnd(4 * kPiece + 1), 5 * kPiece - 4096);
  EXPECT_EQ(v->PieceEnd(kPiece - 1), kPiece);
  PageLocker locker(Options(1), fake.Fn(), Ready());
  const std::thread::id me = std::this_thread::get_id();
  std::vector<std::thread::id> on;
  fake.on_return_ = [&](const FakeLocker::Call&) { on.push_back(std::this_thread::get_id()); };
  locker.LockNow(*v);
  EXPECT_THAT(fake.Pieces(f.data()), ElementsAre(0, 1, 2));
  EXPECT_THAT(on, ElementsAre(me, me, me));
  EXPECT_EQ(v->locked_bytes(), 3 * kPiece);
  EXPECT_TRUE(v->settled());
  EXPECT_FALSE(v->complete());

  // Unbudgeted, the short last piece is locked for its own length.
  Memory g(2 * kPiece + 4096);
  fake.Watch(g.data());
  auto w = std::make_shared<VolumeLocks>("w", g.data(), 2 * kPiece + 4096, kPiece, nullptr, false);
  locker.LockNow(*w);
  EXPECT_TRUE(w->complete());
  const std::vector<FakeLocker::Call> calls = fake.Calls();
  ASSERT_FALSE(calls.empty());
  EXPECT_EQ(calls.back().n, 4096u);
  EXPECT_TRUE(w->Direct(2 * kPiece + 4095, Direction::kStoreToClient));
  EXPECT_FALSE(w->Direct(2 * kPiece + 4096, Direction::kStoreToClient));  // past the end
}

TEST(PageLockerTest, StopWaitsForThePieceBeingLockedAndStartsNoOther) {
  FakeLocker fake;
  fake.HoldFirst();
  Memory m(10 * kPiece);
  fake.Watch(m.data());
  auto v = std::make_shared<VolumeLocks>("v", m.data(), 10 * kPiece, kPiece, nullptr, false);
  auto locker = std::make_unique<PageLocker>(Options(2), fake.Fn(), Ready());
  std::atomic<bool> stopped{false};
  std::vector<bool> stopped_at_return;
  fake.on_return_ = [&](const FakeLocker::Call&) { stopped_at_return.push_back(stopped.load()); };
  locker->LockWhole(v, m.keep);
  ASSERT_TRUE(fake.WaitInProgress(1));
  std::thread stopper([&] {
    locker->Stop();
    stopped.store(true);
  });
  ASSERT_TRUE(WaitFor([&] { return locker->stopping(); }));
  // The other thread may have taken piece 1 before the stop; nothing after it.
  fake.Release();
  stopper.join();
  // Calls are recorded as they return, so piece 1 may come back before the held piece 0.
  std::vector<uint64_t> pieces = fake.Pieces(m.data());
  std::sort(pieces.begin(), pieces.end());
  EXPECT_THAT(pieces, ::testing::AnyOf(ElementsAre(0), ElementsAre(0, 1)));
  // Stop returned only after every lock call had returned.
  EXPECT_THAT(stopped_at_return, ::testing::Each(false));
  EXPECT_EQ(v->locked_bytes(), pieces.size() * kPiece);
  // Stopped: a touch queues nothing, a volume being made is locked no further, and the
  // volume's locks go when it closes.
  locker->Touch(v, m.keep, 9 * kPiece, 1);
  Memory n(2 * kPiece);
  VolumeLocks made("made", n.data(), 2 * kPiece, kPiece, nullptr, false);
  locker->LockNow(made);
  EXPECT_EQ(made.locked_bytes(), 0u);
  locker.reset();
  EXPECT_EQ(fake.Pieces(m.data()).size(), pieces.size());
  v->Close();
  EXPECT_EQ(fake.live(), 0);
}

TEST(PageLockerTest, CloseWaitsForAPieceOfItsVolumeBeingLocked) {
  FakeLocker fake;
  fake.HoldFirst();
  Memory m(4 * kPiece);
  fake.Watch(m.data());
  auto v = std::make_shared<VolumeLocks>("v", m.data(), 4 * kPiece, kPiece, nullptr, false);
  PageLocker locker(Options(1), fake.Fn(), Ready());
  std::atomic<bool> closed{false};
  std::vector<bool> closed_at_return;
  fake.on_return_ = [&](const FakeLocker::Call&) { closed_at_return.push_back(closed.load()); };
  locker.Touch(v, m.keep, 0, 1);
  ASSERT_TRUE(fake.WaitInProgress(1));
  std::thread closer([&] {
    v->Close();
    closed.store(true);
  });
  // Close refuses new claims at once; the piece being locked it waits for.
  ASSERT_TRUE(WaitFor([&] { return v->closed(); }));
  EXPECT_EQ(v->Claim(1), VolumeLocks::Claimed::kNone);
  fake.Release();
  closer.join();
  EXPECT_THAT(closed_at_return, ElementsAre(false));
  EXPECT_EQ(fake.live(), 0);  // the piece locked meanwhile was unlocked by Close
  EXPECT_EQ(v->state(0), State::kUnlocked);
  EXPECT_EQ(v->locked_bytes(), 0u);
  std::vector<size_t> fresh;
  v->Touch(0, 4 * kPiece, &fresh);
  EXPECT_TRUE(fresh.empty());
}

TEST(PageLockerTest, ARefusedReadWriteLockFallsBackToReadOnlyThenToStaged) {
  FakeLocker fake;
  Memory m(6 * kPiece);
  fake.Watch(m.data());
  // Read-write always refused (a shared file mapping); read-only refused from piece 3 on.
  fake.refuse_ = [](const FakeLocker::Call& c) {
    if (!c.read_only) return absl::FailedPreconditionError("writable long-term pin refused");
    if (c.offset >= 3 * kPiece) return absl::ResourceExhaustedError("out of memory");
    return absl::OkStatus();
  };
  auto budget = std::make_shared<LockBudget>(100 * kPiece);
  auto v = std::make_shared<VolumeLocks>("v", m.data(), 6 * kPiece, kPiece, budget, false);
  PageLocker locker(Options(1), fake.Fn(), Ready());
  locker.LockWhole(v, m.keep);
  ASSERT_TRUE(WaitFor([&] { return v->settled(); }));
  std::vector<bool> read_only;
  for (const FakeLocker::Call& c : fake.Calls()) read_only.push_back(c.read_only);
  // Read-write tried once; read-only for pieces 0-3; nothing after the failure.
  EXPECT_THAT(read_only, ElementsAre(false, true, true, true, true));
  EXPECT_THAT(fake.Pieces(m.data()), ElementsAre(0, 0, 1, 2, 3));
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(v->state(i), State::kReadOnly) << i;
    EXPECT_TRUE(v->Direct(i * kPiece, Direction::kStoreToClient)) << i;
    EXPECT_FALSE(v->Direct(i * kPiece, Direction::kClientToStore)) << i;  // puts are staged
  }
  EXPECT_EQ(v->state(3), State::kFailed);
  EXPECT_EQ(v->state(4), State::kUnlocked);
  EXPECT_FALSE(v->Direct(3 * kPiece, Direction::kStoreToClient));
  EXPECT_FALSE(v->Direct(5 * kPiece, Direction::kStoreToClient));
  EXPECT_EQ(v->locked_bytes(), 3 * kPiece);
  EXPECT_EQ(budget->used(), 3 * kPiece);  // the failed piece's bytes given back
  // Given up: a touch queues nothing more.
  std::vector<size_t> fresh;
  v->Touch(4 * kPiece, kPiece, &fresh);
  EXPECT_TRUE(fresh.empty());
  locker.Stop();
  v->Close();
  EXPECT_EQ(fake.live(), 0);
  EXPECT_EQ(budget->used(), 0u);
}

TEST(PageLockerTest, AReadOnlyMappingIsNeverLockedReadWrite) {
  FakeLocker fake;
  Memory m(3 * kPiece);
  fake.Watch(m.data());
  auto v = std::make_shared<VolumeLocks>("v", m.data(), 3 * kPiece, kPiece, nullptr,
                                         /*read_only=*/true);
  PageLocker locker(Options(2), fake.Fn(), Ready());
  locker.LockNow(*v);
  ASSERT_TRUE(v->complete());
  for (const FakeLocker::Call& c : fake.Calls()) EXPECT_TRUE(c.read_only);
  EXPECT_EQ(fake.Calls().size(), 3u);
  EXPECT_TRUE(v->Direct(0, Direction::kStoreToClient));
  EXPECT_FALSE(v->Direct(0, Direction::kClientToStore));
}

TEST(PageLockerTest, DirectIsTrueOnlyForPiecesWhoseLockReturned) {
  FakeLocker fake;
  constexpr size_t kPieces = 256;
  Memory m(kPieces * kPiece);
  fake.Watch(m.data());
  auto v = std::make_shared<VolumeLocks>("v", m.data(), kPieces * kPiece, kPiece, nullptr, false);
  std::atomic<int> early{0}, went_back{0}, shrank{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> readers;
  for (int r = 0; r < 4; ++r) {
    readers.emplace_back([&] {
      std::vector<bool> seen(kPieces, false);
      uint64_t last = 0;
      while (!go.load()) {
      }
      for (;;) {
        const bool complete = v->complete();
        for (size_t i = 0; i < kPieces; ++i) {
          const bool d = v->Direct(i * kPiece + 5, Direction::kClientToStore);
          if (d && !fake.Done(m.data(), i * kPiece)) early.fetch_add(1);
          if (seen[i] && !d) went_back.fetch_add(1);
          seen[i] = seen[i] || d;
        }
        const uint64_t locked = v->locked_bytes();
        if (locked < last) shrank.fetch_add(1);
        last = locked;
        if (complete) break;
      }
    });
  }
  PageLocker locker(Options(3), fake.Fn(), Ready());
  go.store(true);
  locker.LockWhole(v, m.keep);
  // Copies touch pieces from the far end meanwhile.
  for (size_t i = kPieces; i-- > kPieces / 2;) locker.Touch(v, m.keep, i * kPiece, 1);
  for (std::thread& t : readers) t.join();
  EXPECT_EQ(early.load(), 0);
  EXPECT_EQ(went_back.load(), 0);
  EXPECT_EQ(shrank.load(), 0);
  EXPECT_EQ(v->locked_bytes(), kPieces * kPiece);
  std::vector<uint64_t> pieces = fake.Pieces(m.data());
  std::sort(pieces.begin(), pieces.end());
  std::vector<uint64_t> each(kPieces);
  for (size_t i = 0; i < kPieces; ++i) each[i] = i;
  EXPECT_THAT(pieces, ElementsAreArray(each));  // every piece exactly once
}

TEST(PageLockerTest, PiecesWaitForGpuCopiesToPause) {
  FakeLocker fake;
  Memory m(3 * kPiece);
  fake.Watch(m.data());
  auto v = std::make_shared<VolumeLocks>("v", m.data(), 3 * kPiece, kPiece, nullptr, false);
  std::atomic<bool> copying{true};
  std::vector<bool> copying_at_call;
  fake.on_return_ = [&](const FakeLocker::Call&) { copying_at_call.push_back(copying.load()); };
  PageLocker locker(Options(1, absl::Nanoseconds(1)), fake.Fn(), Ready());
  locker.CopyBegins();
  locker.CopyBegins();
  locker.LockWhole(v, m.keep);
  locker.Touch(v, m.keep, 2 * kPiece, 1);
  ASSERT_TRUE(WaitFor([&] { return locker.waiting_for_idle() == 1; }));
  EXPECT_TRUE(fake.Calls().empty());
  locker.CopyEnds();  // one copy still runs
  ASSERT_TRUE(WaitFor([&] { return locker.waiting_for_idle() == 1; }));
  copying.store(false);
  locker.CopyEnds();
  ASSERT_TRUE(WaitFor([&] { return v->complete(); }));
  EXPECT_THAT(copying_at_call, ElementsAre(false, false, false));
  EXPECT_THAT(fake.Pieces(m.data()), ElementsAre(2, 0, 1));
}

TEST(PageLockerTest, WithoutAGpuNoWholeVolumeIsLockedButTouchedPiecesAre) {
  FakeLocker fake;
  Memory m(3 * kPiece);
  fake.Watch(m.data());
  auto v = std::make_shared<VolumeLocks>("v", m.data(), 3 * kPiece, kPiece, nullptr, false);
  std::atomic<int> checks{0};
  PageLocker locker(Options(2), fake.Fn(), [&] {
    checks.fetch_add(1);
    return absl::FailedPreconditionError("no CUDA-capable device");
  });
  locker.LockWhole(v, m.keep);
  ASSERT_TRUE(WaitFor([&] { return checks.load() == 1; }));
  locker.Touch(v, m.keep, kPiece, 1);
  ASSERT_TRUE(WaitFor([&] { return v->locked_bytes() == kPiece; }));
  locker.LockWhole(v, m.keep);  // refused from now on
  locker.Touch(v, m.keep, 0, 1);
  ASSERT_TRUE(WaitFor([&] { return v->locked_bytes() == 2 * kPiece; }));
  EXPECT_THAT(fake.Pieces(m.data()), ElementsAre(1, 0));
  EXPECT_EQ(checks.load(), 1);
  EXPECT_EQ(v->state(2), State::kUnlocked);
}

TEST(PageLockerTest, AVolumeLetGoIsPassedOverAndItsLastHoldReleasesIt) {
  FakeLocker fake;
  fake.HoldFirst();
  Memory a(2 * kPiece), b(2 * kPiece);
  fake.Watch(a.data());
  fake.Watch(b.data());
  auto va = std::make_shared<VolumeLocks>("a", a.data(), 2 * kPiece, kPiece, nullptr, false);
  auto vb = std::make_shared<VolumeLocks>("b", b.data(), 2 * kPiece, kPiece, nullptr, false);
  PageLocker locker(Options(1), fake.Fn(), Ready());
  locker.Touch(va, a.keep, 0, 1);
  ASSERT_TRUE(fake.WaitInProgress(1));
  locker.Touch(vb, b.keep, 0, 1);
  locker.Touch(va, a.keep, kPiece, 1);
  b.keep.reset();  // b is let go before its piece's turn
  // a is let go while its piece is being locked: the locker's hold keeps it until it settles.
  std::weak_ptr<int> a_alive = a.keep;
  a.keep.reset();
  EXPECT_FALSE(a_alive.expired());
  fake.Release();
  ASSERT_TRUE(WaitFor([&] { return a_alive.expired(); }));
  EXPECT_EQ(va->state(0), State::kReadWrite);
  EXPECT_THAT(fake.Pieces(b.data()), ElementsAre());
  EXPECT_THAT(fake.Pieces(a.data()), ElementsAre(0));  // a's second touch passed over too
}

}  // namespace
}  // namespace gdr
