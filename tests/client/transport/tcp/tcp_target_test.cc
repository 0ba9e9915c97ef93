// Unit tests of the client's tcp target (client/src/transport/tcp/tcp_target.h), spoken to with
// raw frames over loopback sockets: the checks a target makes before touching memory, and how it treats
// peers that break the framing.
#include "client/src/transport/tcp/tcp_target.h"

#include <sys/socket.h>

#include <array>
#include <chrono>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "common/base/pattern.h"
#include "common/base/socket.h"
#include "common/wire/tcp_frame.h"
#include "common/wire/tcp_proof.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gdr {
namespace {

namespace wire = tcpwire;
using Raw = std::array<std::byte, wire::kHeaderSize>;
using ::testing::HasSubstr;

constexpr size_t kRegion = 64 << 10;
constexpr size_t kGuard = 4096;

class TcpTargetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::shared_ptr<TcpTarget>> t = TcpTarget::Start("127.0.0.1", 0, 16);
    ASSERT_TRUE(t.ok()) << t.status();
    target_ = *t;
    ASSERT_NE(target_->port(), 0);
    buf_.resize(kRegion + 2 * kGuard);
    PatternFill(seed_, 0, buf_);
    region_ = std::make_shared<Region>();
    region_->host = buf_.data() + kGuard;
    region_->base = reinterpret_cast<uint64_t>(region_->host);
    region_->size = kRegion;
    target_->Register(region_);
    ASSERT_NE(region_->rkey, 0u);
  }
  void TearDown() override {
    if (target_) target_->Stop();
  }

  // A connection as the daemon opens it: connected, and the target's proof checked.
  ScopedFd Connect() {
    ScopedFd fd = ConnectRaw();
    if (fd.valid()) {
      absl::Status s = wire::ProveTarget(fd.get(), target_->secret(),
                                         absl::Now() + absl::Seconds(30), "the test's target");
      EXPECT_TRUE(s.ok()) << s;
    }
    return fd;
  }
  // Only connected: the target has sent (or is sending) its HELLO and waits for a CHALLENGE.
  ScopedFd ConnectRaw() {
    absl::StatusOr<ScopedFd> fd = ConnectTcp("127.0.0.1", target_->port(), absl::Seconds(30));
    EXPECT_TRUE(fd.ok()) << fd.status();
    return fd.ok() ? std::move(*fd) : ScopedFd();
  }

  static absl::Status SendHeader(int fd, const wire::Header& h) {
    Raw raw;
    wire::Encode(h, raw);
    return WriteFull(fd, raw.data(), raw.size());
  }
  static absl::StatusOr<wire::Header> RecvHeader(int fd) {
    Raw raw;
    absl::Status s = ReadFull(fd, raw.data(), raw.size());
    if (!s.ok()) return s;
    return wire::Decode(raw, wire::kMaxPayload);
  }

  wire::Header Req(wire::Opcode op, size_t off, uint32_t length, uint64_t tag) const {
    wire::Header h;
    h.opcode = op;
    h.rkey = region_->rkey;
    h.address = region_->base + off;
    h.length = length;
    h.tag = tag;
    return h;
  }

  // Writes `data` at region offset `off` through a WRITE_REQ; returns the ack.
  absl::StatusOr<wire::Header> Write(int fd, const wire::Header& h, const void* data) {
    absl::Status s = SendHeader(fd, h);
    if (s.ok()) s = WriteFull(fd, data, h.length);
    if (!s.ok()) return s;
    return RecvHeader(fd);
  }

  // A read of region bytes [off, off+len) that must succeed and match `expected`.
  void ExpectReadable(int fd, size_t off, uint32_t len, uint64_t tag) {
    ASSERT_TRUE(SendHeader(fd, Req(wire::Opcode::kReadReq, off, len, tag)).ok());
    absl::StatusOr<wire::Header> resp = RecvHeader(fd);
    ASSERT_TRUE(resp.ok()) << resp.status();
    EXPECT_EQ(resp->opcode, wire::Opcode::kReadData);
    EXPECT_EQ(resp->status, wire::TargetStatus::kOk);
    EXPECT_EQ(resp->tag, tag);
    ASSERT_EQ(resp->length, len);
    std::vector<std::byte> got(len);
    ASSERT_TRUE(ReadFull(fd, got.data(), got.size()).ok());
    EXPECT_TRUE(std::equal(got.begin(), got.end(), region_->host + off));
  }

  // Index into the region of the first byte changed from the initial fill (guards included),
  // -1 when untouched.
  int64_t FirstChanged() const {
    if (auto m = PatternMismatch(seed_, 0, buf_)) return int64_t(*m) - int64_t(kGuard);
    return -1;
  }

  // Waits (bounded) until the target has accepted `accepted` connections in all and none is
  // live: the observable end of a drop (a connection not yet accepted is not yet dropped).
  bool WaitNoConnections(uint64_t accepted = 0) {
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (absl::Now() < deadline) {
      const TcpTargetStats st = target_->stats();
      if (st.accepted >= accepted && st.connections == 0) return true;
      std::this_thread::yield();
    }
    return false;
  }

  // The peer closed on us: a read sees EOF or a reset, never data.
  static bool PeerDropped(int fd) {
    std::byte b;
    return !ReadFull(fd, &b, 1).ok();
  }

  const uint64_t seed_ = PatternSeed("tcp_target_test");
  std::shared_ptr<TcpTarget> target_;
  std::vector<std::byte> buf_;
  std::shared_ptr<Region> region_;
};

