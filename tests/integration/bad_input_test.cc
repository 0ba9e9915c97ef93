// Case 4: malformed and hostile input. Each bad request gets the documented gRPC code and a
// message, and right after it a well-formed request from ANOTHER client succeeds (verified).
// Covers bad extents, bad buffers and endpoints, unreachable and silent targets, garbage on a
// client's target port and on the daemon's gRPC port, and per-op errors on a Stream call.
#include <grpcpp/grpcpp.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <future>
#include <map>
#include <random>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/src/daemon_rpc.h"
#include "common/base/pattern.h"
#include "common/wire/tcp_frame.h"
#include "gdrstore/client.h"
#include "tests/integration/daemon_process.h"
#include "tests/integration/silent_listener.h"
#include "tests/integration/stream_ops.h"
#include "tests/integration/verified_ops.h"

namespace gdr::integ {
namespace {

namespace v1 = gdrstore::v1;
constexpr uint64_t kMiB = 1 << 20;
constexpr uint64_t kVolumeSize = 64 * kMiB;
constexpr uint64_t kMaxOp = 4 * kMiB;
constexpr size_t kBufferSize = 1 * kMiB;

std::unique_ptr<gdrstore::Client> ConnectOrDie(const std::string& address) {
  gdrstore::ClientOptions o;
  o.daemon_address = address;
  o.rpc_timeout = std::chrono::milliseconds(30000);
  auto c = gdrstore::Client::Connect(o);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? std::move(*c) : nullptr;
}

class BadInputTest : public ::testing::Test {
 protected:
  void SetUp() override { StartDaemon({}); }
  void TearDown() override {
    bad_buf_.reset();
    good_buf_.reset();
    bad_.reset();
    good_.reset();
    if (daemon_) {
      auto st = daemon_->Terminate(absl::Seconds(30));
      ASSERT_TRUE(st.ok()) << st.status();
      EXPECT_EQ(DescribeWaitStatus(*st), "exited 0") << daemon_->Stderr();
    }
  }

  void StartDaemon(std::vector<std::string> extra) {
    std::vector<std::string> args = {"--volume", absl::StrCat("vol0=", kVolumeSize),
                                     "--max-op-size", absl::StrCat(kMaxOp)};
    args.insert(args.end(), extra.begin(), extra.end());
    auto d = DaemonProcess::Start(args);
    ASSERT_TRUE(d.ok()) << d.status();
    daemon_ = std::move(*d);
    bad_ = ConnectOrDie(daemon_->address());
    good_ = ConnectOrDie(daemon_->address());
    ASSERT_TRUE(bad_ && good_);
    auto b = bad_->AllocateBuffer(kBufferSize);
    ASSERT_TRUE(b.ok()) << b.status();
    bad_buf_ = std::move(*b);
    auto g = good_->AllocateBuffer(kBufferSize);
    ASSERT_TRUE(g.ok()) << g.status();
    good_buf_ = std::move(*g);
  }

  // A correct descriptor of [0, length) of the bad client's buffer.
  v1::RemoteBuffer Describe(uint64_t length) {
    auto rb = bad_->Describe(*bad_buf_, 0, length);
    EXPECT_TRUE(rb.ok()) << rb.status();
    return rb.ok() ? *rb : v1::RemoteBuffer();
  }

  static v1::Extent MakeExtent(const std::string& volume, uint64_t offset, uint64_t length) {
    v1::Extent e;
    e.set_volume(volume);
    e.set_offset(offset);
    e.set_length(length);
    return e;
  }

  // Sends the op from the bad client, unary, with a deadline well past the daemon's timeouts.
  grpc::Status SendWrite(const v1::Extent& e, const v1::RemoteBuffer& rb) {
    v1::WriteRequest req;
    *req.mutable_extent() = e;
    *req.mutable_buffer() = rb;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    v1::OpResponse resp;
    return gdr::DaemonStub(*bad_)->Write(&ctx, req, &resp);
  }
  grpc::Status SendRead(const v1::Extent& e, const v1::RemoteBuffer& rb) {
    v1::ReadRequest req;
    *req.mutable_extent() = e;
    *req.mutable_buffer() = rb;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    v1::OpResponse resp;
    return gdr::DaemonStub(*bad_)->Read(&ctx, req, &resp);
  }

