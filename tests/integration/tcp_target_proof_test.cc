// tcp targets prove they belong to the caller. A real gdrstored on loopback, real
// clients, and listeners of the test's own: a request naming a host:port that is not the
// caller's target moves no byte, whichever way the op goes, and the daemon keeps serving.
//   - a plain listener (someone else's service) gets zero bytes; PERMISSION_DENIED;
//   - a hostile listener that sends data never gets it into the store;
//   - a peer that speaks the opening but cannot prove the secret gets nothing past the
//     CHALLENGE;
//   - a legitimate client's live target named with a wrong secret is refused;
//   - a target on another address than the caller's is refused without a connection, unless
//     --tcp-target-allow covers it.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "client/src/daemon_rpc.h"
#include "common/base/pattern.h"
#include "common/base/socket.h"
#include "common/wire/tcp_frame.h"
#include "gdrstore/client.h"
#include "gmock/gmock.h"
#include "tests/integration/daemon_process.h"
#include "tests/integration/stream_ops.h"
#include "tests/integration/verified_ops.h"

namespace gdr::integ {
namespace {

namespace v1 = gdrstore::v1;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr uint64_t kMiB = 1 << 20;
constexpr uint64_t kVolumeSize = 16 * kMiB;
constexpr size_t kBufferSize = 1 * kMiB;
constexpr uint64_t kOp = 4096;

// A listener of the test's own on `host`: accepts connections and records every byte they
// send it, until the peer closes. kPlain says nothing (a service that is not a target);
// kSendsData pushes bytes at whoever connects (a hostile one: a naive daemon would take them
// for READ_DATA); kWrongProof speaks the target's opening but answers the CHALLENGE with a MAC
// of a secret the request does not carry.
class RecordingListener {
 public:
  enum class Mode { kPlain, kSendsData, kWrongProof };
  static std::unique_ptr<RecordingListener> Start(Mode mode, const std::string& host) {
    std::unique_ptr<RecordingListener> l(new RecordingListener(mode));
    absl::StatusOr<ScopedFd> fd = ListenTcp(host, 0, 16, &l->port_);
    if (!fd.ok()) return nullptr;
    l->listen_fd_ = std::move(*fd);
    l->thread_ = std::thread([raw = l.get()] { raw->AcceptLoop(); });
    return l;
  }
  ~RecordingListener() {
    ::shutdown(listen_fd_.get(), SHUT_RDWR);
    thread_.join();
    for (std::thread& t : conns_) t.join();
  }
  uint16_t port() const { return port_; }
  // Waits until `n` accepted connections have been closed by the daemon.
  bool WaitClosed(size_t n) {
    absl::MutexLock lock(&mu_);
    auto done = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return closed_ >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&done), absl::Seconds(60));
  }
  size_t accepted() {
    absl::MutexLock lock(&mu_);
    return accepted_;
  }
  // Bytes received (after the CHALLENGE, for kWrongProof).
  size_t received() {
    absl::MutexLock lock(&mu_);
    return received_;
  }
  size_t challenges() {
    absl::MutexLock lock(&mu_);
    return challenges_;
  }