std::vector<std::byte> Payload(uint64_t salt, size_t n) {
  std::vector<std::byte> v(n);
  PatternFill(PatternSeed("payload", salt), 0, v);
  return v;
}

TEST_F(TcpTargetTest, WriteThenReadHappyPath) {
  ScopedFd fd = Connect();
  const auto data = Payload(1, 5000);
  absl::StatusOr<wire::Header> ack =
      Write(fd.get(), Req(wire::Opcode::kWriteReq, 13, data.size(), 0xABCDEF0123ull), data.data());
  ASSERT_TRUE(ack.ok()) << ack.status();
  EXPECT_EQ(ack->opcode, wire::Opcode::kWriteAck);
  EXPECT_EQ(ack->status, wire::TargetStatus::kOk);
  EXPECT_EQ(ack->tag, 0xABCDEF0123ull);
  EXPECT_EQ(ack->length, data.size());
  EXPECT_EQ(ack->rkey, region_->rkey);
  EXPECT_EQ(ack->address, region_->base + 13);
  EXPECT_TRUE(std::equal(data.begin(), data.end(), region_->host + 13));
  // Nothing outside [13, 13 + 5000) moved.
  EXPECT_EQ(PatternMismatch(seed_, 0, {buf_.data(), kGuard + 13}), std::nullopt);
  const size_t end = kGuard + 13 + data.size();
  EXPECT_EQ(PatternMismatch(seed_, end, {buf_.data() + end, buf_.size() - end}),
            std::nullopt);

  ExpectReadable(fd.get(), 0, kRegion, 2);  // the whole region, including what we wrote
  ExpectReadable(fd.get(), kRegion - 1, 1, 3);
  EXPECT_EQ(target_->stats().refused, 0u);
}

TEST_F(TcpTargetTest, PipelinedRequestsAreAnsweredInOrder) {
  ScopedFd fd = Connect();
  constexpr int kReqs = 200;
  std::vector<std::byte> wire_bytes;
  for (int i = 0; i < kReqs; ++i) {
    Raw raw;
    const bool write = i % 3 != 0;
    wire::Encode(Req(write ? wire::Opcode::kWriteReq : wire::Opcode::kReadReq, i * 64, 64, 1000 + i),
                 raw);
    wire_bytes.insert(wire_bytes.end(), raw.begin(), raw.end());
    if (write) {
      const auto p = Payload(100 + i, 64);
      wire_bytes.insert(wire_bytes.end(), p.begin(), p.end());
    }
  }
  // All requests go out in one burst from another thread while this one reads the answers.
  std::thread sender([&] { EXPECT_TRUE(WriteFull(fd.get(), wire_bytes.data(), wire_bytes.size()).ok()); });
  for (int i = 0; i < kReqs; ++i) {
    absl::StatusOr<wire::Header> resp = RecvHeader(fd.get());
    ASSERT_TRUE(resp.ok()) << i << ": " << resp.status();
    EXPECT_EQ(resp->tag, uint64_t(1000 + i));
    EXPECT_EQ(resp->status, wire::TargetStatus::kOk);
    if (i % 3 == 0) {
      ASSERT_EQ(resp->opcode, wire::Opcode::kReadData);
      std::array<std::byte, 64> got;
      ASSERT_TRUE(ReadFull(fd.get(), got.data(), got.size()).ok());
      // Region slot i was never written (i % 3 == 0 slots are only read): initial pattern.
      EXPECT_EQ(PatternMismatch(seed_, kGuard + i * 64, got), std::nullopt) << i;
    } else {
      EXPECT_EQ(resp->opcode, wire::Opcode::kWriteAck);
    }
  }
  sender.join();
  for (int i = 0; i < kReqs; ++i) {
    if (i % 3 == 0) continue;
    const auto p = Payload(100 + i, 64);
    EXPECT_TRUE(std::equal(p.begin(), p.end(), region_->host + i * 64)) << i;
  }
}