  // Both directions of the same bad op get `code` with a message.
  void ExpectBoth(const v1::Extent& e, const v1::RemoteBuffer& rb, grpc::StatusCode code,
                  const std::string& what) {
    for (bool write : {true, false}) {
      grpc::Status s = write ? SendWrite(e, rb) : SendRead(e, rb);
      EXPECT_EQ(s.error_code(), code)
          << what << (write ? " (Write)" : " (Read)") << ": " << s.error_message();
      EXPECT_FALSE(s.error_message().empty()) << what;
      ExpectGoodOpFromOtherClient(what);
    }
  }

  // A well-formed, verified op from the other client.
  void ExpectGoodOpFromOtherClient(const std::string& after) {
    const uint64_t len = 1 + rng_() % (kBufferSize - 2 * kGuardBytes - 4096);
    const gdrstore::Extent e{"vol0", rng_() % (kVolumeSize - len), len};
    const size_t boff = kGuardBytes + rng_() % 4096;
    absl::Status s = (good_ops_++ % 2 == 0) ? VerifiedWrite(*good_, *good_buf_, boff, e, salts_)
                                            : VerifiedRead(*good_, *good_buf_, boff, boff, e,
                                                           1 + rng_() % 99999, &salts_);
    EXPECT_TRUE(s.ok()) << "good op after " << after << ": " << s << "\ndaemon stderr:\n"
                        << daemon_->Stderr();
  }

