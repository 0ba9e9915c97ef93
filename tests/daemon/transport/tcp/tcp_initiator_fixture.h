// What the tcp initiator's end-to-end tests share: client memory registered with the client
// library's real tcp target, store memory, targets of the tests' own that misbehave (refuse,
// never answer, are no target at all), and the fixture that runs a TcpInitiator against them.
#pragma once

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
#include "common/base/pattern.h"
#include "common/base/socket.h"
#include "common/wire/tcp_proof.h"
#include "daemon/transport/tcp/tcp_destination.h"
#include "daemon/transport/tcp/tcp_initiator.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

// Not in an anonymous namespace: the fixture is one class across the test's source files.
namespace gdr::tcp_initiator_test {

using ::testing::HasSubstr;

// Bound on waiting for one op: only a hang would reach it; it turns a hang into a failure.
inline constexpr auto kHangGuard = std::chrono::seconds(60);

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

inline uint32_t WrongRkey(uint32_t rkey) { return rkey == 0xFFFFFFFFu ? 1 : rkey + 1; }

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
inline absl::Mutex secrets_mu;
inline std::map<uint16_t, std::string>& Secrets() {
  static std::map<uint16_t, std::string> m;
  return m;
}
inline void RememberSecret(uint16_t port, std::string secret) {
  absl::MutexLock lock(&secrets_mu);
  Secrets()[port] = std::move(secret);
}
inline std::string SecretOf(uint16_t port) {
  absl::MutexLock lock(&secrets_mu);
  auto it = Secrets().find(port);
  return it == Secrets().end() ? std::string(32, 'u') : it->second;
}
// Where the test's ops come from, as gRPC would report it.
inline constexpr char kCaller[] = "ipv4:127.0.0.1:40000";

inline std::shared_ptr<TcpTarget> StartTarget() {
  absl::StatusOr<std::shared_ptr<TcpTarget>> t = TcpTarget::Start("127.0.0.1", 0, 256);
  EXPECT_TRUE(t.ok()) << t.status();
  if (!t.ok()) return nullptr;
  RememberSecret((*t)->port(), (*t)->secret());
  return *t;
}

// A loopback listener for a target of the test's own: ops naming its port carry `secret`.
inline ScopedFd ListenAsTarget(const std::string& secret, uint16_t* port) {
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

// `op`'s tcp destination made the op's own, so that a test may change it (ops share theirs).
inline TcpDestination& MutableTcp(TransferOp& op) {
  auto mine = std::make_shared<TcpDestination>(*DestinationOf<TcpDestination>(op));
  op.destination = mine;
  return *mine;
}

inline TransferOp MakeOp(Direction d, std::byte* local, uint64_t length, uint64_t remote,
                         uint32_t rkey, uint16_t port) {
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

}  // namespace gdr::tcp_initiator_test