TEST_F(TcpTargetTest, BadRkeyIsRefusedAndThePayloadDrained) {
  ScopedFd fd = Connect();
  wire::Header h = Req(wire::Opcode::kWriteReq, 0, 40000, 7);
  h.rkey = region_->rkey == 0xFFFFFFFFu ? 1 : region_->rkey + 1;
  const auto data = Payload(2, h.length);
  absl::StatusOr<wire::Header> ack = Write(fd.get(), h, data.data());
  ASSERT_TRUE(ack.ok()) << ack.status();
  EXPECT_EQ(ack->opcode, wire::Opcode::kWriteAck);
  EXPECT_EQ(ack->status, wire::TargetStatus::kBadRkey);
  EXPECT_EQ(ack->tag, 7u);
  EXPECT_EQ(FirstChanged(), -1);

  // A read with the bad rkey: a status and no payload.
  h.opcode = wire::Opcode::kReadReq;
  h.tag = 8;
  ASSERT_TRUE(SendHeader(fd.get(), h).ok());
  absl::StatusOr<wire::Header> resp = RecvHeader(fd.get());
  ASSERT_TRUE(resp.ok()) << resp.status();
  EXPECT_EQ(resp->opcode, wire::Opcode::kReadData);
  EXPECT_EQ(resp->status, wire::TargetStatus::kBadRkey);
  EXPECT_EQ(wire::PayloadBytes(*resp), 0u);

  // The stream is still framed: the next request on this connection is served.
  ExpectReadable(fd.get(), 100, 300, 9);
  EXPECT_EQ(target_->stats().refused, 2u);
}

TEST_F(TcpTargetTest, OutOfBoundsIsRefusedAndMemoryUntouched) {
  ScopedFd fd = Connect();
  struct Case {
    uint64_t address;
    uint32_t length;
  } cases[] = {
      {region_->base + kRegion - 10, 11},       // one past the end
      {region_->base - 1, 8},                   // one before the start
      {region_->base, uint32_t(kRegion + 1)},   // longer than the region
      {region_->base + kRegion, 1},             // starts at the end
      {UINT64_MAX - 4, 16},                     // wraps
      {0, 16},
  };
  uint64_t tag = 1;
  for (const Case& c : cases) {
    wire::Header h = Req(wire::Opcode::kWriteReq, 0, c.length, tag++);
    h.address = c.address;
    const auto data = Payload(tag, c.length);
    absl::StatusOr<wire::Header> ack = Write(fd.get(), h, data.data());
    ASSERT_TRUE(ack.ok()) << ack.status();
    EXPECT_EQ(ack->status, wire::TargetStatus::kOutOfBounds) << c.address << "+" << c.length;
    EXPECT_EQ(FirstChanged(), -1) << c.address << "+" << c.length;

    h.opcode = wire::Opcode::kReadReq;
    h.tag = tag++;
    ASSERT_TRUE(SendHeader(fd.get(), h).ok());
    absl::StatusOr<wire::Header> resp = RecvHeader(fd.get());
    ASSERT_TRUE(resp.ok()) << resp.status();
    EXPECT_EQ(resp->status, wire::TargetStatus::kOutOfBounds);
    EXPECT_EQ(resp->tag, h.tag);
  }
  ExpectReadable(fd.get(), 0, 64, 999);
  EXPECT_EQ(target_->stats().refused, 2 * std::size(cases));
}

TEST_F(TcpTargetTest, DeregisteredRegionIsBadRkey) {
  ScopedFd fd = Connect();
  ExpectReadable(fd.get(), 0, 16, 1);
  target_->Deregister(region_->rkey);
  const auto data = Payload(3, 16);
  absl::StatusOr<wire::Header> ack =
      Write(fd.get(), Req(wire::Opcode::kWriteReq, 0, 16, 2), data.data());
  ASSERT_TRUE(ack.ok()) << ack.status();
  EXPECT_EQ(ack->status, wire::TargetStatus::kBadRkey);
  EXPECT_EQ(FirstChanged(), -1);
}

TEST_F(TcpTargetTest, GarbageDropsTheConnectionButNotTheTarget) {
  ScopedFd bad = Connect();
  std::array<char, 64> junk;
  junk.fill('x');
  ASSERT_TRUE(WriteFull(bad.get(), junk.data(), junk.size()).ok());
  EXPECT_TRUE(PeerDropped(bad.get()));
  EXPECT_EQ(target_->stats().bad_frames, 1u);
  EXPECT_EQ(FirstChanged(), -1);

  ScopedFd good = Connect();
  ExpectReadable(good.get(), 0, 128, 1);
}

