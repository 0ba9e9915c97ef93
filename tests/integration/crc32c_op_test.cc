// CRC32C on request: a real daemon computes it over the store bytes an op moved; the client
// library checks it against the buffer (unary and Stream), and its check fails an op whose
// bytes differ; gdrctl --crc.
#include <gtest/gtest.h>

#include <future>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "client/src/buffer_crc.h"
#include "common/base/crc32c.h"
#include "common/base/pattern.h"
#include "gdrstore/client.h"
#include "tests/integration/daemon_process.h"

namespace gdr::integ {
namespace {

constexpr uint64_t kMiB = 1 << 20;

class Crc32cOpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto d = DaemonProcess::Start({"--volume", "vol0=64MiB"});
    ASSERT_TRUE(d.ok()) << d.status();
    daemon_ = std::move(*d);
  }
  std::unique_ptr<gdrstore::Client> Connect(bool crc) {
    gdrstore::ClientOptions o;
    o.daemon_address = daemon_->address();
    o.crc32c = crc;
    auto c = gdrstore::Client::Connect(o);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? std::move(*c) : nullptr;
  }
  std::unique_ptr<DaemonProcess> daemon_;
};

TEST_F(Crc32cOpTest, TheDaemonsCrcIsOfTheStoreBytesAndTheClientChecksIt) {
  auto c = Connect(true);
  ASSERT_NE(c, nullptr);
  auto buf = c->AllocateBuffer(9 * kMiB);
  ASSERT_TRUE(buf.ok());
  const uint64_t seed = PatternSeed("vol0");
  uint64_t offset = 12345;  // each size on extents of its own: the puts change the fill
  for (uint64_t len : {uint64_t{1}, uint64_t{4095}, 3 * kMiB + 7, 8 * kMiB}) {
    offset += 16 * kMiB;
    if (offset + len > 64 * kMiB) offset = 12345;
    // A get: the volume's initial fill, whose CRC this test computes on its own.
    auto r = c->Write({"vol0", offset, len}, **buf, 3);
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_TRUE(r->crc32c.has_value());
    std::vector<std::byte> expect(len);
    PatternFill(seed, offset, expect);
    EXPECT_EQ(*r->crc32c, Crc32c(expect.data(), len)) << len;
    // A put of other bytes: the CRC of what is now in the store is the buffer's.
    PatternFill(PatternSeed("vol0", 9), 0, std::span((*buf)->data() + 3, len));
    auto w = c->Read({"vol0", offset, len}, **buf, 3);
    ASSERT_TRUE(w.ok()) << w.status();
    ASSERT_TRUE(w->crc32c.has_value());
    EXPECT_EQ(*w->crc32c, Crc32c((*buf)->data() + 3, len));
  }
  // Over a Stream too.
  auto stream = c->OpenStream();
  ASSERT_TRUE(stream.ok());
  std::promise<absl::StatusOr<gdrstore::OpResult>> got;
  (*stream)->Submit(gdrstore::OpKind::kWrite, {"vol0", 7, 2 * kMiB}, **buf, 0,
                    [&](absl::StatusOr<gdrstore::OpResult> r) { got.set_value(std::move(r)); });
  auto sr = got.get_future().get();
  ASSERT_TRUE(sr.ok()) << sr.status();
  ASSERT_TRUE(sr->crc32c.has_value());
  EXPECT_EQ(*sr->crc32c, Crc32c((*buf)->data(), 2 * kMiB));
  EXPECT_TRUE((*stream)->Close().ok());

  // Without asking, no CRC.
  auto plain = Connect(false);
  ASSERT_NE(plain, nullptr);
  auto pbuf = plain->AllocateBuffer(4096);
  ASSERT_TRUE(pbuf.ok());
  auto p = plain->Write({"vol0", 0, 4096}, **pbuf);
  ASSERT_TRUE(p.ok());
  EXPECT_FALSE(p->crc32c.has_value());
}

TEST_F(Crc32cOpTest, TheCheckFailsWhenTheBytesDifferNamingBothValues) {
  auto c = Connect(true);
  ASSERT_NE(c, nullptr);
  auto buf = c->AllocateBuffer(64 * 1024);
  ASSERT_TRUE(buf.ok());
  auto r = c->Write({"vol0", 0, 64 * 1024}, **buf);
  ASSERT_TRUE(r.ok() && r->crc32c) << r.status();
  EXPECT_TRUE(CheckCrc32c(r->crc32c, **buf, 0, 64 * 1024).ok());
  (*buf)->data()[1000] ^= std::byte{0x01};  // one bit flipped after the daemon's CRC
  absl::Status bad = CheckCrc32c(r->crc32c, **buf, 0, 64 * 1024);
  EXPECT_TRUE(absl::IsDataLoss(bad)) << bad;
  EXPECT_TRUE(absl::StrContains(bad.message(), absl::StrFormat("daemon 0x%08x", *r->crc32c)))
      << bad;
  EXPECT_TRUE(absl::IsFailedPrecondition(CheckCrc32c(std::nullopt, **buf, 0, 10)));
}

TEST_F(Crc32cOpTest, GdrctlCrcChecksEveryOp) {
  auto dir = TempDir::Create("gdrctl-crc");
  ASSERT_TRUE(dir.ok());
  for (const char* cmd : {"write", "read"}) {
    auto run = RunProcess({GDR_GDRCTL_BIN, "--daemon", daemon_->address(), "--crc", cmd, "-o",
                           "4097", "-s", "3MiB"},
                          (*dir)->path(), cmd, absl::Seconds(60));
    ASSERT_TRUE(run.ok());
    EXPECT_EQ(run->exit_code, 0) << run->Describe();
  }
  auto bench = RunProcess({GDR_GDRCTL_BIN, "--daemon", daemon_->address(), "--crc", "bench",
                           "-s", "1MiB", "-n", "32", "--qd", "4", "-q"},
                          (*dir)->path(), "bench", absl::Seconds(60));
  ASSERT_TRUE(bench.ok());
  EXPECT_EQ(bench->exit_code, 0) << bench->Describe();
}

}  // namespace
}  // namespace gdr::integ
