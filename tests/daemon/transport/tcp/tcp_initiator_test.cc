// Unit tests of the tcp initiator pool (daemon/transport/tcp/tcp_initiator.h) over real
// loopback sockets, against the client library's real tcp target
// (client/src/transport/tcp/tcp_target.h) in this process, and against test-owned sockets that
// misbehave (refuse, never answer).
#include "daemon/transport/tcp/tcp_initiator.h"

#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <future>
#include <map>
#include <memory>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/src/transport/tcp/tcp_target.h"
#include "common/base/completion_batch.h"
#include "common/base/pattern.h"
#include "common/base/socket.h"
#include "common/wire/tcp_proof.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gdr {
namespace {

using ::testing::HasSubstr;

// Bound on waiting for one op: only a hang would reach it; it turns a hang into a failure.
constexpr auto kHangGuard = std::chrono::seconds(60);

// Completion of one op: counts calls, so "exactly once" and "never" can be checked. Shared with
// the callback, so a late call after a failed test touches nothing freed.
class OpWaiter {
 public:
  OpWaiter() : state_(std::make_shared<State>()), future_(state_->promise.get_future()) {}

  OpDone Callback() {
    return [state = state_](absl::Status s) {
      if (state->calls.fetch_add(1) == 0) state->promise.set_value(std::move(s));
    };
  }
  // The op's final status; INTERNAL "never completed" if it hangs.
  absl::Status Wait() {
    if (future_.wait_for(kHangGuard) != std::future_status::ready) {
      return absl::InternalError("op never completed");
    }
    return future_.get();
  }
  int calls() const { return state_->calls.load(); }

 private:
  struct State {
    std::promise<absl::Status> promise;
    std::atomic<int> calls{0};
  };
  std::shared_ptr<State> state_;
  std::future<absl::Status> future_;
};

// Client memory: a region registered with a target, with guard bytes on both sides. The whole
// buffer starts as a known pattern so any stray write is visible.
class ClientMemory {
 public:
  static constexpr size_t kGuard = 4096;
  ClientMemory(TcpTarget& target, size_t size, uint64_t salt)
      : seed_(PatternSeed("client", salt)), buf_(size + 2 * kGuard) {
    PatternFill(seed_, 0, buf_);
    region_ = std::make_shared<Region>();
    region_->host = buf_.data() + kGuard;
    region_->base = reinterpret_cast<uint64_t>(region_->host);
    region_->size = size;
    target.Register(region_);
  }
  uint64_t address(size_t off) const { return region_->base + off; }
  uint32_t rkey() const { return region_->rkey; }
  size_t size() const { return region_->size; }
  std::span<const std::byte> span(size_t off, size_t len) const {
    return {region_->host + off, len};
  }
  // Index into the region of the first byte not holding its initial pattern, outside
  // [skip_off, skip_off + skip_len); also checks the guards. -1 when all intact.
  int64_t FirstChangedOutside(size_t skip_off = 0, size_t skip_len = 0) const {
    const size_t a = kGuard + skip_off, b = kGuard + skip_off + skip_len;
    if (auto m = PatternMismatch(seed_, 0, {buf_.data(), a})) return int64_t(*m) - kGuard;
    if (auto m = PatternMismatch(seed_, b, {buf_.data() + b, buf_.size() - b}))
      return int64_t(b + *m) - kGuard;
    return -1;
  }
  uint64_t seed() const { return seed_; }

 private:
  uint64_t seed_;
  std::vector<std::byte> buf_;
  std::shared_ptr<Region> region_;
};

// Daemon-side memory filled with a pattern.
class StoreMemory {
 public:
  StoreMemory(size_t size, uint64_t salt) : seed_(PatternSeed("store", salt)), buf_(size) {
    PatternFill(seed_, 0, buf_);
  }
  std::byte* at(size_t off) { return buf_.data() + off; }
  std::span<const std::byte> span(size_t off, size_t len) const { return {buf_.data() + off, len}; }
  int64_t FirstChangedOutside(size_t skip_off = 0, size_t skip_len = 0) const {
    if (auto m = PatternMismatch(seed_, 0, {buf_.data(), skip_off})) return int64_t(*m);
    const size_t b = skip_off + skip_len;
    if (auto m = PatternMismatch(seed_, b, {buf_.data() + b, buf_.size() - b}))
      return int64_t(b + *m);
    return -1;
  }
  uint64_t seed() const { return seed_; }