TEST_F(TcpTargetTest, HalfFrameThenCloseDropsTheConnectionButNotTheTarget) {
  const uint64_t before = target_->stats().accepted;
  {
    ScopedFd half = Connect();
    Raw raw;
    wire::Encode(Req(wire::Opcode::kWriteReq, 0, 64, 1), raw);
    ASSERT_TRUE(WriteFull(half.get(), raw.data(), raw.size() / 2).ok());
  }  // closed mid-header
  ASSERT_TRUE(WaitNoConnections(before + 1));
  {
    // Whole header, half the payload, then close.
    ScopedFd half = Connect();
    const auto data = Payload(4, 64);
    ASSERT_TRUE(SendHeader(half.get(), Req(wire::Opcode::kWriteReq, 0, 64, 1)).ok());
    ASSERT_TRUE(WriteFull(half.get(), data.data(), 32).ok());
  }
  ASSERT_TRUE(WaitNoConnections(before + 2));
  EXPECT_EQ(target_->stats().bad_frames, 0u);  // a closed peer is not a protocol error
  ScopedFd good = Connect();
  ExpectReadable(good.get(), 0, 128, 2);
}

TEST_F(TcpTargetTest, ResponseOpcodeAsRequestDropsTheConnection) {
  for (wire::Opcode op : {wire::Opcode::kWriteAck, wire::Opcode::kReadData}) {
    ScopedFd fd = Connect();
    // Well-formed header, wrong direction.
    ASSERT_TRUE(SendHeader(fd.get(), Req(op, 0, 16, 1)).ok());
    EXPECT_TRUE(PeerDropped(fd.get()));
  }
  EXPECT_EQ(target_->stats().bad_frames, 2u);
  EXPECT_EQ(FirstChanged(), -1);
  ScopedFd good = Connect();
  ExpectReadable(good.get(), 0, 16, 3);
}

TEST_F(TcpTargetTest, OversizeLengthDropsTheConnection) {
  ScopedFd fd = Connect();
  Raw raw;
  wire::Encode(Req(wire::Opcode::kWriteReq, 0, 16, 1), raw);
  const uint32_t huge = wire::kMaxPayload + 1;
  std::memcpy(raw.data() + 12, &huge, 4);
  ASSERT_TRUE(WriteFull(fd.get(), raw.data(), raw.size()).ok());
  EXPECT_TRUE(PeerDropped(fd.get()));
  EXPECT_EQ(target_->stats().bad_frames, 1u);
}

TEST_F(TcpTargetTest, RegisterGivesDistinctNonzeroRkeys) {
  std::vector<std::shared_ptr<Region>> regions;
  std::vector<uint32_t> keys = {region_->rkey};
  for (int i = 0; i < 100; ++i) {
    auto r = std::make_shared<Region>();
    r->host = buf_.data();
    r->base = reinterpret_cast<uint64_t>(r->host);
    r->size = 1;
    target_->Register(r);
    ASSERT_NE(r->rkey, 0u);
    keys.push_back(r->rkey);
    regions.push_back(r);
  }
  std::sort(keys.begin(), keys.end());
  EXPECT_EQ(std::adjacent_find(keys.begin(), keys.end()), keys.end());
}

TEST_F(TcpTargetTest, ReleaseRunsWhenTheLastReferenceGoes) {
  bool released = false;
  auto r = std::make_shared<Region>();
  r->host = buf_.data();
  r->base = reinterpret_cast<uint64_t>(r->host);
  r->size = 16;
  r->release = [&released] { released = true; };
  target_->Register(r);
  const uint32_t rkey = r->rkey;
  r.reset();
  EXPECT_FALSE(released);  // the target still holds it
  target_->Deregister(rkey);
  EXPECT_TRUE(released);
}

// The target speaks first, proves the secret to a daemon that knows it, and a daemon that
// expects another secret sees the proof fail.
TEST_F(TcpTargetTest, OpensEveryConnectionWithAProofOfItsSecret) {
  ASSERT_GE(target_->secret().size(), wire::kMinSecretBytes);
  ScopedFd fd = ConnectRaw();
  std::array<std::byte, wire::kHandshakeFrameSize> hello;
  ASSERT_TRUE(ReadFull(fd.get(), hello.data(), hello.size()).ok());
  EXPECT_TRUE(wire::DecodeHandshake(hello, wire::Opcode::kHello).ok());
  fd.Reset();

  fd = ConnectRaw();
  std::string wrong = target_->secret();
  wrong[0] ^= 0x40;
  absl::Status s = wire::ProveTarget(fd.get(), wrong, absl::Now() + absl::Seconds(30), "t");
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("wrong PROOF"));
  // Two targets never share a secret.
  absl::StatusOr<std::shared_ptr<TcpTarget>> other = TcpTarget::Start("127.0.0.1", 0, 1);
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_NE((*other)->secret(), target_->secret());
  (*other)->Stop();
}

