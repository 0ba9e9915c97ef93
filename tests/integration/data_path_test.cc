// Case 1: verified Writes and Reads through libgdrclient against a real gdrstored process.
// Sizes are log-uniform from 1 B to 64 MiB (both ends included exactly), volume offsets and
// buffer offsets unaligned. Every Write is checked byte for byte against the pattern model;
// every Read stores a salted pattern that a Write back then proves landed.
#include <grpcpp/grpcpp.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <future>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/base/pattern.h"
#include "gdrstore/client.h"
#include "gdrstore/v1/gdrstore.grpc.pb.h"
#include "tests/integration/daemon_process.h"
#include "tests/integration/verified_ops.h"

namespace gdr::integ {
namespace {

constexpr uint64_t kMiB = 1 << 20;
constexpr uint64_t kVolumeSize = 512 * kMiB;
constexpr uint64_t kMaxOp = 64 * kMiB;
constexpr size_t kSlack = 8192;  // room for unaligned buffer offsets and guard bytes

class DataPathTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto d = DaemonProcess::Start({"--volume", absl::StrCat("vol0=", kVolumeSize)});
    ASSERT_TRUE(d.ok()) << d.status();
    daemon_ = std::move(*d);
    gdrstore::ClientOptions o;
    o.daemon_address = daemon_->address();
    auto c = gdrstore::Client::Connect(o);
    ASSERT_TRUE(c.ok()) << c.status();
    client_ = std::move(*c);
  }
  void TearDown() override {
    client_.reset();
    if (daemon_) {
      auto st = daemon_->Terminate(absl::Seconds(30));
      ASSERT_TRUE(st.ok()) << st.status();
      EXPECT_EQ(DescribeWaitStatus(*st), "exited 0") << daemon_->Stderr();
    }
  }
  std::unique_ptr<DaemonProcess> daemon_;
  std::unique_ptr<gdrstore::Client> client_;
};

TEST_F(DataPathTest, ThousandVerifiedUnalignedOps) {
  auto buf = client_->AllocateBuffer(kMaxOp + kSlack);
  ASSERT_TRUE(buf.ok()) << buf.status();
  std::mt19937_64 rng(0x6d72a11c0ffee);  // seeded: a failure reproduces
  const double log_max = std::log(static_cast<double>(kMaxOp) + 1.0);
  std::uniform_real_distribution<double> log_size(0.0, log_max);
  SaltMap salts(kVolumeSize);
  uint64_t moved = 0;
  int unaligned_volume = 0, unaligned_buffer = 0, reads = 0, writes = 0;
  bool saw_min = false, saw_max = false;
  const absl::Time t0 = absl::Now();
  for (int i = 0; i < 1000; ++i) {
    uint64_t len;
    switch (i) {
      case 0:
      case 3:
        len = 1;
        break;
      case 1:
      case 2:
        len = kMaxOp;
        break;
      default:
        len = std::clamp<uint64_t>(static_cast<uint64_t>(std::exp(log_size(rng))), 1, kMaxOp);
    }
    saw_min |= len == 1;
    saw_max |= len == kMaxOp;
    // Every 50th op ends exactly at the end of the volume.
    uint64_t offset = i % 50 == 49 ? kVolumeSize - len : rng() % (kVolumeSize - len + 1);
    const size_t boff = kGuardBytes + rng() % 4096;
    const size_t check_off = kGuardBytes + rng() % 4096;
    unaligned_volume += offset % 8 != 0;
    unaligned_buffer += boff % 8 != 0;
    const gdrstore::Extent extent{"vol0", offset, len};
    const bool is_read = i % 2 == 0 ? (i / 2) % 2 == 1 : (rng() & 1);
    absl::Status s;
    if (is_read) {
      ++reads;
      const uint64_t salt = 1 + rng() % 1000000;
      s = VerifiedRead(*client_, **buf, boff, check_off, extent, salt, &salts);
      moved += 2 * len;
    } else {
      ++writes;
      s = VerifiedWrite(*client_, **buf, boff, extent, salts);
      moved += len;
    }
    ASSERT_TRUE(s.ok()) << "op " << i << ": " << s << "\ndaemon stderr:\n" << daemon_->Stderr();
  }
  const double secs = absl::ToDoubleSeconds(absl::Now() - t0);
  EXPECT_TRUE(saw_min && saw_max);
  EXPECT_GT(reads, 300);
  EXPECT_GT(writes, 300);
  EXPECT_GT(unaligned_volume, 800);
  EXPECT_GT(unaligned_buffer, 800);
  RecordProperty("bytes_moved", std::to_string(moved));
  std::printf("1000 verified ops (%d writes, %d reads), %.2f GB moved in %.1f s\n", writes, reads,
              moved / 1e9, secs);
}