 private:
  uint64_t seed_;
  std::vector<std::byte> buf_;
};

uint32_t WrongRkey(uint32_t rkey) { return rkey == 0xFFFFFFFFu ? 1 : rkey + 1; }

// A loopback port that refuses connections: bound (nobody else can take it) but not listening.
struct ClosedPort {
  ClosedPort() {
    fd = ScopedFd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    socklen_t len = sizeof(addr);
    ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&addr), &len);
    port = ntohs(addr.sin_port);
  }
  ScopedFd fd;
  uint16_t port = 0;
};

// The endpoint secret of each test target, by port, so MakeOp fills endpoints as the client
// library does. A port nobody registered gets a secret no target holds.
absl::Mutex secrets_mu;
std::map<uint16_t, std::string>& Secrets() {
  static std::map<uint16_t, std::string> m;
  return m;
}
void RememberSecret(uint16_t port, std::string secret) {
  absl::MutexLock lock(&secrets_mu);
  Secrets()[port] = std::move(secret);
}
std::string SecretOf(uint16_t port) {
  absl::MutexLock lock(&secrets_mu);
  auto it = Secrets().find(port);
  return it == Secrets().end() ? std::string(32, 'u') : it->second;
}
// Where the test's ops come from, as gRPC would report it.
constexpr char kCaller[] = "ipv4:127.0.0.1:40000";

std::shared_ptr<TcpTarget> StartTarget() {
  absl::StatusOr<std::shared_ptr<TcpTarget>> t = TcpTarget::Start("127.0.0.1", 0, 256);
  EXPECT_TRUE(t.ok()) << t.status();
  if (!t.ok()) return nullptr;
  RememberSecret((*t)->port(), (*t)->secret());
  return *t;
}

// A loopback listener for a target of the test's own: ops naming its port carry `secret`.
ScopedFd ListenAsTarget(const std::string& secret, uint16_t* port) {
  absl::StatusOr<ScopedFd> l = ListenTcp("127.0.0.1", 0, 16, port);
  EXPECT_TRUE(l.ok()) << l.status();
  if (!l.ok()) return ScopedFd();
  RememberSecret(*port, secret);
  return std::move(*l);
}

// A target that accepts connections, proves it holds its secret and then never answers:
// requests sit in its socket buffer.
class SilentTarget {
 public:
  SilentTarget() {
    listener_ = ListenAsTarget(secret_, &port_);
    acceptor_ = std::thread([this] {
      for (;;) {
        int fd = ::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC);
        if (fd < 0) return;  // listener shut down
        // Fails when the initiator gives up first (shutdown mid-opening); the link is then dead.
        (void)tcpwire::AnswerChallenge(fd, secret_, absl::Now() + absl::Seconds(30));
        absl::MutexLock lock(&mu_);
        accepted_.emplace_back(fd);
      }
    });
  }
  ~SilentTarget() {
    ::shutdown(listener_.get(), SHUT_RDWR);
    acceptor_.join();
  }
  uint16_t port() const { return port_; }
  size_t accepted() {
    absl::MutexLock lock(&mu_);
    return accepted_.size();
  }

 private:
  uint16_t port_ = 0;
  const std::string secret_ = std::string(32, 's');
  ScopedFd listener_;
  absl::Mutex mu_;
  std::vector<ScopedFd> accepted_ ABSL_GUARDED_BY(mu_);
  std::thread acceptor_;
};