 private:
  explicit RecordingListener(Mode mode) : mode_(mode) {}
  void AcceptLoop() {
    for (;;) {
      const int fd = ::accept4(listen_fd_.get(), nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        return;
      }
      absl::MutexLock lock(&mu_);
      ++accepted_;
      conns_.emplace_back([this, fd] { Serve(ScopedFd(fd)); });
    }
  }
  void Serve(ScopedFd fd) {
    if (mode_ == Mode::kSendsData) {
      // What a READ_DATA answer would look like, and plenty of payload behind it.
      std::string junk(256 * 1024, '\x5a');
      tcpwire::Header h;
      h.opcode = tcpwire::Opcode::kReadData;
      h.length = kOp;
      h.tag = 1;
      tcpwire::Encode(h, std::span<std::byte, tcpwire::kHeaderSize>(
                             reinterpret_cast<std::byte*>(junk.data()), tcpwire::kHeaderSize));
      (void)WriteFull(fd.get(), junk.data(), junk.size());
    } else if (mode_ == Mode::kWrongProof) {
      std::array<std::byte, tcpwire::kHandshakeFrameSize> frame;
      tcpwire::HandshakeBody nonce;
      nonce.fill(std::byte{0x11});
      tcpwire::EncodeHandshake(tcpwire::Opcode::kHello, nonce, frame);
      (void)WriteFull(fd.get(), frame.data(), frame.size());
      if (ReadFull(fd.get(), frame.data(), frame.size()).ok() &&
          tcpwire::DecodeHandshake(frame, tcpwire::Opcode::kChallenge).ok()) {
        absl::MutexLock lock(&mu_);
        ++challenges_;
      }
      tcpwire::HandshakeBody proof;
      proof.fill(std::byte{0x22});
      tcpwire::EncodeHandshake(tcpwire::Opcode::kProof, proof, frame);
      (void)WriteFull(fd.get(), frame.data(), frame.size());
    }
    char buf[4096];
    for (;;) {
      const ssize_t n = ::recv(fd.get(), buf, sizeof(buf), 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      absl::MutexLock lock(&mu_);
      received_ += static_cast<size_t>(n);
    }
    absl::MutexLock lock(&mu_);
    ++closed_;
  }

  const Mode mode_;
  ScopedFd listen_fd_;
  uint16_t port_ = 0;
  std::thread thread_;
  absl::Mutex mu_;
  std::vector<std::thread> conns_ ABSL_GUARDED_BY(mu_);
  size_t accepted_ ABSL_GUARDED_BY(mu_) = 0;
  size_t closed_ ABSL_GUARDED_BY(mu_) = 0;
  size_t received_ ABSL_GUARDED_BY(mu_) = 0;
  size_t challenges_ ABSL_GUARDED_BY(mu_) = 0;
};

std::unique_ptr<gdrstore::Client> ConnectOrDie(const std::string& address,
                                               const std::string& target_host = "") {
  gdrstore::ClientOptions o;
  o.daemon_address = address;
  o.target_host = target_host;
  o.rpc_timeout = std::chrono::milliseconds(30000);
  auto c = gdrstore::Client::Connect(o);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? std::move(*c) : nullptr;
}

class TcpTargetProofTest : public ::testing::Test {
 protected:
  void SetUp() override { StartDaemon({}); }
  void TearDown() override { StopDaemon(); }

  void StartDaemon(std::vector<std::string> extra) {
    std::vector<std::string> args = {"--volume", absl::StrCat("vol0=", kVolumeSize),
                                     "--tcp-connect-timeout-ms", "1000"};
    args.insert(args.end(), extra.begin(), extra.end());
    auto d = DaemonProcess::Start(args);
    ASSERT_TRUE(d.ok()) << d.status();
    daemon_ = std::move(*d);
    attacker_ = ConnectOrDie(daemon_->address());
    good_ = ConnectOrDie(daemon_->address());
    ASSERT_TRUE(attacker_ && good_);
    auto a = attacker_->AllocateBuffer(kBufferSize);
    ASSERT_TRUE(a.ok()) << a.status();
    attacker_buf_ = std::move(*a);
    auto g = good_->AllocateBuffer(kBufferSize);
    ASSERT_TRUE(g.ok()) << g.status();
    good_buf_ = std::move(*g);
  }
  void StopDaemon() {
    attacker_buf_.reset();
    good_buf_.reset();
    attacker_.reset();
    good_.reset();
    if (daemon_) {
      // Whatever was refused, no endpoint secret ever reached the daemon's log.
      const std::string log = daemon_->Stderr();
      for (const std::string& s : secrets_seen_) EXPECT_EQ(log.find(s), std::string::npos);
      auto st = daemon_->Terminate(absl::Seconds(30));
      ASSERT_TRUE(st.ok()) << st.status();
      EXPECT_EQ(DescribeWaitStatus(*st), "exited 0") << daemon_->Stderr();
      daemon_.reset();
    }
  }

  // The attacker's own valid descriptor of [0, length) of its buffer, pointed elsewhere.
  v1::RemoteBuffer Aimed(const std::string& host, uint16_t port) {
    auto rb = attacker_->Describe(*attacker_buf_, 0, kOp);
    EXPECT_TRUE(rb.ok()) << rb.status();
    rb->mutable_tcp()->set_host(host);
    rb->mutable_tcp()->set_port(port);
    secrets_seen_.push_back(rb->tcp().secret());
    return *rb;
  }

  grpc::Status Send(bool write, uint64_t offset, const v1::RemoteBuffer& rb) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    v1::OpResponse resp;
    v1::Extent e;
    e.set_volume("vol0");
    e.set_offset(offset);
    e.set_length(rb.length());
    if (write) {
      v1::WriteRequest req;
      *req.mutable_extent() = e;
      *req.mutable_buffer() = rb;
      return gdr::DaemonStub(*attacker_)->Write(&ctx, req, &resp);
    }
    v1::ReadRequest req;
    *req.mutable_extent() = e;
    *req.mutable_buffer() = rb;
    return gdr::DaemonStub(*attacker_)->Read(&ctx, req, &resp);
  }