// Many Writes in flight on one Stream call, each into its own unaligned slot of one buffer;
// all verified once answered (Writes leave the store as it is, so overlapping extents are fine).
TEST_F(DataPathTest, StreamedWritesInFlightAreVerified) {
  constexpr int kOps = 96;
  constexpr size_t kSlot = 4 * kMiB + kSlack;
  constexpr int kSlots = 16;
  auto buf = client_->AllocateBuffer(kSlot * kSlots);
  ASSERT_TRUE(buf.ok()) << buf.status();
  auto stream = client_->OpenStream();
  ASSERT_TRUE(stream.ok()) << stream.status();
  std::mt19937_64 rng(42);
  for (int round = 0; round < kOps / kSlots; ++round) {
    std::vector<std::future<absl::StatusOr<gdrstore::OpResult>>> futures;
    std::vector<gdrstore::Extent> extents;
    std::vector<size_t> offsets;
    for (int s = 0; s < kSlots; ++s) {
      const uint64_t len = 1 + rng() % (4 * kMiB);
      const gdrstore::Extent e{"vol0", rng() % (kVolumeSize - len), len};
      const size_t boff = s * kSlot + kGuardBytes + rng() % 4096;
      std::memset((*buf)->data() + boff, 0, len);
      (*buf)->data()[boff] = static_cast<std::byte>(~PatternByte(PatternSeed("vol0"), e.offset));
      auto p = std::make_shared<std::promise<absl::StatusOr<gdrstore::OpResult>>>();
      futures.push_back(p->get_future());
      (*stream)->Submit(gdrstore::OpKind::kWrite, e, **buf, boff,
                        [p](absl::StatusOr<gdrstore::OpResult> r) { p->set_value(std::move(r)); });
      extents.push_back(e);
      offsets.push_back(boff);
    }
    for (int s = 0; s < kSlots; ++s) {
      ASSERT_EQ(futures[s].wait_for(std::chrono::seconds(60)), std::future_status::ready);
      auto r = futures[s].get();
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_EQ(r->bytes, extents[s].length);
      std::span<const std::byte> got((*buf)->data() + offsets[s], extents[s].length);
      auto bad = PatternMismatch(PatternSeed("vol0"), extents[s].offset, got);
      ASSERT_FALSE(bad.has_value()) << "slot " << s << " mismatch at " << *bad;
    }
  }
  EXPECT_TRUE((*stream)->Close().ok());
}