// A listener of the test's own: accepts one connection, optionally plays the opening of a
// target (a HELLO, then after the CHALLENGE a PROOF of `proof_secret`), and records every byte
// it receives after that until EOF. With no opening it is a plain socket that is not a target.
class RecordingListener {
 public:
  enum class Mode { kPlain, kHelloThenWrongProof };
  explicit RecordingListener(Mode mode, const std::string& host = "127.0.0.1") : mode_(mode) {
    absl::StatusOr<ScopedFd> l = ListenTcp(host, 0, 4, &port_);
    EXPECT_TRUE(l.ok()) << l.status();
    listener_ = std::move(*l);
    thread_ = std::thread([this] { Serve(); });
  }
  ~RecordingListener() {
    ::shutdown(listener_.get(), SHUT_RDWR);
    thread_.join();
  }
  uint16_t port() const { return port_; }
  // Waits until the peer closed; then: connections accepted, bytes received after the opening.
  void WaitDone() {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(&done_));
  }
  size_t accepted() {
    absl::MutexLock lock(&mu_);
    return accepted_;
  }
  size_t received() {
    absl::MutexLock lock(&mu_);
    return received_;
  }
  bool challenged() {
    absl::MutexLock lock(&mu_);
    return challenged_;
  }

 private:
  void Serve() {
    ScopedFd fd(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
    {
      absl::MutexLock lock(&mu_);
      if (fd.valid()) ++accepted_;
    }
    if (fd.valid() && mode_ == Mode::kHelloThenWrongProof) {
      std::array<std::byte, tcpwire::kHandshakeFrameSize> frame;
      tcpwire::HandshakeBody nonce{};
      tcpwire::EncodeHandshake(tcpwire::Opcode::kHello, nonce, frame);
      EXPECT_TRUE(WriteFull(fd.get(), frame.data(), frame.size()).ok());
      if (ReadFull(fd.get(), frame.data(), frame.size()).ok() &&
          tcpwire::DecodeHandshake(frame, tcpwire::Opcode::kChallenge).ok()) {
        absl::MutexLock lock(&mu_);
        challenged_ = true;
      }
      // The proof of a secret the op does not carry.
      tcpwire::EncodeHandshake(tcpwire::Opcode::kProof,
                               tcpwire::ComputeProof(std::string(32, 'z'), nonce, nonce), frame);
      (void)WriteFull(fd.get(), frame.data(), frame.size());
    }
    char buf[4096];
    for (ssize_t n; fd.valid() && (n = ::recv(fd.get(), buf, sizeof(buf), 0)) != 0;) {
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) break;
      absl::MutexLock lock(&mu_);
      received_ += static_cast<size_t>(n);
    }
    absl::MutexLock lock(&mu_);
    done_ = true;
  }
  const Mode mode_;
  uint16_t port_ = 0;
  ScopedFd listener_;
  absl::Mutex mu_;
  size_t accepted_ ABSL_GUARDED_BY(mu_) = 0;
  size_t received_ ABSL_GUARDED_BY(mu_) = 0;
  bool challenged_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

// A target of the test's own that answers every request at once (write payloads are read and
// dropped, reads get zeros) and counts the requests each connection carried.
class CountingTarget {
 public:
  CountingTarget() {
    listener_ = ListenAsTarget(secret_, &port_);
    acceptor_ = std::thread([this] {
      for (int conn = 0;; ++conn) {
        int fd = ::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC);
        if (fd < 0) return;
        absl::MutexLock lock(&mu_);
        counts_.push_back(0);
        servers_.emplace_back([this, fd, conn] { Serve(ScopedFd(fd), conn); });
      }
    });
  }
  ~CountingTarget() {
    ::shutdown(listener_.get(), SHUT_RDWR);
    acceptor_.join();
    for (auto& t : servers_) t.join();  // each ends when the initiator closes its link
  }
  uint16_t port() const { return port_; }
  std::vector<int> counts() {
    absl::MutexLock lock(&mu_);
    return counts_;
  }

 private:
  void Serve(ScopedFd fd, int conn) {
    if (!tcpwire::AnswerChallenge(fd.get(), secret_, absl::Now() + absl::Seconds(30)).ok()) return;
    std::vector<std::byte> payload;
    for (;;) {
      std::array<std::byte, tcpwire::kHeaderSize> raw;
      if (!ReadFull(fd.get(), raw.data(), raw.size()).ok()) return;
      absl::StatusOr<tcpwire::Header> h = tcpwire::Decode(raw, tcpwire::kMaxPayload);
      if (!h.ok()) return;
      payload.assign(h->length, std::byte{0});
      if (h->opcode == tcpwire::Opcode::kWriteReq) {
        if (!ReadFull(fd.get(), payload.data(), h->length).ok()) return;
        h->opcode = tcpwire::Opcode::kWriteAck;
      } else {
        h->opcode = tcpwire::Opcode::kReadData;
      }
      tcpwire::Encode(*h, raw);
      {
        absl::MutexLock lock(&mu_);
        ++counts_[conn];
      }
      if (!WriteFull(fd.get(), raw.data(), raw.size()).ok()) return;
      if (h->opcode == tcpwire::Opcode::kReadData &&
          !WriteFull(fd.get(), payload.data(), h->length).ok()) {
        return;
      }
    }
  }
  uint16_t port_ = 0;
  const std::string secret_ = std::string(32, 'c');
  ScopedFd listener_;
  absl::Mutex mu_;
  std::vector<int> counts_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> servers_;  // written by the acceptor only; joined after it
  std::thread acceptor_;
};

