// Per-op options (gdrstore::OpOptions) against a real daemon: an op's own deadline fails that op
// alone while the Client's other ops go on (unary and on a Stream), CRC32C asked for by one op
// of a Client that does not ask for it (and the reverse), sync refused on a get; the same on a
// ClusterClient's ops.
#include <gtest/gtest.h>

#include <fstream>
#include <future>
#include <optional>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/base/crc32c.h"
#include "common/base/pattern.h"
#include "gdrstore/client.h"
#include "gdrstore/cluster.h"
#include "tests/integration/daemon_process.h"

namespace gdr::integ {
namespace {

using gdrstore::OpKind;
using gdrstore::OpOptions;
using gdrstore::OpResult;

// A Client, a buffer and a Stream of it; all null but what opened when something failed.
struct Session {
  std::unique_ptr<gdrstore::Client> client;
  std::unique_ptr<gdrstore::Buffer> buf;
  std::unique_ptr<gdrstore::OpStream> stream;
};

// One op on `stream`, its answer to come.
std::future<absl::StatusOr<OpResult>> Submitted(gdrstore::OpStream& stream, OpKind kind,
                                                const gdrstore::Extent& extent,
                                                const gdrstore::Buffer& buf, size_t offset,
                                                const OpOptions& options = {}) {
  auto answer = std::make_shared<std::promise<absl::StatusOr<OpResult>>>();
  stream.Submit(
      kind, extent, buf, offset,
      [answer](absl::StatusOr<OpResult> r) { answer->set_value(std::move(r)); }, options);
  return answer->get_future();
}

// Every op on volume "slow" is held far longer than any deadline below; "fast" is not.
class OpOptionsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto started = DaemonProcess::Start(
        {"--volume", "fast=8MiB", "--volume", "slow=8MiB", "--fault",
         "kind=stall,volume=slow,delay=60s"});
    ASSERT_TRUE(started.ok()) << started.status();
    daemon_ = std::move(*started);
  }
  // The Client's own timeout lies far beyond the test's run: an op ends early by its own only.
  Session Open(bool crc_every_op, size_t bytes) {
    gdrstore::ClientOptions options;
    options.rpc_timeout = std::chrono::minutes(10);
    options.crc32c = crc_every_op;
    options.daemon_address = daemon_->address();
    Session s;
    absl::StatusOr<std::unique_ptr<gdrstore::Client>> client = gdrstore::Client::Connect(options);
    EXPECT_TRUE(client.ok()) << client.status();
    if (!client.ok()) return s;
    s.client = *std::move(client);
    auto buf = s.client->AllocateBuffer(bytes);
    EXPECT_TRUE(buf.ok()) << buf.status();
    if (!buf.ok()) return s;
    s.buf = *std::move(buf);
    auto stream = s.client->OpenStream();
    EXPECT_TRUE(stream.ok()) << stream.status();
    if (stream.ok()) s.stream = *std::move(stream);
    return s;
  }
  std::unique_ptr<DaemonProcess> daemon_;
};

TEST_F(OpOptionsTest, AnOpsOwnDeadlineFailsThatOpAloneOnAUnaryCall) {
  Session s = Open(false, 8192);
  ASSERT_NE(s.stream, nullptr);
  std::future<absl::StatusOr<OpResult>> held =
      s.client->SubmitAsync(OpKind::kWrite, {"slow", 0, 4096}, *s.buf, 0,
                            OpOptions::WithTimeout(std::chrono::seconds(1)));
  // Sent while the held op is in flight, with the Client's deadline: answered.
  auto fast = s.client->Write({"fast", 0, 4096}, *s.buf, 4096);
  EXPECT_TRUE(fast.ok()) << fast.status();
  absl::StatusOr<OpResult> r = held.get();
  EXPECT_TRUE(absl::IsDeadlineExceeded(r.status())) << r.status();
  // The Client goes on after the expiry.
  auto after = s.client->Read({"fast", 4096, 4096}, *s.buf, 0);
  EXPECT_TRUE(after.ok()) << after.status();
}

TEST_F(OpOptionsTest, AStreamOpWithItsOwnDeadlineFailsAloneAndTheStreamGoesOn) {
  Session s = Open(false, 8192);
  ASSERT_NE(s.stream, nullptr);
  auto held = Submitted(*s.stream, OpKind::kWrite, {"slow", 0, 4096}, *s.buf, 0,
                        OpOptions::WithTimeout(std::chrono::seconds(1)));
  auto fast = Submitted(*s.stream, OpKind::kWrite, {"fast", 0, 4096}, *s.buf, 4096);
  absl::StatusOr<OpResult> f = fast.get();
  EXPECT_TRUE(f.ok()) << f.status();
  absl::StatusOr<OpResult> h = held.get();
  EXPECT_TRUE(absl::IsDeadlineExceeded(h.status())) << h.status();
  EXPECT_TRUE(absl::StrContains(h.status().message(), "OpOptions::deadline")) << h.status();
  absl::StatusOr<OpResult> a =
      Submitted(*s.stream, OpKind::kRead, {"fast", 4096, 4096}, *s.buf, 0).get();
  EXPECT_TRUE(a.ok()) << a.status();
}