// tcp's inline answers (TcpEndpoint.inline_max, the daemon's --tcp-inline-max, 16 KiB by
// default): small unary Writes come back verified with no daemon link ever connected to this
// client's target; a larger Write opens one, as do small Writes on a Stream (the library offers
// inline answers on unary calls only); and a client that takes none (ClientOptions::
// tcp_inline_max 0) gets even a 4 KiB unary Write over a link.
TEST_F(DataPathTest, SmallWritesAreAnsweredInlineAndTheRestOverLinks) {
  auto buf = client_->AllocateBuffer(2 * kMiB);
  ASSERT_TRUE(buf.ok()) << buf.status();
  SaltMap salts(kVolumeSize);
  std::mt19937_64 rng(7);
  for (int i = 0; i < 40; ++i) {
    const uint64_t len = 1 + rng() % (16 << 10);
    const gdrstore::Extent e{"vol0", rng() % (kVolumeSize - len), len};
    ASSERT_TRUE(VerifiedWrite(*client_, **buf, kGuardBytes + rng() % 4096, e, salts).ok());
  }
  EXPECT_EQ(client_->transport_info().target.links, 0u) << "a small Write went over a link";
  auto stream = client_->OpenStream();
  ASSERT_TRUE(stream.ok()) << stream.status();
  std::vector<std::future<absl::StatusOr<gdrstore::OpResult>>> futures;
  for (int i = 0; i < 64; ++i) {
    const gdrstore::Extent e{"vol0", uint64_t(i) * 12345, 4096};
    auto p = std::make_shared<std::promise<absl::StatusOr<gdrstore::OpResult>>>();
    futures.push_back(p->get_future());
    (*stream)->Submit(gdrstore::OpKind::kWrite, e, **buf, size_t(i) * 8192,
                      [p](absl::StatusOr<gdrstore::OpResult> r) { p->set_value(std::move(r)); });
  }
  for (int i = 0; i < 64; ++i) {
    ASSERT_EQ(futures[i].wait_for(std::chrono::seconds(60)), std::future_status::ready);
    auto r = futures[i].get();
    ASSERT_TRUE(r.ok()) << r.status();
    std::span<const std::byte> got((*buf)->data() + size_t(i) * 8192, 4096);
    ASSERT_EQ(PatternMismatch(PatternSeed("vol0"), uint64_t(i) * 12345, got), std::nullopt)
        << "stream op " << i;
  }
  EXPECT_TRUE((*stream)->Close().ok());
  EXPECT_GE(client_->transport_info().target.links, 1u) << "the Stream's Writes took no link";
  ASSERT_TRUE(VerifiedWrite(*client_, **buf, kGuardBytes, {"vol0", 4096, kMiB}, salts).ok());

  gdrstore::ClientOptions o;
  o.daemon_address = daemon_->address();
  o.tcp_inline_max = 0;
  auto plain = gdrstore::Client::Connect(o);
  ASSERT_TRUE(plain.ok()) << plain.status();
  auto pbuf = (*plain)->AllocateBuffer(64 << 10);
  ASSERT_TRUE(pbuf.ok()) << pbuf.status();
  ASSERT_TRUE(VerifiedWrite(**plain, **pbuf, kGuardBytes, {"vol0", 99, 4096}, salts).ok());
  EXPECT_GE((*plain)->transport_info().target.links, 1u);
}

// The daemon's side of inline answers on a Stream, for any client that offers them: a raw
// Stream of 100 16 KiB Writes in one message, whose endpoint offers inline answers and names a
// port nobody listens on, is answered with every op's bytes (the target is never contacted),
// in more than one answer message (at most 1 MiB of inline bytes a message).
TEST_F(DataPathTest, ADaemonAnswersStreamWritesInlineToAClientThatOffers) {
  auto channel = grpc::CreateChannel(daemon_->address(), grpc::InsecureChannelCredentials());
  auto stub = gdrstore::v1::GdrStore::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  auto rw = stub->Stream(&ctx);
  constexpr int kOps = 100;
  constexpr uint64_t kLen = 16 << 10;
  gdrstore::v1::StreamRequest req;
  for (int i = 0; i < kOps; ++i) {
    gdrstore::v1::StreamOp* op = req.add_ops();
    op->set_id(1000 + i);
    gdrstore::v1::WriteRequest* w = op->mutable_write();
    w->mutable_extent()->set_volume("vol0");
    w->mutable_extent()->set_offset(uint64_t(i) * 77777);
    w->mutable_extent()->set_length(kLen);
    w->mutable_buffer()->set_address(0x10000 + uint64_t(i) * kLen);
    w->mutable_buffer()->set_length(kLen);
    w->mutable_buffer()->set_rkey(7);
    gdrstore::v1::TcpEndpoint* tcp = w->mutable_buffer()->mutable_tcp();
    tcp->set_host("127.0.0.1");
    tcp->set_port(9);  // discard: nothing listens, and nothing needs to
    tcp->set_secret(std::string(32, 's'));
    tcp->set_inline_max(64 << 10);
  }
  ASSERT_TRUE(rw->Write(req));
  ASSERT_TRUE(rw->WritesDone());
  int answered = 0, messages = 0;
  gdrstore::v1::StreamResponse resp;
  while (rw->Read(&resp)) {
    ++messages;
    for (const gdrstore::v1::StreamResult& r : resp.results()) {
      ASSERT_EQ(r.code(), 0) << r.message();
      const uint64_t i = r.id() - 1000;
      ASSERT_LT(i, uint64_t{kOps});
      ASSERT_EQ(r.data().size(), kLen) << "op " << i;
      std::span<const std::byte> got(reinterpret_cast<const std::byte*>(r.data().data()), kLen);
      ASSERT_EQ(PatternMismatch(PatternSeed("vol0"), i * 77777, got), std::nullopt) << "op " << i;
      ++answered;
    }
  }
  EXPECT_TRUE(rw->Finish().ok());
  EXPECT_EQ(answered, kOps);
  EXPECT_GE(messages, 2) << "1.6 MiB of inline bytes in one answer message";
}