// `op`'s tcp destination made the op's own, so that a test may change it (ops share theirs).
TcpDestination& MutableTcp(TransferOp& op) {
  auto mine = std::make_shared<TcpDestination>(*DestinationOf<TcpDestination>(op));
  op.destination = mine;
  return *mine;
}

TransferOp MakeOp(Direction d, std::byte* local, uint64_t length, uint64_t remote, uint32_t rkey,
                  uint16_t port) {
  TransferOp op;
  op.direction = d;
  op.volume = "vol0";
  op.local = local;
  op.length = length;
  op.remote_address = remote;
  op.rkey = rkey;
  op.destination = std::make_shared<const TcpDestination>("127.0.0.1", port, SecretOf(port));
  op.caller = kCaller;
  return op;
}

class TcpInitiatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    target_ = StartTarget();
    ASSERT_NE(target_, nullptr);
  }
  void TearDown() override {
    // Initiator first: it must not touch target or memory after they go.
    initiator_.reset();
    if (target_) target_->Stop();
  }
  void StartInitiator(TcpInitiatorOptions options) {
    initiator_.reset();
    absl::StatusOr<std::unique_ptr<TcpInitiator>> i = TcpInitiator::Create(options);
    ASSERT_TRUE(i.ok()) << i.status();
    initiator_ = std::move(*i);
  }
  // Submits and waits; Submit's own refusal is returned as is.
  absl::Status Run(const TransferOp& op) {
    OpWaiter w;
    absl::Status s = initiator_->Submit(op, w.Callback());
    if (!s.ok()) return s;
    return w.Wait();
  }

  std::shared_ptr<TcpTarget> target_;
  std::unique_ptr<TcpInitiator> initiator_;
};

TEST(TcpInitiatorCreateTest, RejectsBadOptions) {
  TcpInitiatorOptions o;
  o.max_links = 0;
  EXPECT_EQ(TcpInitiator::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
  o = {};
  o.links_per_target = 0;
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

TEST_F(TcpInitiatorTest, BadRkeyIsPermissionDeniedAndTouchesNothing) {
  TcpInitiatorOptions o;
  o.chunk_bytes = 4096;
  StartInitiator(o);
  ClientMemory client(*target_, 1 << 20, 1);
  StoreMemory store(1 << 20, 2);
  const uint32_t bad = WrongRkey(client.rkey());
  // Several chunks, so every one of them must be refused.
  absl::Status s = Run(MakeOp(Direction::kStoreToClient, store.at(0), 5 * 4096 + 3,
                              client.address(0), bad, target_->port()));
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << s;
  EXPECT_THAT(s.message(), HasSubstr("rkey"));
  EXPECT_EQ(client.FirstChangedOutside(), -1);

  s = Run(MakeOp(Direction::kClientToStore, store.at(0), 5 * 4096 + 3, client.address(0), bad,
                 target_->port()));
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << s;
  EXPECT_EQ(store.FirstChangedOutside(), -1);
  EXPECT_GE(target_->stats().refused, 2u);

  // A refusal is an answer, not a broken link: the same links still carry good ops.
  const InitiatorStats before = initiator_->stats();
  ASSERT_TRUE(Run(MakeOp(Direction::kStoreToClient, store.at(0), 4096, client.address(0),
                         client.rkey(), target_->port()))
                  .ok());
  EXPECT_EQ(PatternMismatch(store.seed(), 0, client.span(0, 4096)), std::nullopt);
  EXPECT_EQ(initiator_->stats().in_use, before.in_use);
}

TEST_F(TcpInitiatorTest, OutOfRegionIsPermissionDeniedAndTouchesNothing) {
  StartInitiator({});
  ClientMemory client(*target_, 64 << 10, 1);
  StoreMemory store(1 << 20, 2);
  struct Case {
    uint64_t address;
    uint64_t length;
  } cases[] = {
      {client.address(client.size() - 100), 101},    // one byte past the end
      {client.address(0) - 1, 16},                   // one byte before the start
      {client.address(0), client.size() + 1},        // longer than the region
      {client.address(client.size()), 1},            // starts at the end
  };
  for (const Case& c : cases) {
    for (Direction d : {Direction::kStoreToClient, Direction::kClientToStore}) {
      absl::Status s = Run(MakeOp(d, store.at(0), c.length, c.address, client.rkey(),
                                  target_->port()));
      EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied)
          << "address " << c.address << " length " << c.length << ": " << s;
      EXPECT_EQ(client.FirstChangedOutside(), -1);
      EXPECT_EQ(store.FirstChangedOutside(), -1);
    }
  }
  // The exact region is fine.
  EXPECT_TRUE(Run(MakeOp(Direction::kStoreToClient, store.at(0), client.size(), client.address(0),
                         client.rkey(), target_->port()))
                  .ok());
}

TEST_F(TcpInitiatorTest, ClosedPortIsUnavailable) {
  TcpInitiatorOptions o;
  o.link.connect_timeout = absl::Seconds(30);  // refusal must not wait for the timeout
  StartInitiator(o);
  ClosedPort closed;
  StoreMemory store(1 << 20, 1);
  for (Direction d : {Direction::kStoreToClient, Direction::kClientToStore}) {
    absl::Status s =
        Run(MakeOp(d, store.at(0), 256 << 10, 0x10000, 7, closed.port));
    EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
    EXPECT_THAT(s.message(), HasSubstr(absl::StrCat(closed.port)));
  }
  EXPECT_EQ(store.FirstChangedOutside(), -1);
  // Dead links are replaced, not counted against the pool forever.
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(Run(MakeOp(Direction::kStoreToClient, store.at(0), 100, 0x10000, 7, closed.port))
                  .code(),
              absl::StatusCode::kUnavailable);
    EXPECT_LE(initiator_->stats().in_use, o.links_per_target);
  }
  // Each refused connection is a lost link in the stats (all but the newest are reaped).
  EXPECT_GE(initiator_->stats().errors, 20u);
}