TEST_F(OpOptionsTest, OneOpAsksForTheCrcOfItsBytesAndOneOpDeclinesIt) {
  std::vector<std::byte> expect(65536);
  PatternFill(PatternSeed("fast"), 100, expect);
  const uint32_t fill_crc = Crc32c(expect.data(), expect.size());
  struct Case {
    bool every_op;           // ClientOptions::crc32c
    std::optional<bool> op;  // OpOptions::crc32c
    bool asked;              // what the op does
  };
  for (const Case& k : {Case{false, true, true}, Case{false, std::nullopt, false},
                        Case{true, false, false}, Case{true, std::nullopt, true}}) {
    SCOPED_TRACE(testing::Message() << "client " << k.every_op << ", op "
                                    << (k.op ? (*k.op ? "on" : "off") : "unset"));
    Session s = Open(k.every_op, expect.size());
    ASSERT_NE(s.stream, nullptr);
    OpOptions o;
    o.crc32c = k.op;
    auto r = s.client->Write({"fast", 100, expect.size()}, *s.buf, 0, o);
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(r->crc32c.has_value(), k.asked);
    if (k.asked) {
      EXPECT_EQ(*r->crc32c, fill_crc);
    }
    // On the Stream: a put (clear of the extent above), whose CRC is the buffer's.
    auto put = Submitted(*s.stream, OpKind::kRead, {"fast", 1 << 20, 4096}, *s.buf, 0, o).get();
    ASSERT_TRUE(put.ok()) << put.status();
    ASSERT_EQ(put->crc32c.has_value(), k.asked);
    if (k.asked) {
      EXPECT_EQ(*put->crc32c, Crc32c(s.buf->data(), 4096));
    }
    EXPECT_TRUE(s.stream->Close().ok());
  }
}

TEST_F(OpOptionsTest, SyncOnAGetIsRefusedNamingTheOption) {
  Session s = Open(false, 4096);
  ASSERT_NE(s.stream, nullptr);
  OpOptions sync;
  sync.sync = true;
  auto r = s.client->Write({"fast", 0, 4096}, *s.buf, 0, sync);
  EXPECT_TRUE(absl::IsInvalidArgument(r.status())) << r.status();
  EXPECT_TRUE(absl::StrContains(r.status().message(), "OpOptions::sync")) << r.status();
  auto streamed = Submitted(*s.stream, OpKind::kWrite, {"fast", 0, 4096}, *s.buf, 0, sync).get();
  EXPECT_TRUE(absl::IsInvalidArgument(streamed.status())) << streamed.status();
  // A put with sync on a memory volume is answered (there is nothing to msync).
  auto put = s.client->Read({"fast", 0, 4096}, *s.buf, 0, sync);
  EXPECT_TRUE(put.ok()) << put.status();
}

// The same options on a one-member cluster (a members file): sync refused on a get, CRC32C
// checked on each piece, and the op's own deadline ending a put the member holds.
TEST_F(OpOptionsTest, AClusterOpTakesTheSameOptions) {
  const std::string members = daemon_->dir() + "/members.json";
  {
    auto layout = [](const char* name) {
      return absl::StrCat("{\"name\":\"", name, "\",\"stripe_unit\":\"1048576\",",
                          "\"members\":[\"m0\"],\"replicas\":1,\"epoch\":\"1\",",
                          "\"size\":\"8388608\"}");
    };
    std::ofstream f(members);
    f << "{\"members\":[{\"id\":\"m0\",\"address\":\"" << daemon_->address()
      << "\",\"volumes\":[{\"name\":\"fast\",\"size\":\"8388608\"},"
      << "{\"name\":\"slow\",\"size\":\"8388608\"}]}],\"volumes\":[" << layout("fast")
      << "," << layout("slow") << "]}\n";
  }
  gdrstore::ClusterOptions o;
  o.members_file = members;
  o.client.rpc_timeout = std::chrono::minutes(10);
  auto cluster = gdrstore::ClusterClient::Open(o);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  auto buf = (*cluster)->AllocateBuffer(4096);
  ASSERT_TRUE(buf.ok()) << buf.status();
  OpOptions sync;
  sync.sync = true;
  absl::Status refused = (*cluster)->Get("fast", 0, 4096, **buf, 0, sync);
  EXPECT_TRUE(absl::IsInvalidArgument(refused)) << refused;
  EXPECT_TRUE(absl::StrContains(refused.message(), "OpOptions::sync")) << refused;
  OpOptions crc;
  crc.crc32c = true;
  EXPECT_TRUE((*cluster)->Get("fast", 0, 4096, **buf, 0, crc).ok());
  EXPECT_TRUE((*cluster)->Put("fast", 4096, 4096, **buf, 0, crc).ok());
  // Last: a member that misses a deadline is passed over for a while.
  absl::Status held = (*cluster)->Put("slow", 0, 4096, **buf, 0,
                                      OpOptions::WithTimeout(std::chrono::seconds(1)));
  EXPECT_TRUE(absl::IsDeadlineExceeded(held)) << held;
}

}  // namespace
}  // namespace gdr::integ
