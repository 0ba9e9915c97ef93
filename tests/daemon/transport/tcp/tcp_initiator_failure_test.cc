// End-to-end tests of what the tcp initiator pool (daemon/transport/tcp/tcp_initiator.h)
// refuses or fails, over real loopback sockets: a target's refusals (rkey, region), targets
// that are closed, silent or not targets at all, proofs and secrets, the caller's address rule.
#include "tests/daemon/transport/tcp/tcp_initiator_fixture.h"

namespace gdr::tcp_initiator_test {
namespace {

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

}  // namespace
}  // namespace gdr::tcp_initiator_test