// The confused deputy: an op naming a listener that is not a target (someone else's service on
// the caller's host). The listener gets not one byte; the op is PERMISSION_DENIED.
TEST_F(TcpInitiatorTest, AListenerThatIsNotATargetGetsNoByte) {
  TcpInitiatorOptions o;
  o.link.connect_timeout = absl::Milliseconds(300);
  StartInitiator(o);
  StoreMemory store(1 << 20, 1);
  for (Direction d : {Direction::kStoreToClient, Direction::kClientToStore}) {
    RecordingListener plain(RecordingListener::Mode::kPlain);
    absl::Status s = Run(MakeOp(d, store.at(0), 4128, 0x10000, 7, plain.port()));
    EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << s;
    EXPECT_THAT(s.message(), HasSubstr("did not prove it holds the endpoint's secret"));
    EXPECT_THAT(s.message(), HasSubstr(absl::StrCat("127.0.0.1:", plain.port())));
    plain.WaitDone();
    EXPECT_EQ(plain.accepted(), 1u);
    EXPECT_EQ(plain.received(), 0u);
  }
  EXPECT_EQ(store.FirstChangedOutside(), -1);
}

// A peer that speaks the opening but cannot prove the secret gets the CHALLENGE and nothing
// after it; for a Read, the store keeps its bytes.
TEST_F(TcpInitiatorTest, AWrongProofIsPermissionDeniedAndNothingFollowsTheChallenge) {
  StartInitiator({});
  StoreMemory store(1 << 20, 1);
  for (Direction d : {Direction::kStoreToClient, Direction::kClientToStore}) {
    RecordingListener fake(RecordingListener::Mode::kHelloThenWrongProof);
    absl::Status s = Run(MakeOp(d, store.at(0), 3 << 18, 0x10000, 7, fake.port()));
    EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << s;
    EXPECT_THAT(s.message(), HasSubstr("wrong PROOF"));
    fake.WaitDone();
    EXPECT_TRUE(fake.challenged());
    EXPECT_EQ(fake.received(), 0u);
  }
  EXPECT_EQ(store.FirstChangedOutside(), -1);
}