// A request where the CHALLENGE is due is a bad opening: the link is dropped and memory is
// never touched.
TEST_F(TcpTargetTest, RequestsBeforeTheOpeningAreDropped) {
  ScopedFd fd = ConnectRaw();
  std::vector<std::byte> payload(4096, std::byte{0x5a});
  // Header + payload = 4128 bytes: a WRITE_REQ where the CHALLENGE should be.
  ASSERT_TRUE(SendHeader(fd.get(), Req(wire::Opcode::kWriteReq, 0, 4096, 1)).ok());
  (void)WriteFull(fd.get(), payload.data(), payload.size());
  std::array<std::byte, wire::kHandshakeFrameSize> hello;
  ASSERT_TRUE(ReadFull(fd.get(), hello.data(), hello.size()).ok());
  EXPECT_TRUE(PeerDropped(fd.get()));
  EXPECT_TRUE(WaitNoConnections(1));
  EXPECT_EQ(target_->stats().bad_frames, 1u);
  EXPECT_EQ(FirstChanged(), -1);
}

TEST(TcpTargetLimitsTest, ConnectionsBeyondTheLimitAreRefused) {
  absl::StatusOr<std::shared_ptr<TcpTarget>> t = TcpTarget::Start("127.0.0.1", 0, 1);
  ASSERT_TRUE(t.ok()) << t.status();
  std::vector<std::byte> mem(64);
  auto region = std::make_shared<Region>();
  region->host = mem.data();
  region->base = reinterpret_cast<uint64_t>(region->host);
  region->size = mem.size();
  (*t)->Register(region);
  auto connect = [&] {
    absl::StatusOr<ScopedFd> fd = ConnectTcp("127.0.0.1", (*t)->port(), absl::Seconds(30));
    EXPECT_TRUE(fd.ok()) << fd.status();
    return std::move(*fd);
  };
  auto read_ok = [&](int fd) {
    if (!wire::ProveTarget(fd, (*t)->secret(), absl::Now() + absl::Seconds(30), "t").ok()) {
      return false;
    }
    wire::Header h;
    h.opcode = wire::Opcode::kReadReq;
    h.rkey = region->rkey;
    h.address = region->base;
    h.length = 8;
    Raw raw;
    wire::Encode(h, raw);
    if (!WriteFull(fd, raw.data(), raw.size()).ok()) return false;
    Raw resp;
    if (!ReadFull(fd, resp.data(), resp.size()).ok()) return false;
    std::array<std::byte, 8> data;
    return ReadFull(fd, data.data(), data.size()).ok();
  };
  ScopedFd first = connect();
  ASSERT_TRUE(read_ok(first.get()));  // served, so it is the one live connection
  ScopedFd second = connect();
  EXPECT_FALSE(read_ok(second.get()));  // accepted and closed at once
  first.Reset();
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while ((*t)->stats().connections != 0 && absl::Now() < deadline) std::this_thread::yield();
  ASSERT_EQ((*t)->stats().connections, 0u);
  ScopedFd third = connect();
  EXPECT_TRUE(read_ok(third.get()));
  (*t)->Stop();
}

TEST(TcpTargetLimitsTest, StopIsIdempotentAndClosesConnections) {
  absl::StatusOr<std::shared_ptr<TcpTarget>> t = TcpTarget::Start("127.0.0.1", 0, 4);
  ASSERT_TRUE(t.ok()) << t.status();
  absl::StatusOr<ScopedFd> fd = ConnectTcp("127.0.0.1", (*t)->port(), absl::Seconds(30));
  ASSERT_TRUE(fd.ok()) << fd.status();
  (*t)->Stop();
  (*t)->Stop();
  // At most the HELLO the target sent before it stopped, then the close.
  std::byte b;
  size_t got = 0;
  while (got <= wire::kHandshakeFrameSize && ReadFull(fd->get(), &b, 1).ok()) ++got;
  EXPECT_LE(got, wire::kHandshakeFrameSize);
  EXPECT_FALSE(ConnectTcp("127.0.0.1", (*t)->port(), absl::Seconds(30)).ok());
}

}  // namespace
}  // namespace gdr