  // The store still holds what the test knows it holds (a get of the extent, verified byte
  // for byte), and a verified op from the other client works: the daemon keeps serving.
  void ExpectStoreIntactAndServing(uint64_t offset, uint64_t length, const std::string& after) {
    absl::Status s = VerifiedWrite(*good_, *good_buf_, kGuardBytes, {"vol0", offset, length},
                                   salts_);
    EXPECT_TRUE(s.ok()) << "store after " << after << ": " << s;
    const uint64_t off = 8 * kMiB + rng_() % (4 * kMiB);
    s = VerifiedRead(*good_, *good_buf_, kGuardBytes, 2 * kGuardBytes + 65536,
                     {"vol0", off, 65536}, 1 + rng_() % 1000, &salts_);
    EXPECT_TRUE(s.ok()) << "good op after " << after << ": " << s << "\n" << daemon_->Stderr();
  }

  static void ExpectDenied(const grpc::Status& s, const v1::RemoteBuffer& rb,
                           const std::string& what) {
    EXPECT_EQ(s.error_code(), grpc::PERMISSION_DENIED) << what << ": " << s.error_message();
    EXPECT_THAT(s.error_message(), Not(HasSubstr(rb.tcp().secret()))) << what;
  }

  std::unique_ptr<DaemonProcess> daemon_;
  std::unique_ptr<gdrstore::Client> attacker_, good_;
  std::unique_ptr<gdrstore::Buffer> attacker_buf_, good_buf_;
  std::vector<std::string> secrets_seen_;
  SaltMap salts_{kVolumeSize};
  std::mt19937_64 rng_{16};
};

// The confused deputy: a third party's service on the caller's own address. It
// receives not one byte (the 4128 of a WRITE_REQ before), and the op is PERMISSION_DENIED.
TEST_F(TcpTargetProofTest, APlainListenerGetsZeroBytes) {
  auto victim = RecordingListener::Start(RecordingListener::Mode::kPlain, "127.0.0.1");
  ASSERT_NE(victim, nullptr);
  const v1::RemoteBuffer rb = Aimed("127.0.0.1", victim->port());
  size_t conns = 0;
  for (bool write : {true, false}) {
    grpc::Status s = Send(write, 0, rb);
    ExpectDenied(s, rb, write ? "Write to a plain listener" : "Read from a plain listener");
    EXPECT_THAT(s.error_message(), HasSubstr("did not prove it holds the endpoint's secret"));
    EXPECT_THAT(s.error_message(), HasSubstr(absl::StrCat("127.0.0.1:", victim->port())));
    ASSERT_TRUE(victim->WaitClosed(++conns));
    EXPECT_EQ(victim->received(), 0u) << "the daemon sent bytes to a non-target";
    ExpectStoreIntactAndServing(0, kOp, "a plain listener");
  }
}

// A hostile listener that pushes bytes at the daemon (shaped like READ_DATA): a Read (client
// -> store) through it leaves the store as it was.
TEST_F(TcpTargetProofTest, AHostileListenerCannotFeedTheStore) {
  auto hostile = RecordingListener::Start(RecordingListener::Mode::kSendsData, "127.0.0.1");
  ASSERT_NE(hostile, nullptr);
  const v1::RemoteBuffer rb = Aimed("127.0.0.1", hostile->port());
  grpc::Status s = Send(false, 2 * kMiB, rb);
  ExpectDenied(s, rb, "Read from a hostile listener");
  EXPECT_THAT(s.error_message(), HasSubstr("bad HELLO"));
  ASSERT_TRUE(hostile->WaitClosed(1));
  EXPECT_EQ(hostile->received(), 0u);
  ExpectStoreIntactAndServing(2 * kMiB, kOp, "a hostile listener");
}

// A fake target that speaks the opening but cannot prove the secret: it gets the CHALLENGE and
// nothing after it; the store is untouched.
TEST_F(TcpTargetProofTest, AWrongProofGetsNothingPastTheChallenge) {
  auto fake = RecordingListener::Start(RecordingListener::Mode::kWrongProof, "127.0.0.1");
  ASSERT_NE(fake, nullptr);
  const v1::RemoteBuffer rb = Aimed("127.0.0.1", fake->port());
  size_t conns = 0;
  for (bool write : {true, false}) {
    grpc::Status s = Send(write, 3 * kMiB, rb);
    ExpectDenied(s, rb, "wrong proof");
    EXPECT_THAT(s.error_message(), HasSubstr("wrong PROOF"));
    ASSERT_TRUE(fake->WaitClosed(++conns));
    EXPECT_EQ(fake->challenges(), conns);
    EXPECT_EQ(fake->received(), 0u) << "bytes went out after a failed proof";
    ExpectStoreIntactAndServing(3 * kMiB, kOp, "a wrong proof");
  }
}