  std::unique_ptr<DaemonProcess> daemon_;
  std::unique_ptr<gdrstore::Client> bad_, good_;
  std::unique_ptr<gdrstore::Buffer> bad_buf_, good_buf_;
  SaltMap salts_{kVolumeSize};
  std::mt19937_64 rng_{7};
  int good_ops_ = 0;
};

TEST_F(BadInputTest, ExtentPastVolumeEndIsOutOfRange) {
  ExpectBoth(MakeExtent("vol0", kVolumeSize - 10, 20), Describe(20), grpc::OUT_OF_RANGE,
             "extent straddling the end");
  ExpectBoth(MakeExtent("vol0", kVolumeSize, 1), Describe(1), grpc::OUT_OF_RANGE,
             "extent starting at the end");
  // offset + length wraps 64 bits: must not pass as "in range".
  ExpectBoth(MakeExtent("vol0", UINT64_MAX - 1, 4), Describe(4), grpc::OUT_OF_RANGE,
             "extent whose end wraps");
}

TEST_F(BadInputTest, BadLengthsAreInvalidArgument) {
  ExpectBoth(MakeExtent("vol0", 0, 0), Describe(0), grpc::INVALID_ARGUMENT, "length 0");
  v1::RemoteBuffer big = Describe(1);
  big.set_length(kMaxOp + 1);
  ExpectBoth(MakeExtent("vol0", 0, kMaxOp + 1), big, grpc::INVALID_ARGUMENT,
             "length above --max-op-size");
  ExpectBoth(MakeExtent("vol0", 0, 4096), Describe(4095), grpc::INVALID_ARGUMENT,
             "buffer.length != extent.length");
  v1::RemoteBuffer zero_rkey = Describe(4096);
  zero_rkey.set_rkey(0);
  ExpectBoth(MakeExtent("vol0", 0, 4096), zero_rkey, grpc::INVALID_ARGUMENT, "rkey 0");
}

TEST_F(BadInputTest, UnknownVolumeIsNotFound) {
  ExpectBoth(MakeExtent("nosuch", 0, 4096), Describe(4096), grpc::NOT_FOUND, "unknown volume");
  ExpectBoth(MakeExtent(std::string("vol0\x01\x7f", 6), 0, 4096), Describe(4096), grpc::NOT_FOUND,
             "volume name with control bytes");
  ExpectBoth(MakeExtent("", 0, 4096), Describe(4096), grpc::NOT_FOUND, "empty volume name");
}

// A name no daemon can take is refused by the client before it is sent, naming the field: one
// that is not UTF-8 would fail the request's parsing in the daemon, which answers an unnamed
// UNIMPLEMENTED.
TEST_F(BadInputTest, TheClientRefusesANameTheRuleForbidsBeforeSendingIt) {
  for (const std::string& name : {std::string("vol\xff\xfe"), std::string(), std::string("../x"),
                                  std::string(256, 'v')}) {
    absl::StatusOr<gdrstore::OpResult> r = bad_->Write({name, 0, 4096}, *bad_buf_);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
    EXPECT_THAT(std::string(r.status().message()), ::testing::HasSubstr("extent.volume"));
    r = bad_->Read({name, 0, 4096}, *bad_buf_);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
    auto stream = bad_->OpenStream();
    ASSERT_TRUE(stream.ok()) << stream.status();
    std::promise<absl::Status> answered;
    (*stream)->Submit(gdrstore::OpKind::kWrite, {name, 0, 4096}, *bad_buf_, 0,
                      [&](absl::StatusOr<gdrstore::OpResult> sr) {
                        answered.set_value(sr.status());
                      });
    absl::Status sr = answered.get_future().get();
    EXPECT_EQ(sr.code(), absl::StatusCode::kInvalidArgument) << sr;
    absl::StatusOr<bool> made = bad_->CreateVolume(name, 4096);
    EXPECT_EQ(made.status().code(), absl::StatusCode::kInvalidArgument) << made.status();
    EXPECT_THAT(std::string(made.status().message()), ::testing::HasSubstr("name '"));
    EXPECT_EQ(bad_->DeleteVolume(name).code(), absl::StatusCode::kInvalidArgument);
    ExpectGoodOpFromOtherClient("a name the rule forbids");
  }
}

TEST_F(BadInputTest, TargetRefusalsArePermissionDenied) {
  v1::RemoteBuffer wrong_rkey = Describe(4096);
  wrong_rkey.set_rkey(bad_buf_->rkey() ^ 0x5a5a5a5au);
  ExpectBoth(MakeExtent("vol0", 100, 4096), wrong_rkey, grpc::PERMISSION_DENIED, "wrong rkey");
  v1::RemoteBuffer past_end = Describe(4096);
  past_end.set_address(bad_buf_->address() + kBufferSize - 100);
  ExpectBoth(MakeExtent("vol0", 100, 4096), past_end, grpc::PERMISSION_DENIED,
             "address range past the region");
  v1::RemoteBuffer before = Describe(4096);
  before.set_address(bad_buf_->address() - 8);
  ExpectBoth(MakeExtent("vol0", 100, 4096), before, grpc::PERMISSION_DENIED,
             "address before the region");
  // A large op (several chunks) whose tail is outside the region.
  v1::RemoteBuffer tail_out = Describe(kBufferSize);
  tail_out.set_address(bad_buf_->address() + 4096);
  ExpectBoth(MakeExtent("vol0", 0, kBufferSize), tail_out, grpc::PERMISSION_DENIED,
             "multi-chunk op with its tail outside the region");
  // The refusing client itself keeps working.
  auto r = bad_->Write({"vol0", 0, 4096}, *bad_buf_);
  EXPECT_TRUE(r.ok()) << r.status();
}

TEST_F(BadInputTest, EndpointKindsAreCheckedFirst) {
  v1::RemoteBuffer none = Describe(4096);
  none.clear_tcp();
  ASSERT_EQ(none.endpoint_case(), v1::RemoteBuffer::ENDPOINT_NOT_SET);
  ExpectBoth(MakeExtent("vol0", 0, 4096), none, grpc::INVALID_ARGUMENT, "no endpoint");

  // An endpoint this daemon's schema does not know: only an unknown field number (14, a
  // length-delimited message as a future transport would be) on the wire.
  std::string raw = none.SerializeAsString();
  raw += std::string("\x72\x05\x0a\x03xyz", 7);
  v1::RemoteBuffer unknown;
  ASSERT_TRUE(unknown.ParseFromString(raw));
  ASSERT_EQ(unknown.endpoint_case(), v1::RemoteBuffer::ENDPOINT_NOT_SET);
  ASSERT_EQ(unknown.GetReflection()->GetUnknownFields(unknown).field_count(), 1);
  ExpectBoth(MakeExtent("vol0", 0, 4096), unknown, grpc::INVALID_ARGUMENT,
             "unknown endpoint field");

  v1::RemoteBuffer rc = Describe(4096);
  rc.mutable_rc()->set_connection_id(42);
  ExpectBoth(MakeExtent("vol0", 0, 4096), rc, grpc::UNIMPLEMENTED, "rc endpoint");
  v1::RemoteBuffer dc = Describe(4096);
  dc.mutable_dc()->set_dct_number(0x1234);
  dc.mutable_dc()->set_dc_key(0xfeedface);
  dc.mutable_dc()->set_gid(std::string(16, '\x01'));
  ExpectBoth(MakeExtent("vol0", 0, 4096), dc, grpc::UNIMPLEMENTED, "dc endpoint");

  v1::RemoteBuffer bad_port = Describe(4096);
  bad_port.mutable_tcp()->set_port(70000);
  ExpectBoth(MakeExtent("vol0", 0, 4096), bad_port, grpc::INVALID_ARGUMENT, "tcp port 70000");
  v1::RemoteBuffer no_host = Describe(4096);
  no_host.mutable_tcp()->clear_host();
  ExpectBoth(MakeExtent("vol0", 0, 4096), no_host, grpc::INVALID_ARGUMENT, "empty tcp host");
  // The target's secret: required, 16..64 bytes, named in the error, its bytes never echoed.
  v1::RemoteBuffer no_secret = Describe(4096);
  no_secret.mutable_tcp()->clear_secret();
  ExpectBoth(MakeExtent("vol0", 0, 4096), no_secret, grpc::INVALID_ARGUMENT, "no tcp secret");
  for (size_t n : {size_t{15}, size_t{65}}) {
    v1::RemoteBuffer bad_secret = Describe(4096);
    bad_secret.mutable_tcp()->set_secret(std::string(n, 'Q'));
    grpc::Status s = SendWrite(MakeExtent("vol0", 0, 4096), bad_secret);
    EXPECT_EQ(s.error_code(), grpc::INVALID_ARGUMENT) << s.error_message();
    EXPECT_NE(s.error_message().find("buffer.tcp.secret"), std::string::npos) << s.error_message();
    EXPECT_EQ(s.error_message().find("QQ"), std::string::npos) << s.error_message();
    ExpectGoodOpFromOtherClient("a bad tcp secret");
  }
}

TEST_F(BadInputTest, ClosedTargetPortIsUnavailableWithinDeadline) {
  auto closed = ClosedPort::Reserve();
  ASSERT_TRUE(closed.ok()) << closed.status();
  v1::RemoteBuffer rb = Describe(4096);
  rb.mutable_tcp()->set_port((*closed)->port());
  const absl::Time t0 = absl::Now();
  grpc::Status s = SendWrite(MakeExtent("vol0", 0, 4096), rb);
  EXPECT_EQ(s.error_code(), grpc::UNAVAILABLE) << s.error_message();
  EXPECT_FALSE(s.error_message().empty());
  // Refused at once; the connect timeout (3 s by default) bounds it in any case.
  EXPECT_LT(absl::Now() - t0, absl::Seconds(10));
  ExpectGoodOpFromOtherClient("closed target port");
  s = SendRead(MakeExtent("vol0", 0, 4096), rb);
  EXPECT_EQ(s.error_code(), grpc::UNAVAILABLE) << s.error_message();
  ExpectGoodOpFromOtherClient("closed target port (Read)");
}

TEST_F(BadInputTest, SilentTargetTimesOutInsteadOfHanging) {
  // This case needs a daemon with a short op timeout.
  TearDown();
  daemon_.reset();
  StartDaemon({"--op-timeout-ms", "1000"});
  auto silent = SilentListener::Start();
  ASSERT_TRUE(silent.ok()) << silent.status();
  v1::RemoteBuffer rb = Describe(64 * 1024);
  rb.mutable_tcp()->set_port((*silent)->port());
  rb.mutable_tcp()->set_secret((*silent)->secret());
  for (bool write : {true, false}) {
    const absl::Time t0 = absl::Now();
    grpc::Status s = write ? SendWrite(MakeExtent("vol0", 0, 64 * 1024), rb)
                           : SendRead(MakeExtent("vol0", 0, 64 * 1024), rb);
    const absl::Duration took = absl::Now() - t0;
    EXPECT_TRUE(s.error_code() == grpc::DEADLINE_EXCEEDED || s.error_code() == grpc::UNAVAILABLE)
        << "code " << s.error_code() << ": " << s.error_message();
    EXPECT_FALSE(s.error_message().empty());
    EXPECT_LT(took, absl::Seconds(10)) << "the op hung for " << took;
    ExpectGoodOpFromOtherClient("silent target");
  }
  // The daemon did connect: the listener's thread counts the accept, late on a loaded host.
  EXPECT_TRUE((*silent)->WaitForConnections(1, absl::Seconds(30)));
}

TEST_F(BadInputTest, GarbageOnTheClientTargetPort) {
  const uint16_t port = bad_->transport_info().target_port;
  std::mt19937_64 rng(99);
  std::string garbage(256, '\0');
  for (char& c : garbage) c = static_cast<char>(rng());
  auto closed = SendAndAwaitPeerClose(port, garbage, false, absl::Seconds(10));
  ASSERT_TRUE(closed.ok()) << closed.status();
  EXPECT_TRUE(*closed) << "the target kept a connection that sent garbage";
  ExpectGoodOpFromOtherClient("garbage to a client target");

  // On links the target has opened (its proof checked, as the daemon does):
  const std::string secret = Describe(1).tcp().secret();
  // Half a header, then the sender goes quiet (write side closed): the target sees EOF.
  std::array<std::byte, tcpwire::kHeaderSize> hdr;
  tcpwire::Header h;
  h.opcode = tcpwire::Opcode::kWriteReq;
  h.rkey = bad_buf_->rkey();
  h.length = 4096;
  h.address = bad_buf_->address();
  tcpwire::Encode(h, hdr);
  const std::string full(reinterpret_cast<const char*>(hdr.data()), hdr.size());
  closed = SendAndAwaitPeerClose(port, full.substr(0, 16), true, absl::Seconds(10), secret);
  ASSERT_TRUE(closed.ok()) << closed.status();
  EXPECT_TRUE(*closed);
  // A whole header that promises 4096 payload bytes, then only 100 of them.
  closed = SendAndAwaitPeerClose(port, full + std::string(100, 'x'), true, absl::Seconds(10),
                                 secret);
  ASSERT_TRUE(closed.ok()) << closed.status();
  EXPECT_TRUE(*closed);
  // A header claiming more than any frame may carry.
  h.length = tcpwire::kMaxPayload + 1;
  tcpwire::Encode(h, hdr);
  closed = SendAndAwaitPeerClose(port,
                                 std::string(reinterpret_cast<const char*>(hdr.data()), hdr.size()),
                                 false, absl::Seconds(10), secret);
  ASSERT_TRUE(closed.ok()) << closed.status();
  EXPECT_TRUE(*closed);
  ExpectGoodOpFromOtherClient("half frames to a client target");

  // The attacked client's own target still serves the daemon.
  SaltMap fresh_view = salts_;
  absl::Status s =
      VerifiedWrite(*bad_, *bad_buf_, kGuardBytes + 3, {"vol0", 5, 300000}, fresh_view);
  EXPECT_TRUE(s.ok()) << s;
}

TEST_F(BadInputTest, GarbageOnTheDaemonGrpcPort) {
  std::mt19937_64 rng(1234);
  std::string garbage(512, '\0');
  for (char& c : garbage) c = static_cast<char>(rng());
  auto closed = SendAndAwaitPeerClose(daemon_->port(), garbage, false, absl::Seconds(10));
  ASSERT_TRUE(closed.ok()) << closed.status();
  EXPECT_TRUE(*closed) << "the daemon kept a connection that sent garbage";
  ExpectGoodOpFromOtherClient("garbage to the gRPC port");

  // Half of the HTTP/2 client preface, then the write side closes.
  closed = SendAndAwaitPeerClose(daemon_->port(), "PRI * HTTP/2.0\r\n", true, absl::Seconds(10));
  ASSERT_TRUE(closed.ok()) << closed.status();
  EXPECT_TRUE(*closed);
  // The whole preface and half a SETTINGS frame header.
  closed = SendAndAwaitPeerClose(
      daemon_->port(), std::string("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x06\x04", 28), true,
      absl::Seconds(10));
  ASSERT_TRUE(closed.ok()) << closed.status();
  EXPECT_TRUE(*closed);
  ExpectGoodOpFromOtherClient("half frames to the gRPC port");
  auto health = HealthCheck(daemon_->address(), absl::Seconds(5));
  ASSERT_TRUE(health.ok()) << health.status();
  EXPECT_TRUE(*health);
  EXPECT_TRUE(daemon_->Running());
}

TEST_F(BadInputTest, StreamAnswersBadOpsPerOpAndContinues) {
  auto silent = SilentListener::Start();
  ASSERT_TRUE(silent.ok()) << silent.status();
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  auto rw = gdr::DaemonStub(*bad_)->Stream(&ctx);
  ASSERT_NE(rw, nullptr);
  RawStream raw(rw.get());

  // id 7: an op to a target that never answers, so it stays in flight.
  v1::StreamOp hung;
  hung.set_id(7);
  *hung.mutable_write()->mutable_extent() = MakeExtent("vol0", 0, 4096);
  *hung.mutable_write()->mutable_buffer() = Describe(4096);
  hung.mutable_write()->mutable_buffer()->mutable_tcp()->set_port((*silent)->port());
  hung.mutable_write()->mutable_buffer()->mutable_tcp()->set_secret((*silent)->secret());
  ASSERT_TRUE(raw.Send(hung));
  ASSERT_TRUE((*silent)->WaitForConnections(1, absl::Seconds(10)));

  // id 7 again, well-formed: refused as a duplicate of an in-flight id.
  v1::StreamOp dup;
  dup.set_id(7);
  *dup.mutable_write()->mutable_extent() = MakeExtent("vol0", 0, 4096);
  *dup.mutable_write()->mutable_buffer() = Describe(4096);
  ASSERT_TRUE(raw.Send(dup));
  v1::StreamResult resp;
  ASSERT_TRUE(raw.Next(&resp));
  EXPECT_EQ(resp.id(), 7u);
  EXPECT_EQ(resp.code(), grpc::INVALID_ARGUMENT) << resp.message();
  EXPECT_FALSE(resp.message().empty());
  ExpectGoodOpFromOtherClient("duplicate stream id");

  // id 8 without an op.
  v1::StreamOp empty;
  empty.set_id(8);
  ASSERT_TRUE(raw.Send(empty));
  ASSERT_TRUE(raw.Next(&resp));
  EXPECT_EQ(resp.id(), 8u);
  EXPECT_EQ(resp.code(), grpc::INVALID_ARGUMENT) << resp.message();
  EXPECT_FALSE(resp.message().empty());
  ExpectGoodOpFromOtherClient("op-less stream request");

  // id 9 with a bad extent, id 10 well-formed: the stream still moves data.
  v1::StreamOp oob;
  oob.set_id(9);
  *oob.mutable_read()->mutable_extent() = MakeExtent("vol0", kVolumeSize - 1, 4096);
  *oob.mutable_read()->mutable_buffer() = Describe(4096);
  ASSERT_TRUE(raw.Send(oob));
  ASSERT_TRUE(raw.Next(&resp));
  EXPECT_EQ(resp.id(), 9u);
  EXPECT_EQ(resp.code(), grpc::OUT_OF_RANGE) << resp.message();

  std::memset(bad_buf_->data(), 0, 4096);
  v1::StreamOp good;
  good.set_id(10);
  *good.mutable_write()->mutable_extent() = MakeExtent("vol0", 3 * kMiB + 1, 4096);
  *good.mutable_write()->mutable_buffer() = Describe(4096);
  ASSERT_TRUE(raw.Send(good));
  ASSERT_TRUE(raw.Next(&resp));
  EXPECT_EQ(resp.id(), 10u);
  EXPECT_EQ(resp.code(), 0) << resp.message();
  EXPECT_EQ(resp.bytes(), 4096u);
  for (const SaltMap::Piece& p : salts_.Pieces(3 * kMiB + 1, 4096)) {
    const std::span<const std::byte> got(bad_buf_->data() + (p.offset - (3 * kMiB + 1)), p.length);
    EXPECT_FALSE(PatternMismatch(PatternSeed("vol0", p.salt), p.offset, got).has_value())
        << "stream op 10 moved other bytes";
  }

  // Releasing the hung target fails id 7 cleanly; then the call ends OK.
  (*silent)->CloseConnections();
  ASSERT_TRUE(raw.Next(&resp));
  EXPECT_EQ(resp.id(), 7u);
  EXPECT_EQ(resp.code(), grpc::UNAVAILABLE) << resp.message();
  EXPECT_FALSE(resp.message().empty());
  ASSERT_TRUE(rw->WritesDone());
  EXPECT_FALSE(raw.Next(&resp));
  grpc::Status fin = rw->Finish();
  EXPECT_TRUE(fin.ok()) << fin.error_message();
  ExpectGoodOpFromOtherClient("stream end");
}

TEST_F(BadInputTest, StreamMessageWithManyOpsAnswersEachOp) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  auto rw = gdr::DaemonStub(*bad_)->Stream(&ctx);
  ASSERT_NE(rw, nullptr);

