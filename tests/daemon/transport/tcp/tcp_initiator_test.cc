// End-to-end tests of the tcp initiator pool (daemon/transport/tcp/tcp_initiator.h) moving
// bytes over real loopback sockets, against the client library's real tcp target
// (client/src/transport/tcp/tcp_target.h) in this process: sizes and alignments, concurrency,
// batches, turns between more clients than links, shutdown. Which link each chunk takes, and
// when links open, wait, retire or are handed over, is tcp_link_scheduler_test's.
#include <atomic>
#include <cstring>
#include <utility>
#include <thread>
#include <vector>

#include "common/base/completion_batch.h"
#include "tests/daemon/transport/tcp/tcp_initiator_fixture.h"

namespace gdr::tcp_initiator_test {
namespace {

TEST(TcpInitiatorCreateTest, RejectsBadOptions) {
  TcpInitiatorOptions o;
  o.max_links = 0;
  EXPECT_EQ(TcpInitiator::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
  o = {};
  o.links_per_target = 0;
  EXPECT_EQ(TcpInitiator::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
  o = {};
  o.links_per_target = 4;
  o.max_links_per_target = 3;
  EXPECT_EQ(TcpInitiator::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
  o = {};
  o.chunk_bytes = 4095;
  EXPECT_EQ(TcpInitiator::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
  o.chunk_bytes = tcpwire::kMaxPayload + 1;
  EXPECT_EQ(TcpInitiator::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
  o.chunk_bytes = tcpwire::kMaxPayload;
  EXPECT_TRUE(TcpInitiator::Create(o).ok());
}

TEST_F(TcpInitiatorTest, MovesBytesBothDirectionsAtEveryChunkSizeAndAlignment) {
  constexpr size_t kSize = 3 << 20;
  struct Shape {
    uint64_t length, store_off, remote_off;
  };
  const Shape shapes[] = {{1, 0, 0},           {4095, 3, 7},        {4096, 4096, 4096},
                          {3 * 4096 + 1, 1, 4097}, {65537, 9, 65535}, {2500001, 5, 11}};
  uint64_t salt = 0;
  for (uint64_t chunk : {4096ull, 5000ull, 65536ull, 1ull << 20}) {
    TcpInitiatorOptions o;
    o.chunk_bytes = chunk;
    StartInitiator(o);
    for (const Shape& s : shapes) {
      SCOPED_TRACE(testing::Message() << "chunk " << chunk << " length " << s.length
                                      << " store_off " << s.store_off << " remote_off "
                                      << s.remote_off);
      {  // Write: store -> client buffer.
        ClientMemory client(*target_, kSize, ++salt);
        StoreMemory store(kSize, ++salt);
        ASSERT_TRUE(Run(MakeOp(Direction::kStoreToClient, store.at(s.store_off), s.length,
                               client.address(s.remote_off), client.rkey(), target_->port()))
                        .ok());
        EXPECT_EQ(PatternMismatch(store.seed(), s.store_off, client.span(s.remote_off, s.length)),
                  std::nullopt);
        EXPECT_EQ(client.FirstChangedOutside(s.remote_off, s.length), -1);
        EXPECT_EQ(store.FirstChangedOutside(), -1);
        target_->Deregister(client.rkey());
      }
      {  // Read: client buffer -> store.
        ClientMemory client(*target_, kSize, ++salt);
        StoreMemory store(kSize, ++salt);
        absl::Status st = Run(MakeOp(Direction::kClientToStore, store.at(s.store_off), s.length,
                                     client.address(s.remote_off), client.rkey(),
                                     target_->port()));
        ASSERT_TRUE(st.ok()) << st;
        EXPECT_EQ(PatternMismatch(client.seed(), ClientMemory::kGuard + s.remote_off,
                                  store.span(s.store_off, s.length)),
                  std::nullopt);
        EXPECT_EQ(store.FirstChangedOutside(s.store_off, s.length), -1);
        EXPECT_EQ(client.FirstChangedOutside(), -1);
        target_->Deregister(client.rkey());
      }
    }
  }
  EXPECT_EQ(target_->stats().refused, 0u);
}

TEST_F(TcpInitiatorTest, ManyConcurrentOpsInBothDirections) {
  TcpInitiatorOptions o;
  o.chunk_bytes = 8192;
  o.links_per_target = 3;
  o.max_links_per_target = 3;
  StartInitiator(o);
  constexpr int kOps = 400;
  constexpr size_t kSlot = 32768;
  ClientMemory client(*target_, kOps * kSlot, 1);
  StoreMemory store(kOps * kSlot, 2);
  auto length_of = [](int i) { return uint64_t(i * 7919 % (kSlot - 16)) + 1; };
  auto store_off = [](int i) { return size_t(i) * kSlot + i % 5; };
  auto remote_off = [](int i) { return size_t(i) * kSlot + i % 11; };
  std::vector<OpWaiter> waiters(kOps);
  std::vector<std::thread> submitters;
  std::atomic<int> refused{0};
  for (int t = 0; t < 4; ++t) {
    submitters.emplace_back([&, t] {
      for (int i = t; i < kOps; i += 4) {
        // Even ops write store slot i into client slot i; odd ops read client slot i into
        // store slot i. Slots are disjoint, so every op's result is checkable.
        const Direction d = i % 2 == 0 ? Direction::kStoreToClient : Direction::kClientToStore;
        absl::Status s = initiator_->Submit(
            MakeOp(d, store.at(store_off(i)), length_of(i), client.address(remote_off(i)),
                   client.rkey(), target_->port()),
            waiters[i].Callback());
        if (!s.ok()) refused.fetch_add(1);
      }
    });
  }
  for (auto& t : submitters) t.join();
  ASSERT_EQ(refused.load(), 0);
  for (int i = 0; i < kOps; ++i) {
    absl::Status s = waiters[i].Wait();
    ASSERT_TRUE(s.ok()) << "op " << i << ": " << s;
  }
  for (int i = 0; i < kOps; ++i) {
    const uint64_t len = length_of(i);
    if (i % 2 == 0) {
      ASSERT_EQ(PatternMismatch(store.seed(), store_off(i), client.span(remote_off(i), len)),
                std::nullopt)
          << "op " << i;
    } else {
      ASSERT_EQ(PatternMismatch(client.seed(), ClientMemory::kGuard + remote_off(i),
                                store.span(store_off(i), len)),
                std::nullopt)
          << "op " << i;
    }
    EXPECT_EQ(waiters[i].calls(), 1) << "op " << i;
  }
  const InitiatorStats st = initiator_->stats();
  EXPECT_LE(st.in_use, o.links_per_target);
  EXPECT_EQ(st.clients, 1u);
  EXPECT_EQ(st.capacity, o.max_links);
  // Each op leaves the in-flight count before its callback runs.
  EXPECT_EQ(st.in_flight, 0u);
  EXPECT_EQ(st.errors, 0u);
}

// A lone destination with bulk in flight opens links past its share (links_per_target), up to
// max_links_per_target, and the bytes arrive as over one link.
TEST_F(TcpInitiatorTest, ALoneDestinationOpensLinksPastItsShareForBulk) {
  TcpInitiatorOptions o;
  o.chunk_bytes = 64 << 10;
  ASSERT_EQ(o.links_per_target, 2u);
  o.max_links_per_target = 8;
  o.extra_idle_timeout = absl::Hours(1);  // none closes before the test looks
  StartInitiator(o);
  constexpr size_t kLen = 4 << 20;  // 64 chunks
  ClientMemory client(*target_, kLen, 1);
  StoreMemory store(kLen, 2);
  for (Direction d : {Direction::kStoreToClient, Direction::kClientToStore}) {
    ASSERT_TRUE(Run(MakeOp(d, store.at(0), kLen, client.address(0), client.rkey(),
                           target_->port()))
                    .ok());
    EXPECT_EQ(initiator_->stats().in_use, 8u);
  }
  EXPECT_EQ(PatternMismatch(store.seed(), 0, client.span(0, kLen)), std::nullopt);
  EXPECT_EQ(initiator_->stats().errors, 0u);
  EXPECT_EQ(target_->stats().accepted, 8u);
}

// A full pool schedules, it does not refuse: the op waits for a link. The only link is held by
// a target that never answers; once its turn is over it gets the handover timeout to finish,
// then its op fails naming the flag and the waiting op gets the link.
TEST_F(TcpInitiatorTest, AStuckClientLosesItsLinkToAWaitingOneAfterTheHandoverTimeout) {
  TcpInitiatorOptions o;
  o.max_links = 1;
  o.turn = absl::Milliseconds(10);
  o.handover_timeout = absl::Milliseconds(300);
  StartInitiator(o);
  SilentTarget silent;
  ClientMemory client(*target_, 1 << 20, 1);
  StoreMemory store(1 << 20, 2);

  OpWaiter stuck;
  ASSERT_TRUE(initiator_->Submit(MakeOp(Direction::kStoreToClient, store.at(0), 4096, 0x10000, 7,
                                        silent.port()),
                                 stuck.Callback())
                  .ok());
  OpWaiter waiting;
  ASSERT_TRUE(initiator_->Submit(MakeOp(Direction::kStoreToClient, store.at(0), 4096,
                                        client.address(0), client.rkey(), target_->port()),
                                 waiting.Callback())
                  .ok());
  EXPECT_EQ(initiator_->stats().in_use, 1u);
  absl::Status s = stuck.Wait();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_THAT(s.message(), HasSubstr("--tcp-handover-timeout-ms"));
  ASSERT_TRUE(waiting.Wait().ok());
  EXPECT_EQ(PatternMismatch(store.seed(), 0, client.span(0, 4096)), std::nullopt);
  const InitiatorStats st = initiator_->stats();
  EXPECT_EQ(st.waiting, 0u);
  EXPECT_GE(st.handovers, 1u);
  EXPECT_LE(st.in_use, 1u);
  EXPECT_EQ(stuck.calls(), 1);
  EXPECT_EQ(waiting.calls(), 1);
}

// Ops waiting for a link are cancelled, each exactly once, when the daemon shuts down.
TEST_F(TcpInitiatorTest, ShutdownCancelsOpsWaitingForALink) {
  TcpInitiatorOptions o;
  o.max_links = 1;
  o.handover_timeout = absl::Hours(1);
  StartInitiator(o);
  SilentTarget silent;
  ClientMemory client(*target_, 1 << 20, 1);
  StoreMemory store(1 << 20, 2);
  OpWaiter busy, waiting;
  ASSERT_TRUE(initiator_->Submit(MakeOp(Direction::kStoreToClient, store.at(0), 4096, 0x10000, 7,
                                        silent.port()),
                                 busy.Callback())
                  .ok());
  ASSERT_TRUE(initiator_->Submit(MakeOp(Direction::kStoreToClient, store.at(0), 4096,
                                        client.address(0), client.rkey(), target_->port()),
                                 waiting.Callback())
                  .ok());
  EXPECT_EQ(initiator_->stats().waiting, 1u);
  initiator_->Shutdown();
  EXPECT_TRUE(absl::IsCancelled(busy.Wait()));
  EXPECT_TRUE(absl::IsCancelled(waiting.Wait()));
  EXPECT_EQ(busy.calls(), 1);
  EXPECT_EQ(waiting.calls(), 1);
  EXPECT_EQ(client.FirstChangedOutside(), -1);
}

// More destinations than links, each keeping ops in flight: every op completes with the right
// bytes, the pool never holds more than its links, and links were handed over (not refused).
TEST_F(TcpInitiatorTest, MoreDestinationsThanLinksAreServedInTurns) {
  TcpInitiatorOptions o;
  o.max_links = 2;
  o.chunk_bytes = 64 << 10;
  o.turn = absl::Milliseconds(5);
  StartInitiator(o);
  constexpr int kClients = 6;
  constexpr int kOps = 60;
  constexpr size_t kLen = 100 << 10;  // two chunks
  std::vector<std::shared_ptr<TcpTarget>> targets;
  std::vector<std::unique_ptr<ClientMemory>> memory;
  std::vector<std::unique_ptr<StoreMemory>> stores;
  for (int c = 0; c < kClients; ++c) {
    targets.push_back(StartTarget());
    ASSERT_NE(targets.back(), nullptr);
    memory.push_back(std::make_unique<ClientMemory>(*targets.back(), 2 * kLen, 10 + c));
    stores.push_back(std::make_unique<StoreMemory>(2 * kLen, 20 + c));
  }
  std::atomic<int> failed{0};
  std::atomic<bool> running{true};
  std::atomic<uint32_t> most_links{0};
  std::thread sampler([&] {
    while (running.load()) {
      const uint32_t n = initiator_->stats().in_use;
      uint32_t m = most_links.load();
      while (n > m && !most_links.compare_exchange_weak(m, n)) {
      }
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  });
  std::vector<std::thread> threads;
  for (int c = 0; c < kClients; ++c) {
    threads.emplace_back([&, c] {
      ClientMemory& m = *memory[c];
      StoreMemory& st = *stores[c];
      for (int i = 0; i < kOps && failed.load() == 0; ++i) {
        // Two ops in flight per client, one each way, on disjoint halves.
        OpWaiter to_client, to_store;
        absl::Status s1 = initiator_->Submit(
            MakeOp(Direction::kStoreToClient, st.at(0), kLen, m.address(0), m.rkey(),
                   targets[c]->port()),
            to_client.Callback());
        absl::Status s2 = initiator_->Submit(
            MakeOp(Direction::kClientToStore, st.at(kLen), kLen, m.address(kLen), m.rkey(),
                   targets[c]->port()),
            to_store.Callback());
        s1.Update(to_client.Wait());
        s2.Update(to_store.Wait());
        if (!s1.ok() || !s2.ok()) {
          failed.fetch_add(1);
          ADD_FAILURE() << "client " << c << " op " << i << ": " << s1 << " / " << s2;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  running.store(false);
  sampler.join();
  EXPECT_EQ(failed.load(), 0);
  for (int c = 0; c < kClients; ++c) {
    EXPECT_EQ(PatternMismatch(stores[c]->seed(), 0, memory[c]->span(0, kLen)), std::nullopt)
        << "client " << c;
    EXPECT_EQ(PatternMismatch(memory[c]->seed(), ClientMemory::kGuard + kLen,
                              stores[c]->span(kLen, kLen)),
              std::nullopt)
        << "client " << c;
  }
  const InitiatorStats st = initiator_->stats();
  EXPECT_LE(most_links.load(), o.max_links);
  EXPECT_GE(st.handovers, 1u);
  EXPECT_EQ(st.waiting, 0u);
  EXPECT_EQ(st.errors, 0u);
  initiator_.reset();
  for (auto& t : targets) t->Stop();
}

// A Stream message's ops arrive as one batch: every op moves its bytes, each callback runs
// exactly once, and the batch reuses links per destination.
TEST_F(TcpInitiatorTest, SubmitBatchMovesEveryOpOnce) {
  TcpInitiatorOptions o;
  o.chunk_bytes = 64 << 10;
  o.max_links_per_target = o.links_per_target;
  StartInitiator(o);
  std::shared_ptr<TcpTarget> other = StartTarget();
  ASSERT_NE(other, nullptr);
  ClientMemory client(*target_, 8 << 20, 1);
  ClientMemory client2(*other, 8 << 20, 2);
  StoreMemory store(8 << 20, 3);
  constexpr int kOps = 96;
  constexpr uint64_t kSlot = 80 << 10;  // > chunk_bytes: some ops span two chunks
  std::vector<Submission> batch(kOps);
  std::vector<OpWaiter> waiters(kOps);
  for (int i = 0; i < kOps; ++i) {
    ClientMemory& c = i % 2 ? client2 : client;
    const uint16_t port = i % 2 ? other->port() : target_->port();
    const uint64_t len = 1 + (i * 7919) % kSlot;
    batch[i].op = MakeOp(Direction::kStoreToClient, store.at(i * kSlot), len,
                         c.address(i * kSlot), c.rkey(), port);
    batch[i].done = waiters[i].Callback();
  }
  initiator_->SubmitBatch(batch);
  for (int i = 0; i < kOps; ++i) {
    ASSERT_TRUE(batch[i].status.ok()) << "op " << i << ": " << batch[i].status;
    ASSERT_TRUE(waiters[i].Wait().ok()) << "op " << i;
    ClientMemory& c = i % 2 ? client2 : client;
    const uint64_t len = 1 + (i * 7919) % kSlot;
    EXPECT_EQ(PatternMismatch(store.seed(), i * kSlot, c.span(i * kSlot, len)), std::nullopt)
        << "op " << i;
  }
  for (auto& w : waiters) EXPECT_EQ(w.calls(), 1);
  EXPECT_EQ(initiator_->stats().clients, 2u);
  EXPECT_LE(initiator_->stats().in_use, 2 * o.links_per_target);
  initiator_.reset();
  other->Stop();
}

// A receiver that polls before it sleeps moves the same bytes, in both directions.
TEST_F(TcpInitiatorTest, APollingReceiverMovesTheSameBytes) {
  TcpInitiatorOptions o;
  o.link.poll_spin = absl::Microseconds(50);
  StartInitiator(o);
  ClientMemory client(*target_, 1 << 20, 1);
  StoreMemory store(1 << 20, 2);
  for (int i = 0; i < 200; ++i) {
    // Each direction on its own half, so no op reads what the other direction wrote.
    const Direction d = i % 2 ? Direction::kStoreToClient : Direction::kClientToStore;
    const size_t off = (i * 4099) % (256 << 10) + (d == Direction::kStoreToClient ? 0 : 512 << 10);
    ASSERT_TRUE(Run(MakeOp(d, store.at(off), 4096 + i, client.address(off), client.rkey(),
                           target_->port()))
                    .ok())
        << "op " << i;
    if (d == Direction::kStoreToClient) {
      ASSERT_EQ(PatternMismatch(store.seed(), off, client.span(off, 4096 + i)), std::nullopt);
    } else {
      ASSERT_EQ(PatternMismatch(client.seed(), ClientMemory::kGuard + off,
                                store.span(off, 4096 + i)),
                std::nullopt);
    }
  }
}

TEST_F(TcpInitiatorTest, ShutdownCancelsQueuedOps) {
  TcpInitiatorOptions o;
  o.chunk_bytes = 64 << 10;
  StartInitiator(o);
  SilentTarget silent;
  StoreMemory store(16 << 20, 1);
  // Enough bytes that most chunks are still queued behind full socket buffers.
  constexpr int kOps = 8;
  std::vector<OpWaiter> waiters(kOps);
  for (int i = 0; i < kOps; ++i) {
    ASSERT_TRUE(initiator_->Submit(MakeOp(i % 2 ? Direction::kClientToStore
                                                : Direction::kStoreToClient,
                                          store.at(i * (2 << 20)), 2 << 20, 0x10000, 7,
                                          silent.port()),
                                   waiters[i].Callback())
                    .ok());
  }
  initiator_->Shutdown();
  for (int i = 0; i < kOps; ++i) {
    absl::Status s = waiters[i].Wait();
    EXPECT_TRUE(absl::IsCancelled(s)) << "op " << i << ": " << s;
    EXPECT_EQ(waiters[i].calls(), 1);
  }
  EXPECT_EQ(initiator_->stats().in_use, 0u);

  OpWaiter late;
  absl::Status s = initiator_->Submit(
      MakeOp(Direction::kStoreToClient, store.at(0), 4096, 0x10000, 7, silent.port()),
      late.Callback());
  EXPECT_TRUE(absl::IsCancelled(s)) << s;
  initiator_->Shutdown();  // idempotent
  EXPECT_EQ(late.calls(), 0);
}

// Idle closing must never fail an op that was just handed to the link: with an idle timeout far
// shorter than the housekeeping period, every housekeeping pass races the next Submit.
TEST_F(TcpInitiatorTest, IdleClosingNeverFailsANewOp) {
  TcpInitiatorOptions o;
  o.idle_timeout = absl::Nanoseconds(1);
  o.links_per_target = 1;
  StartInitiator(o);
  ClientMemory client(*target_, 1 << 20, 1);
  StoreMemory store(1 << 20, 2);
  // Enough ops from several threads to span many housekeeping passes.
  std::atomic<int> failed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20000 && failed.load() == 0; ++i) {
        const size_t off = t * 4096 + i % 1000;
        absl::Status s = Run(MakeOp(Direction::kStoreToClient, store.at(off), 64,
                                    client.address(off), client.rkey(), target_->port()));
        if (!s.ok()) {
          failed.fetch_add(1);
          ADD_FAILURE() << "thread " << t << " op " << i << ": " << s;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failed.load(), 0);
}

// Responses that arrive together complete as one burst: each op's completion finds a
// CompletionBatch open on the link's receiver, and what the completions defer (a stream's next
// response message) runs once, after the last of them. A hand-made target reads every request
// first and then answers them all with one write, so the daemon side has them all buffered.
TEST_F(TcpInitiatorTest, ResponsesThatArriveTogetherCompleteAsOneBurst) {
  constexpr int kOps = 24;
  constexpr uint32_t kLen = 16;
  uint16_t port = 0;
  absl::StatusOr<ScopedFd> listener = ListenTcp("127.0.0.1", 0, 4, &port);
  ASSERT_TRUE(listener.ok()) << listener.status();
  const std::string secret(32, 'b');
  RememberSecret(port, secret);
  std::thread answerer([&] {
    ScopedFd fd(::accept4(listener->get(), nullptr, nullptr, SOCK_CLOEXEC));
    ASSERT_TRUE(fd.valid());
    ASSERT_TRUE(tcpwire::AnswerChallenge(fd.get(), secret, absl::Now() + absl::Seconds(30)).ok());
    std::vector<std::byte> acks(kOps * tcpwire::kHeaderSize);
    for (int i = 0; i < kOps; ++i) {
      std::array<std::byte, tcpwire::kHeaderSize> raw;
      ASSERT_TRUE(ReadFull(fd.get(), raw.data(), raw.size()).ok());
      absl::StatusOr<tcpwire::Header> h = tcpwire::Decode(raw, tcpwire::kMaxPayload);
      ASSERT_TRUE(h.ok()) << h.status();
      std::array<std::byte, kLen> payload;
      ASSERT_TRUE(ReadFull(fd.get(), payload.data(), h->length).ok());
      h->opcode = tcpwire::Opcode::kWriteAck;
      tcpwire::Encode(*h, std::span<std::byte, tcpwire::kHeaderSize>(
                              acks.data() + i * tcpwire::kHeaderSize, tcpwire::kHeaderSize));
    }
    ASSERT_TRUE(WriteFull(fd.get(), acks.data(), acks.size()).ok());
    std::byte eof;
    (void)ReadFull(fd.get(), &eof, 1);  // hold the link open until the initiator closes it
  });
  StartInitiator({});
  StoreMemory store(kOps * kLen, 1);
  struct Seen {
    absl::Mutex mu;
    int completed = 0;
    int outside_batch = 0;
    std::vector<int> completed_at_flush;
  } seen;
  const int key = 0;
  std::vector<Submission> batch(kOps);
  std::vector<OpWaiter> waiters(kOps);
  for (int i = 0; i < kOps; ++i) {
    batch[i].op = MakeOp(Direction::kStoreToClient, store.at(i * kLen), kLen, 0x1000 + i * kLen,
                         7, port);
    batch[i].done = [&seen, &key, done = waiters[i].Callback()](absl::Status s) {
      {
        absl::MutexLock lock(&seen.mu);
        ++seen.completed;
      }
      const bool deferred = CompletionBatch::Defer(&key, [&seen] {
        absl::MutexLock lock(&seen.mu);
        seen.completed_at_flush.push_back(seen.completed);
      });
      if (!deferred) {
        absl::MutexLock lock(&seen.mu);
        ++seen.outside_batch;
      }
      done(std::move(s));
    };
  }
  initiator_->SubmitBatch(batch);
  for (int i = 0; i < kOps; ++i) {
    ASSERT_TRUE(batch[i].status.ok()) << batch[i].status;
    EXPECT_TRUE(waiters[i].Wait().ok()) << "op " << i;
  }
  initiator_.reset();  // closes the link: the answerer sees EOF
  answerer.join();
  absl::MutexLock lock(&seen.mu);
  EXPECT_EQ(seen.outside_batch, 0);
  EXPECT_EQ(seen.completed_at_flush, std::vector<int>{kOps});
}

// A client that names its piece size (TcpEndpoint.chunk_bytes: its GPU staging slot) gets its
// bytes cut into exactly those pieces, smaller or larger than the daemon's chunk, both ways (a
// Read's answer of 2 MiB passes the link's frame check); one that names none gets the daemon's.
// A hand-made target on one link records each request and answers Reads from a pattern.
TEST_F(TcpInitiatorTest, AnOpIsCutIntoThePiecesItsClientAskedFor) {
  uint16_t port = 0;
  absl::StatusOr<ScopedFd> listener = ListenTcp("127.0.0.1", 0, 4, &port);
  ASSERT_TRUE(listener.ok()) << listener.status();
  const std::string secret(32, 'c');
  RememberSecret(port, secret);
  StoreMemory source(4 << 20, 7);  // the client memory Reads take, at remote address 0
  absl::Mutex mu;
  std::vector<std::pair<tcpwire::Opcode, uint32_t>> seen;
  std::thread answerer([&] {
    ScopedFd fd(::accept4(listener->get(), nullptr, nullptr, SOCK_CLOEXEC));
    ASSERT_TRUE(fd.valid());
    ASSERT_TRUE(tcpwire::AnswerChallenge(fd.get(), secret, absl::Now() + absl::Seconds(30)).ok());
    std::vector<std::byte> payload;
    std::array<std::byte, tcpwire::kHeaderSize> raw;
    while (ReadFull(fd.get(), raw.data(), raw.size()).ok()) {  // until the initiator closes
      absl::StatusOr<tcpwire::Header> h = tcpwire::Decode(raw, tcpwire::kMaxPayload);
      ASSERT_TRUE(h.ok()) << h.status();
      {
        absl::MutexLock lock(&mu);
        seen.emplace_back(h->opcode, h->length);
      }
      const bool write = h->opcode == tcpwire::Opcode::kWriteReq;
      if (write) {
        payload.resize(h->length);
        ASSERT_TRUE(ReadFull(fd.get(), payload.data(), h->length).ok());
      }
      h->opcode = write ? tcpwire::Opcode::kWriteAck : tcpwire::Opcode::kReadData;
      tcpwire::Encode(*h, raw);
      ASSERT_TRUE(WriteFull(fd.get(), raw.data(), raw.size()).ok());
      if (!write) {
        ASSERT_TRUE(WriteFull(fd.get(), source.at(h->address), h->length).ok());
      }
    }
  });
  TcpInitiatorOptions o;
  o.links_per_target = 1;
  o.max_links_per_target = 1;  // one link: the target sees every request in order
  StartInitiator(o);
  auto asking = [](TransferOp op, uint32_t chunk) {
    auto d = std::make_shared<TcpDestination>(*DestinationOf<TcpDestination>(op));
    d->chunk_bytes = chunk;
    op.destination = std::move(d);
    return op;
  };
  using tcpwire::Opcode;
  using Seen = std::vector<std::pair<Opcode, uint32_t>>;
  auto take = [&] {
    absl::MutexLock lock(&mu);
    return std::exchange(seen, {});
  };
  StoreMemory store(4 << 20, 1);
  ASSERT_TRUE(
      Run(asking(MakeOp(Direction::kStoreToClient, store.at(0), 768 << 10, 0, 7, port), 256 << 10))
          .ok());
  EXPECT_EQ(take(), (Seen{{Opcode::kWriteReq, 256 << 10},
                          {Opcode::kWriteReq, 256 << 10},
                          {Opcode::kWriteReq, 256 << 10}}));
  absl::Status read =
      Run(asking(MakeOp(Direction::kClientToStore, store.at(0), 3 << 20, 0, 7, port), 2 << 20));
  ASSERT_TRUE(read.ok()) << read;
  EXPECT_EQ(take(), (Seen{{Opcode::kReadReq, 2 << 20}, {Opcode::kReadReq, 1 << 20}}));
  EXPECT_EQ(std::memcmp(store.at(0), source.at(0), 3 << 20), 0);
  ASSERT_TRUE(Run(MakeOp(Direction::kStoreToClient, store.at(0), 1536 << 10, 0, 7, port)).ok());
  EXPECT_EQ(take(), (Seen{{Opcode::kWriteReq, 1 << 20}, {Opcode::kWriteReq, 512 << 10}}));
  initiator_.reset();  // closes the link: the answerer sees EOF
  answerer.join();
}

}  // namespace
}  // namespace gdr::tcp_initiator_test