// A link proved for one secret is never handed an op carrying another, even to the same
// host:port: the wrong secret gets a link of its own, whose proof fails.
TEST_F(TcpInitiatorTest, ALinkProvedForOneSecretNeverCarriesAnother) {
  StartInitiator({});
  ClientMemory client(*target_, 1 << 20, 1);
  StoreMemory store(1 << 20, 2);
  TransferOp good = MakeOp(Direction::kClientToStore, store.at(0), 4096, client.address(0),
                           client.rkey(), target_->port());
  ASSERT_TRUE(Run(good).ok());
  const uint64_t accepted = target_->stats().accepted;
  for (Direction d : {Direction::kStoreToClient, Direction::kClientToStore}) {
    TransferOp wrong = MakeOp(d, store.at(4096), 8192, client.address(4096), client.rkey(),
                              target_->port());
    MutableTcp(wrong).secret = DestinationOf<TcpDestination>(good)->secret;
    MutableTcp(wrong).secret[5] ^= 1;
    absl::Status s = Run(wrong);
    EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << s;
    EXPECT_THAT(s.message(), HasSubstr("did not prove"));
    EXPECT_THAT(std::string(s.message()), ::testing::Not(HasSubstr(DestinationOf<TcpDestination>(wrong)->secret)));
  }
  EXPECT_GT(target_->stats().accepted, accepted);  // a link of its own, not the proved one
  EXPECT_EQ(client.FirstChangedOutside(), -1);
  EXPECT_EQ(store.FirstChangedOutside(0, 4096), -1);
  // The right secret still rides its proved link.
  EXPECT_TRUE(Run(good).ok());
}

// A target that is not the caller's own address is refused before any connection; an allowed
// CIDR lets it through.
TEST_F(TcpInitiatorTest, TargetOutsideTheCallersAddressIsRefusedWithoutAConnection) {
  absl::StatusOr<std::shared_ptr<TcpTarget>> t2 = TcpTarget::Start("127.0.0.2", 0, 16);
  if (!t2.ok()) GTEST_SKIP() << "cannot listen on 127.0.0.2: " << t2.status();
  ClientMemory client(**t2, 1 << 20, 1);
  StoreMemory store(1 << 20, 2);
  StartInitiator({});
  TransferOp op = MakeOp(Direction::kStoreToClient, store.at(0), 4096, client.address(0),
                         client.rkey(), (*t2)->port());
  MutableTcp(op).host = "127.0.0.2";
  MutableTcp(op).secret = (*t2)->secret();
  OpWaiter w;
  absl::Status s = initiator_->Submit(op, w.Callback());
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << s;
  EXPECT_THAT(s.message(), HasSubstr(absl::StrCat("127.0.0.2:", (*t2)->port())));
  EXPECT_THAT(s.message(), HasSubstr(kCaller));
  EXPECT_THAT(s.message(), HasSubstr("--tcp-target-allow"));
  EXPECT_EQ(w.calls(), 0);
  EXPECT_EQ(initiator_->stats().in_use, 0u);
  // A host name is checked on every address it resolves to, before connecting.
  MutableTcp(op).host = "localhost";
  op.caller = "ipv4:10.1.2.3:5000";
  s = Run(op);
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << s;
  EXPECT_THAT(s.message(), HasSubstr("localhost"));
  EXPECT_EQ((*t2)->stats().accepted, 0u);

  TcpInitiatorOptions o;
  o.target_allow.push_back(*Cidr::Parse("127.0.0.0/8"));
  StartInitiator(o);
  MutableTcp(op).host = "127.0.0.2";
  op.caller = kCaller;
  EXPECT_TRUE(Run(op).ok());
  EXPECT_EQ(PatternMismatch(store.seed(), 0, client.span(0, 4096)), std::nullopt);
  initiator_.reset();
  (*t2)->Stop();
}

TEST_F(TcpInitiatorTest, SilentTargetIsDeadlineExceeded) {
  TcpInitiatorOptions o;
  o.op_timeout = absl::Milliseconds(300);
  StartInitiator(o);
  SilentTarget silent;
  StoreMemory store(4 << 20, 1);
  for (Direction d : {Direction::kStoreToClient, Direction::kClientToStore}) {
    // Larger than the socket buffers for writes: the sender is blocked mid-send when it fails.
    for (uint64_t length : {uint64_t{4096}, uint64_t{4} << 20}) {
      OpWaiter w;
      ASSERT_TRUE(initiator_->Submit(MakeOp(d, store.at(0), length, 0x10000, 7, silent.port()),
                                     w.Callback())
                      .ok());
      absl::Status s = w.Wait();
      EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
      EXPECT_EQ(w.calls(), 1);
    }
  }
  EXPECT_GE(silent.accepted(), 1u);
  EXPECT_EQ(store.FirstChangedOutside(), -1);
}