// An OpStream spreads its ops over several Stream calls (ClientOptions::stream_calls, 4 by
// default; StreamOptions::calls for one stream): the daemon sees that many Stream calls open,
// every op is answered and verified whichever call it went on, and the calls end with Close.
// Out-of-range counts are refused naming the option.
TEST_F(DataPathTest, AStreamSpreadsItsOpsOverItsCalls) {
  constexpr size_t kOp = 64 << 10;
  constexpr int kOps = 64;
  auto buf = client_->AllocateBuffer(kOps * kOp);
  ASSERT_TRUE(buf.ok()) << buf.status();
  auto open_streams = [&]() -> int64_t {
    auto st = client_->GetStats();
    return st.ok() ? st->admission().open_streams() : -1;
  };
  // Waits (10 s at most) until the daemon counts `want` Stream calls open.
  auto await_open = [&](int64_t want) {
    const absl::Time end = absl::Now() + absl::Seconds(10);
    while (open_streams() != want && absl::Now() < end) absl::SleepFor(absl::Milliseconds(20));
    return open_streams();
  };
  for (const uint32_t calls : {0u, 1u, 3u}) {  // 0: the client's default, 4
    SCOPED_TRACE(absl::StrCat("StreamOptions::calls ", calls));
    gdrstore::StreamOptions so;
    so.calls = calls;
    auto stream = client_->OpenStream(so);
    ASSERT_TRUE(stream.ok()) << stream.status();
    std::vector<std::future<absl::StatusOr<gdrstore::OpResult>>> futures;
    for (int i = 0; i < kOps; ++i) {
      std::memset((*buf)->data() + i * kOp, 0, kOp);
      auto p = std::make_shared<std::promise<absl::StatusOr<gdrstore::OpResult>>>();
      futures.push_back(p->get_future());
      (*stream)->Submit(gdrstore::OpKind::kWrite, {"vol0", i * 3 * kOp + calls, kOp}, **buf,
                        i * kOp,
                        [p](absl::StatusOr<gdrstore::OpResult> r) { p->set_value(std::move(r)); });
    }
    for (int i = 0; i < kOps; ++i) {
      ASSERT_EQ(futures[i].wait_for(std::chrono::seconds(60)), std::future_status::ready);
      auto r = futures[i].get();
      ASSERT_TRUE(r.ok()) << "op " << i << ": " << r.status();
      std::span<const std::byte> got((*buf)->data() + i * kOp, kOp);
      auto bad = PatternMismatch(PatternSeed("vol0"), i * 3 * kOp + calls, got);
      ASSERT_FALSE(bad.has_value()) << "op " << i << " mismatch at " << *bad;
    }
    EXPECT_EQ(await_open(calls == 0 ? 4 : calls), calls == 0 ? 4 : calls);
    EXPECT_TRUE((*stream)->Close().ok());
    EXPECT_EQ(await_open(0), 0);
  }
  gdrstore::StreamOptions too_many;
  too_many.calls = gdrstore::kMaxStreamCalls + 1;
  auto refused = client_->OpenStream(too_many);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(refused.status().message()), ::testing::HasSubstr("StreamOptions::calls"));
  gdrstore::StreamOptions big_batch;
  big_batch.max_ops_per_message = 1025;
  refused = client_->OpenStream(big_batch);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(std::string(refused.status().message()),
              ::testing::HasSubstr("StreamOptions::max_ops_per_message"));
  gdrstore::ClientOptions none;
  none.daemon_address = daemon_->address();
  none.stream_calls = 0;
  auto c = gdrstore::Client::Connect(none);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(c.status().message()), ::testing::HasSubstr("ClientOptions::stream_calls"));
}

}  // namespace
}  // namespace gdr::integ
