// One test body over every kind of Store (store.h), through Store& only: a Client of one real
// daemon, and a ClusterClient of two real daemons registered in a real etcd (skipped without
// /usr/bin/etcd). Puts and gets verified, async submit, volumes listed, made and deleted, and
// the errors a caller gets named: an unknown volume, an extent past the end, a range outside
// the buffer, another Store's buffer, sync on a get.
#include <gtest/gtest.h>

#include <future>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/base/pattern.h"
#include "gdrstore/client.h"
#include "gdrstore/cluster.h"
#include "gdrstore/store.h"
#include "tests/common/etcd_server.h"
#include "tests/integration/child_process.h"
#include "tests/integration/daemon_process.h"

namespace gdr::integ {
namespace {

constexpr uint64_t kMiB = 1 << 20;

enum class Kind { kClient, kCluster };

class StoreTest : public ::testing::TestWithParam<Kind> {
 protected:
  void SetUp() override {
    if (GetParam() == Kind::kClient) {
      auto d = DaemonProcess::Start({"--volume", "vol0=16MiB"});
      ASSERT_TRUE(d.ok()) << d.status();
      daemons_.push_back(*std::move(d));
      gdrstore::ClientOptions o;
      o.daemon_address = daemons_[0]->address();
      auto c = gdrstore::Client::Connect(o);
      ASSERT_TRUE(c.ok()) << c.status();
      store_ = *std::move(c);
      return;
    }
    if (absl::Status st = EtcdServer::Available(); !st.ok()) GTEST_SKIP() << st.message();
    auto etcd = EtcdServer::Create();
    ASSERT_TRUE(etcd.ok()) << etcd.status();
    etcd_ = *std::move(etcd);
    for (int i = 0; i < 2; ++i) {
      auto d = DaemonProcess::Start({"--cluster", etcd_->url("store-test"), "--cluster-id",
                                     absl::StrCat("m", i), "--volume", "vol0=16MiB"});
      ASSERT_TRUE(d.ok()) << d.status();
      daemons_.push_back(*std::move(d));
    }
    gdrstore::ClusterOptions o;
    o.etcd_url = etcd_->url("store-test");
    auto c = gdrstore::ClusterClient::Open(o);
    ASSERT_TRUE(c.ok()) << c.status();
    gdrstore::ClusterClient& cluster = **c;
    // Both members registered (each registers as it starts serving).
    ASSERT_TRUE(PollUntil(
        [&] {
          size_t present = 0;
          for (const auto& m : cluster.Members()) present += m.present;
          return present == 2;
        },
        absl::Seconds(30), absl::Milliseconds(50)));
    auto l = cluster.CreateVolume("vol0", kMiB, 1, {});
    ASSERT_TRUE(l.ok()) << l.status();
    store_ = *std::move(c);
  }

  // A Buffer of a Store other than store_: a Client of the first daemon.
  std::unique_ptr<gdrstore::Buffer> ForeignBuffer(size_t bytes) {
    gdrstore::ClientOptions o;
    o.daemon_address = daemons_[0]->address();
    auto c = gdrstore::Client::Connect(o);
    EXPECT_TRUE(c.ok()) << c.status();
    if (!c.ok()) return nullptr;
    foreign_ = *std::move(c);
    auto b = foreign_->AllocateBuffer(bytes);
    EXPECT_TRUE(b.ok()) << b.status();
    return b.ok() ? *std::move(b) : nullptr;
  }