// An attacker names a legitimate client's live target (its host, port, even its rkey and
// address) with a secret of its own: the target cannot prove that secret, so nothing moves
// into the victim's memory or out of it into the store; the victim keeps working.
TEST_F(TcpTargetProofTest, ALegitimateTargetNamedWithAWrongSecretIsRefused) {
  // The victim's link to its target is live and proved.
  ASSERT_TRUE(VerifiedWrite(*good_, *good_buf_, kGuardBytes, {"vol0", 0, kOp}, salts_).ok());
  std::memset(good_buf_->data(), 0x77, kBufferSize);
  auto victim_rb = good_->Describe(*good_buf_, 0, kOp);
  ASSERT_TRUE(victim_rb.ok()) << victim_rb.status();
  v1::RemoteBuffer rb = *victim_rb;
  rb.mutable_tcp()->set_secret(Aimed("127.0.0.1", 1).tcp().secret());
  ASSERT_NE(rb.tcp().secret(), victim_rb->tcp().secret());
  secrets_seen_.push_back(victim_rb->tcp().secret());
  for (bool write : {true, false}) {
    grpc::Status s = Send(write, 5 * kMiB, rb);
    ExpectDenied(s, rb, write ? "Write into the victim" : "Read from the victim");
    EXPECT_THAT(s.error_message(), HasSubstr("did not prove"));
    EXPECT_THAT(s.error_message(), Not(HasSubstr(victim_rb->tcp().secret())));
  }
  for (size_t i = 0; i < kBufferSize; ++i) {
    ASSERT_EQ(good_buf_->data()[i], std::byte{0x77}) << "victim memory changed at " << i;
  }
  ExpectStoreIntactAndServing(5 * kMiB, kOp, "a wrong secret");
}

// A target on another address than the caller's: refused before any connection, naming the
// target, the caller and the flag. With --tcp-target-allow covering it, the same client works.
TEST_F(TcpTargetProofTest, AnotherAddressIsRefusedWithoutAConnectionUnlessAllowed) {
  auto elsewhere = RecordingListener::Start(RecordingListener::Mode::kPlain, "127.0.0.2");
  if (elsewhere == nullptr) GTEST_SKIP() << "cannot listen on 127.0.0.2 here";
  const v1::RemoteBuffer rb = Aimed("127.0.0.2", elsewhere->port());
  for (bool write : {true, false}) {
    grpc::Status s = Send(write, 0, rb);
    ExpectDenied(s, rb, "another address");
    EXPECT_THAT(s.error_message(), HasSubstr(absl::StrCat("127.0.0.2:", elsewhere->port())));
    EXPECT_THAT(s.error_message(), HasSubstr("caller ipv4:127.0.0.1:"));
    EXPECT_THAT(s.error_message(), HasSubstr("--tcp-target-allow"));
    ExpectStoreIntactAndServing(0, kOp, "another address");
  }
  EXPECT_EQ(elsewhere->accepted(), 0u) << "the daemon connected to a refused target";

  // A real client whose target listens on 127.0.0.2 (its calls come from 127.0.0.1).
  auto other = ConnectOrDie(daemon_->address(), "127.0.0.2");
  ASSERT_NE(other, nullptr);
  auto buf = other->AllocateBuffer(kBufferSize);
  ASSERT_TRUE(buf.ok()) << buf.status();
  auto r = other->Write({"vol0", 0, kOp}, **buf);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kPermissionDenied) << r.status();
  buf->reset();
  other.reset();

  StopDaemon();
  StartDaemon({"--tcp-target-allow", "127.0.0.0/8"});
  other = ConnectOrDie(daemon_->address(), "127.0.0.2");
  ASSERT_NE(other, nullptr);
  buf = other->AllocateBuffer(kBufferSize);
  ASSERT_TRUE(buf.ok()) << buf.status();
  SaltMap fresh(kVolumeSize);
  EXPECT_TRUE(VerifiedWrite(*other, **buf, kGuardBytes, {"vol0", 7, 300000}, fresh).ok());
  EXPECT_TRUE(
      VerifiedRead(*other, **buf, kGuardBytes, kGuardBytes + 400000, {"vol0", 9, 300000}, 5,
                   &fresh)
          .ok());
}