  // One message: a good Write, a length-0 op, an op-less op, a good Write of other bytes.
  std::memset(bad_buf_->data(), 0, 8192);
  v1::StreamRequest mixed;
  auto add_write = [&](uint64_t id, uint64_t offset, uint64_t length, size_t buf_off) {
    v1::StreamOp& op = *mixed.add_ops();
    op.set_id(id);
    *op.mutable_write()->mutable_extent() = MakeExtent("vol0", offset, length);
    auto rb = bad_->Describe(*bad_buf_, buf_off, length == 0 ? 1 : length);
    ASSERT_TRUE(rb.ok()) << rb.status();
    *op.mutable_write()->mutable_buffer() = *rb;
    op.mutable_write()->mutable_buffer()->set_length(length);
  };
  add_write(21, 5 * kMiB + 3, 4096, 0);
  add_write(22, 0, 0, 0);
  mixed.add_ops()->set_id(23);
  add_write(24, 6 * kMiB + 5, 4096, 4096);
  ASSERT_TRUE(rw->Write(mixed));

  std::map<uint64_t, v1::StreamResult> got;
  while (got.size() < 4) {
    v1::StreamResponse resp;
    ASSERT_TRUE(rw->Read(&resp));
    for (const auto& r : resp.results()) {
      EXPECT_TRUE(got.emplace(r.id(), r).second) << "id " << r.id() << " answered twice";
    }
  }
  EXPECT_EQ(got[21].code(), grpc::OK) << got[21].message();
  EXPECT_EQ(got[22].code(), grpc::INVALID_ARGUMENT) << got[22].message();
  EXPECT_EQ(got[23].code(), grpc::INVALID_ARGUMENT) << got[23].message();
  EXPECT_EQ(got[24].code(), grpc::OK) << got[24].message();
  for (auto [id, offset, buf_off] : {std::tuple<uint64_t, uint64_t, size_t>{21, 5 * kMiB + 3, 0},
                                     {24, 6 * kMiB + 5, 4096}}) {
    for (const SaltMap::Piece& p : salts_.Pieces(offset, 4096)) {
      const std::span<const std::byte> bytes(bad_buf_->data() + buf_off + (p.offset - offset),
                                             p.length);
      EXPECT_FALSE(PatternMismatch(PatternSeed("vol0", p.salt), p.offset, bytes).has_value())
          << "stream op " << id << " moved other bytes";
    }
  }