TEST_F(TcpInitiatorTest, LinksAreReusedPerDestination) {
  TcpInitiatorOptions o;
  o.chunk_bytes = 4096;
  o.links_per_target = 2;
  StartInitiator(o);
  std::shared_ptr<TcpTarget> other = StartTarget();
  ASSERT_NE(other, nullptr);
  ClientMemory client(*target_, 1 << 20, 1);
  ClientMemory client2(*other, 1 << 20, 2);
  StoreMemory store(1 << 20, 3);
  for (int i = 0; i < 200; ++i) {
    ClientMemory& c = i % 2 ? client : client2;
    const uint16_t port = i % 2 ? target_->port() : other->port();
    const Direction d = i % 3 ? Direction::kStoreToClient : Direction::kClientToStore;
    ASSERT_TRUE(
        Run(MakeOp(d, store.at(i * 4096), 3 * 4096, c.address(i * 4096), c.rkey(), port)).ok())
        << "op " << i;
    const InitiatorStats st = initiator_->stats();
    ASSERT_LE(st.in_use, 2 * o.links_per_target) << "op " << i;
    ASSERT_LE(st.clients, 2u);
  }
  EXPECT_EQ(initiator_->stats().clients, 2u);
  // The targets saw no more connections than links exist.
  EXPECT_LE(target_->stats().connections, o.links_per_target);
  EXPECT_LE(other->stats().connections, o.links_per_target);
  initiator_.reset();
  other->Stop();
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

TEST_F(TcpInitiatorTest, IdleLinkIsEvictedForAnotherDestination) {
  TcpInitiatorOptions o;
  o.max_links = 1;
  StartInitiator(o);
  std::shared_ptr<TcpTarget> other = StartTarget();
  ASSERT_NE(other, nullptr);
  ClientMemory client(*target_, 1 << 20, 1);
  ClientMemory client2(*other, 1 << 20, 2);
  StoreMemory store(1 << 20, 3);
  for (int i = 0; i < 6; ++i) {
    ClientMemory& c = i % 2 ? client2 : client;
    const uint16_t port = i % 2 ? other->port() : target_->port();
    absl::Status s = Run(MakeOp(Direction::kStoreToClient, store.at(0), 100000, c.address(0),
                                c.rkey(), port));
    ASSERT_TRUE(s.ok()) << "op " << i << ": " << s;
    EXPECT_EQ(initiator_->stats().in_use, 1u);
  }
  EXPECT_EQ(PatternMismatch(store.seed(), 0, client2.span(0, 100000)), std::nullopt);
  // Evictions are the pool's choice, not failures.
  EXPECT_EQ(initiator_->stats().errors, 0u);
  initiator_.reset();
  other->Stop();
}

// A Stream message's ops arrive as one batch: every op moves its bytes, each callback runs
// exactly once, and the batch reuses links per destination.
TEST_F(TcpInitiatorTest, SubmitBatchMovesEveryOpOnce) {
  TcpInitiatorOptions o;
  o.chunk_bytes = 64 << 10;
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

// Planning a batch must never close a link that an earlier op of the same batch was planned
// on: with room for one link, the second destination waits until the first's turn is over and
// then gets the link; both ops complete.
TEST_F(TcpInitiatorTest, SubmitBatchNeverEvictsALinkItPlannedOn) {
  TcpInitiatorOptions o;
  o.max_links = 1;
  o.turn = absl::Milliseconds(10);
  StartInitiator(o);
  std::shared_ptr<TcpTarget> other = StartTarget();
  ASSERT_NE(other, nullptr);
  ClientMemory client(*target_, 1 << 20, 1);
  ClientMemory client2(*other, 1 << 20, 2);
  StoreMemory store(1 << 20, 3);
  std::vector<Submission> batch(2);
  OpWaiter first, second;
  batch[0].op = MakeOp(Direction::kStoreToClient, store.at(0), 4096, client.address(0),
                       client.rkey(), target_->port());
  batch[0].done = first.Callback();
  batch[1].op = MakeOp(Direction::kStoreToClient, store.at(0), 4096, client2.address(0),
                       client2.rkey(), other->port());
  batch[1].done = second.Callback();
  initiator_->SubmitBatch(batch);
  EXPECT_TRUE(batch[0].status.ok()) << batch[0].status;
  EXPECT_TRUE(batch[1].status.ok()) << batch[1].status;
  EXPECT_TRUE(first.Wait().ok());
  EXPECT_TRUE(second.Wait().ok());
  EXPECT_EQ(PatternMismatch(store.seed(), 0, client.span(0, 4096)), std::nullopt);
  EXPECT_EQ(PatternMismatch(store.seed(), 0, client2.span(0, 4096)), std::nullopt);
  EXPECT_EQ(initiator_->stats().errors, 0u);
  initiator_.reset();
  EXPECT_EQ(first.calls(), 1);
  EXPECT_EQ(second.calls(), 1);
  other->Stop();
}

// Small ops share one link; a destination gets its second link only once the first carries a
// full chunk, so bulk transfers stripe and small ones do not pay extra thread wake-ups.
TEST_F(TcpInitiatorTest, SecondLinkOnlyForBulk) {
  TcpInitiatorOptions o;
  o.chunk_bytes = 1 << 20;
  o.links_per_target = 2;
  StartInitiator(o);
  ClientMemory client(*target_, 16 << 20, 1);
  StoreMemory store(16 << 20, 2);
  std::vector<Submission> batch(32);
  std::vector<OpWaiter> waiters(32);
  for (int i = 0; i < 32; ++i) {
    batch[i].op = MakeOp(Direction::kStoreToClient, store.at(i * 4096), 4096,
                         client.address(i * 4096), client.rkey(), target_->port());
    batch[i].done = waiters[i].Callback();
  }
  initiator_->SubmitBatch(batch);
  for (int i = 0; i < 32; ++i) ASSERT_TRUE(waiters[i].Wait().ok()) << "op " << i;
  EXPECT_EQ(initiator_->stats().in_use, 1u);
  ASSERT_TRUE(Run(MakeOp(Direction::kStoreToClient, store.at(0), 8 << 20, client.address(0),
                         client.rkey(), target_->port()))
                  .ok());
  EXPECT_EQ(initiator_->stats().in_use, 2u);
  EXPECT_EQ(PatternMismatch(store.seed(), 0, client.span(0, 8 << 20)), std::nullopt);
}

// Once bulk transfers opened a destination's second link, small ops still keep to one link
// (one thread pair, one burst of answers), so a small-op rate does not depend on what ran
// before it.
TEST_F(TcpInitiatorTest, SmallOpsKeepToOneLinkAfterBulkOpenedTwo) {
  TcpInitiatorOptions o;
  o.chunk_bytes = 1 << 20;
  o.links_per_target = 2;
  StartInitiator(o);
  CountingTarget counting;
  StoreMemory store(8 << 20, 1);
  ASSERT_TRUE(Run(MakeOp(Direction::kStoreToClient, store.at(0), 8 << 20, 0x100000, 7,
                         counting.port()))
                  .ok());
  ASSERT_EQ(initiator_->stats().in_use, 2u);
  const std::vector<int> before = counting.counts();
  ASSERT_EQ(before.size(), 2u);
  EXPECT_GT(before[0], 0);
  EXPECT_GT(before[1], 0);
  for (int round = 0; round < 20; ++round) {
    std::vector<Submission> batch(32);
    std::vector<OpWaiter> waiters(32);
    for (int i = 0; i < 32; ++i) {
      batch[i].op = MakeOp(i % 2 ? Direction::kStoreToClient : Direction::kClientToStore,
                           store.at(i * 4096), 4096, 0x100000 + i * 4096, 7, counting.port());
      batch[i].done = waiters[i].Callback();
    }
    initiator_->SubmitBatch(batch);
    for (int i = 0; i < 32; ++i) ASSERT_TRUE(waiters[i].Wait().ok()) << "op " << i;
  }
  const std::vector<int> after = counting.counts();
  ASSERT_EQ(after.size(), 2u);
  const int first = after[0] - before[0], second = after[1] - before[1];
  EXPECT_EQ(first + second, 20 * 32);
  EXPECT_TRUE(first == 0 || second == 0) << first << " and " << second << " small ops";
  initiator_.reset();
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

}  // namespace
}  // namespace gdr