// The Stream call carries its caller to every op: the same refusals, per op, and the stream
// goes on moving the caller's own data.
TEST_F(TcpTargetProofTest, StreamOpsAreJudgedLikeUnaryOnes) {
  auto plain = RecordingListener::Start(RecordingListener::Mode::kPlain, "127.0.0.1");
  ASSERT_NE(plain, nullptr);
  auto elsewhere = RecordingListener::Start(RecordingListener::Mode::kPlain, "127.0.0.2");
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  auto rw = gdr::DaemonStub(*attacker_)->Stream(&ctx);
  ASSERT_NE(rw, nullptr);
  RawStream raw(rw.get());
  auto send = [&](uint64_t id, const v1::RemoteBuffer& rb) {
    v1::StreamOp op;
    op.set_id(id);
    op.mutable_write()->mutable_extent()->set_volume("vol0");
    op.mutable_write()->mutable_extent()->set_length(rb.length());
    *op.mutable_write()->mutable_buffer() = rb;
    ASSERT_TRUE(raw.Send(op));
  };
  v1::StreamResult r;
  send(1, Aimed("127.0.0.1", plain->port()));
  ASSERT_TRUE(raw.Next(&r));
  EXPECT_EQ(r.id(), 1u);
  EXPECT_EQ(r.code(), grpc::PERMISSION_DENIED) << r.message();
  EXPECT_THAT(r.message(), HasSubstr("did not prove"));
  ASSERT_TRUE(plain->WaitClosed(1));
  EXPECT_EQ(plain->received(), 0u);
  if (elsewhere != nullptr) {
    send(2, Aimed("127.0.0.2", elsewhere->port()));
    ASSERT_TRUE(raw.Next(&r));
    EXPECT_EQ(r.id(), 2u);
    EXPECT_EQ(r.code(), grpc::PERMISSION_DENIED) << r.message();
    EXPECT_THAT(r.message(), HasSubstr("caller ipv4:127.0.0.1:"));
    EXPECT_EQ(elsewhere->accepted(), 0u);
  }
  auto own = attacker_->Describe(*attacker_buf_, 0, kOp);
  ASSERT_TRUE(own.ok()) << own.status();
  send(3, *own);
  ASSERT_TRUE(raw.Next(&r));
  EXPECT_EQ(r.id(), 3u);
  EXPECT_EQ(r.code(), 0) << r.message();
  EXPECT_EQ(r.bytes(), kOp);
  ASSERT_TRUE(rw->WritesDone());
  EXPECT_FALSE(raw.Next(&r));
  EXPECT_TRUE(rw->Finish().ok());
}

// The flag is validated when the daemon starts: a bad CIDR is a clear start-up error.
// Anyone who reaches a client's target port may open sockets and say nothing. Idle sockets
// past the target's connection limit once kept every daemon link out for the 10 s challenge
// timeout; now the oldest unproven connection makes way, and the client's ops go on.
TEST(TcpTargetSlotsTest, IdleSocketsOnATargetPortCannotKeepTheDaemonsLinksOut) {
  auto d = DaemonProcess::Start({"--volume", "vol0=16MiB"});
  ASSERT_TRUE(d.ok()) << d.status();
  gdrstore::ClientOptions o;
  o.daemon_address = (*d)->address();
  o.max_target_connections = 8;  // small, so that the test's sockets would fill it
  auto c = gdrstore::Client::Connect(o);
  ASSERT_TRUE(c.ok()) << c.status();
  auto buf = (*c)->AllocateBuffer(kOp);
  ASSERT_TRUE(buf.ok());
  std::vector<ScopedFd> idle;
  for (int i = 0; i < 40; ++i) {
    absl::StatusOr<ScopedFd> fd =
        ConnectTcp("127.0.0.1", (*c)->transport_info().target_port, absl::Seconds(5));
    ASSERT_TRUE(fd.ok()) << fd.status();
    idle.push_back(std::move(*fd));
  }
  // Let the target accept them all before the daemon's link asks for a slot.
  absl::SleepFor(absl::Milliseconds(300));
  absl::StatusOr<gdrstore::OpResult> r = (*c)->Write({"vol0", 0, kOp}, **buf);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(PatternMismatch(PatternSeed("vol0"), 0, std::span((*buf)->data(), kOp)));
}

TEST(TcpTargetAllowFlagTest, ABadCidrStopsTheDaemonWithAClearError) {
  auto d = DaemonProcess::Start({"--tcp-target-allow", "10.0.0.1/8"});
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(std::string(d.status().message()), HasSubstr("--tcp-target-allow"));
  EXPECT_THAT(std::string(d.status().message()), HasSubstr("did you mean 10.0.0.0/8"));
}

}  // namespace
}  // namespace gdr::integ