  std::unique_ptr<EtcdServer> etcd_;
  std::vector<std::unique_ptr<DaemonProcess>> daemons_;
  std::unique_ptr<gdrstore::Client> foreign_;
  std::unique_ptr<gdrstore::Store> store_;
};

std::unique_ptr<gdrstore::Buffer> Allocate(gdrstore::Store& s, size_t bytes) {
  auto b = s.AllocateBuffer(bytes);
  EXPECT_TRUE(b.ok()) << b.status();
  return b.ok() ? *std::move(b) : nullptr;
}

// A put of the (volume, salt) pattern at `offset`, then a get into a fresh buffer checked.
void PutGetVerified(gdrstore::Store& s, const std::string& volume, uint64_t offset,
                    uint64_t n) {
  std::unique_ptr<gdrstore::Buffer> out = Allocate(s, n);
  std::unique_ptr<gdrstore::Buffer> in = Allocate(s, n);
  ASSERT_NE(out, nullptr);
  ASSERT_NE(in, nullptr);
  gdr::PatternFill(gdr::PatternSeed(volume, 7), offset, std::span<std::byte>(out->data(), n));
  ASSERT_TRUE(s.Put(volume, offset, n, *out).ok());
  absl::Status st = s.Get(volume, offset, n, *in);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(gdr::PatternMismatch(gdr::PatternSeed(volume, 7), offset,
                                 std::span<const std::byte>(in->data(), n)),
            std::nullopt)
      << "on " << s.ConnectedTo();
}

TEST_P(StoreTest, PutGetAsyncVolumesAndErrorsThroughStore) {
  gdrstore::Store& s = *store_;
  const char* connected = GetParam() == Kind::kClient ? "daemon 127.0.0.1:" : "cluster etcd://";
  EXPECT_TRUE(absl::StartsWith(s.ConnectedTo(), connected)) << s.ConnectedTo();

  // Blocking, across stripe units on a cluster (1 MiB units over two members).
  PutGetVerified(s, "vol0", kMiB / 2, 3 * kMiB);

  // Async: a get answered through its callback, with the bytes and the buffer's path.
  std::unique_ptr<gdrstore::Buffer> buf = Allocate(s, 2 * kMiB);
  ASSERT_NE(buf, nullptr);
  const std::string path = s.PathOf(*buf);
  EXPECT_FALSE(path.empty());
  std::promise<absl::StatusOr<gdrstore::OpResult>> answered;
  s.SubmitAsync(gdrstore::OpKind::kWrite, gdrstore::Extent{"vol0", kMiB / 2, kMiB}, *buf, 4096,
                [&](absl::StatusOr<gdrstore::OpResult> r) { answered.set_value(std::move(r)); },
                {});
  absl::StatusOr<gdrstore::OpResult> r = answered.get_future().get();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->bytes, kMiB);
  EXPECT_TRUE(absl::StartsWith(r->path, path)) << r->path << " vs " << path;
  EXPECT_EQ(gdr::PatternMismatch(gdr::PatternSeed("vol0", 7), kMiB / 2,
                                 std::span<const std::byte>(buf->data() + 4096, kMiB)),
            std::nullopt);

  // Volumes: vol0 listed; one made, used and deleted.
  absl::StatusOr<std::vector<gdrstore::StoreVolume>> vols = s.ListVolumes();
  ASSERT_TRUE(vols.ok()) << vols.status();
  ASSERT_EQ(vols->size(), 1u);
  EXPECT_EQ((*vols)[0].name, "vol0");
  EXPECT_GE((*vols)[0].size, 4 * kMiB);
  gdrstore::StoreVolumeSpec spec;
  spec.name = "made";
  spec.size = 4 * kMiB;
  absl::Status st = s.CreateVolume(spec);
  ASSERT_TRUE(st.ok()) << st;
  vols = s.ListVolumes();
  ASSERT_TRUE(vols.ok()) << vols.status();
  ASSERT_EQ(vols->size(), 2u);
  EXPECT_EQ((*vols)[0].name, "made");
  EXPECT_GE((*vols)[0].size, 4 * kMiB);
  PutGetVerified(s, "made", 0, 4 * kMiB);
  st = s.DeleteVolume("made", false);
  ASSERT_TRUE(st.ok()) << st;
  vols = s.ListVolumes();
  ASSERT_TRUE(vols.ok()) << vols.status();
  EXPECT_EQ(vols->size(), 1u);

  // Errors, each naming what is wrong.
  st = s.Get("made", 0, 4096, *buf);
  EXPECT_EQ(st.code(), absl::StatusCode::kNotFound) << st;
  EXPECT_TRUE(absl::StrContains(st.message(), "made")) << st;
  st = s.Get("vol0", 64 * kMiB, 4096, *buf);
  EXPECT_EQ(st.code(), absl::StatusCode::kOutOfRange) << st;
  st = s.Put("vol0", 0, 4096, *buf, 2 * kMiB - 1024);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_TRUE(absl::StrContains(st.message(), "buffer")) << st;
  gdrstore::OpOptions sync;
  sync.sync = true;
  st = s.Get("vol0", 0, 4096, *buf, 0, sync);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_TRUE(absl::StrContains(st.message(), "sync")) << st;
  std::unique_ptr<gdrstore::Buffer> foreign = ForeignBuffer(4096);
  ASSERT_NE(foreign, nullptr);
  st = s.Put("vol0", 0, 4096, *foreign);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_TRUE(absl::StrContains(st.message(), "another")) << st;
  if (GetParam() == Kind::kCluster) {
    EXPECT_EQ(s.PathOf(*foreign), "");
  }
  gdrstore::StoreVolumeSpec bad;
  bad.name = "bad";
  bad.size = kMiB;
  bad.replicas = 0;
  st = s.CreateVolume(bad);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_TRUE(absl::StrContains(st.message(), "replicas")) << st;
}

INSTANTIATE_TEST_SUITE_P(Stores, StoreTest, ::testing::Values(Kind::kClient, Kind::kCluster),
                         [](const ::testing::TestParamInfo<Kind>& i) {
                           return i.param == Kind::kClient ? "Client" : "Cluster";
                         });

}  // namespace
}  // namespace gdr::integ