  // Past 1024 ops in one message: every op is still answered exactly once, the extra ones
  // with INVALID_ARGUMENT naming the cap.
  v1::StreamRequest big;
  for (uint64_t id = 1000; id < 1000 + 1030; ++id) big.add_ops()->set_id(id);
  ASSERT_TRUE(rw->Write(big));
  std::map<uint64_t, v1::StreamResult> answers;
  while (answers.size() < 1030) {
    v1::StreamResponse resp;
    ASSERT_TRUE(rw->Read(&resp));
    for (const auto& r : resp.results()) {
      EXPECT_TRUE(answers.emplace(r.id(), r).second) << "id " << r.id() << " answered twice";
    }
  }
  for (uint64_t id = 1000; id < 1000 + 1030; ++id) {
    EXPECT_EQ(answers[id].code(), grpc::INVALID_ARGUMENT);
    if (id >= 1000 + 1024) {
      EXPECT_NE(answers[id].message().find("1024"), std::string::npos);
    }
  }
  ASSERT_TRUE(rw->WritesDone());
  v1::StreamResponse tail;
  EXPECT_FALSE(rw->Read(&tail));
  grpc::Status fin = rw->Finish();
  EXPECT_TRUE(fin.ok()) << fin.error_message();
  ExpectGoodOpFromOtherClient("batched stream");
}

}  // namespace
}  // namespace gdr::integ
