// The C ABI end to end: tests/client/c/c_abi_demo (C, linked against libgdrclient.so only)
// against a real gdrstored on loopback. The program checks every step itself, the hostile ones
// of c_abi_hostile.c included (NULL pointers with sizes, wrapping ranges, released and made-up
// handles, SIZE_MAX allocations, 8 threads failing on one client that must each read their own
// op's message); this test runs it and requires each step to pass (a crash fails it). The
// cluster tests drive the C ABI from here: its store calls (streams, polls) on a cluster handle.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gdrstore/gdrstore.h"
#include "tests/integration/daemon_process.h"

namespace gdr::integ {
namespace {

TEST(CAbiTest, CProgramMovesBytesThroughTheCAbi) {
  auto d = DaemonProcess::Start({"--volume", "vol0=64MiB"});
  ASSERT_TRUE(d.ok()) << d.status();
  auto r = RunProcess({GDR_C_ABI_DEMO_BIN, (*d)->address(), "vol0"}, (*d)->dir(), "c_abi",
                      absl::Seconds(120));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_code, 0) << r->out << r->err;
  EXPECT_FALSE(absl::StrContains(r->out, "FAIL")) << r->out;
  EXPECT_TRUE(absl::StrContains(r->out, "C ABI demo PASSED")) << r->out;
  auto st = (*d)->Terminate(absl::Seconds(30));
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(DescribeWaitStatus(*st), "exited 0") << (*d)->Stderr();
}

// The same stream and poll calls on a cluster handle (two daemons from a members file): puts
// striped over both members, gets back, each op collected once by its tag.
class CAbiClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (auto& m : members_) {
      auto d = DaemonProcess::Start({"--volume", "vol0=16MiB"});
      ASSERT_TRUE(d.ok()) << d.status();
      m = std::move(*d);
    }
    const std::string file = members_[0]->dir() + "/members.json";
    {
      std::ofstream out(file);
      out << R"({"members": [{"id": "a", "address": ")" << members_[0]->address()
          << R"("}, {"id": "b", "address": ")" << members_[1]->address() << R"("}],
                 "volumes": [{"name": "vol0", "stripe_unit": 65536, "members": ["a", "b"],
                              "replicas": 1, "size": 33554432}]})";
    }
    gdrstore_cluster_options o;
    gdrstore_cluster_options_init(&o);
    o.members_file = file.c_str();
    char error[256] = "";
    ASSERT_EQ(gdrstore_cluster_open(&o, &cluster_, error, sizeof(error)), GDRSTORE_OK) << error;
    gdrstore_client_options co;
    gdrstore_client_options_init(&co);
    const std::string address = members_[0]->address();
    co.daemon_address = address.c_str();
    ASSERT_EQ(gdrstore_client_open(&co, &client_, error, sizeof(error)), GDRSTORE_OK) << error;
  }
  void TearDown() override {
    gdrstore_client_close(client_);
    gdrstore_cluster_close(cluster_);
  }
  // The cluster handle where the store calls take it.
  gdrstore_client* store() const { return reinterpret_cast<gdrstore_client*>(cluster_); }

  std::unique_ptr<DaemonProcess> members_[2];
  gdrstore_cluster* cluster_ = nullptr;
  gdrstore_client* client_ = nullptr;
};

// Polls until nothing is outstanding; the completions by tag.
std::map<uint64_t, gdrstore_completion> PollAll(gdrstore_stream* s) {
  std::map<uint64_t, gdrstore_completion> done;
  while (gdrstore_stream_outstanding(s) > 0) {
    gdrstore_completion c[4];
    size_t n = 0;
    EXPECT_EQ(gdrstore_poll(s, c, 4, -1, &n), GDRSTORE_OK) << gdrstore_error(s);
    for (size_t i = 0; i < n; ++i) EXPECT_TRUE(done.emplace(c[i].tag, c[i]).second) << c[i].tag;
  }
  return done;
}

TEST_F(CAbiClusterTest, StreamAndPollOnAClusterHandle) {
  constexpr size_t kOp = 3 * 65536 + 11;  // crosses both members, unaligned
  constexpr int kOps = 6;
  gdrstore_buffer* out = nullptr;
  gdrstore_buffer* in = nullptr;
  ASSERT_EQ(gdrstore_alloc_host(store(), kOp * kOps, &out), GDRSTORE_OK)
      << gdrstore_error(cluster_);
  ASSERT_EQ(gdrstore_alloc_host(store(), kOp * kOps, &in), GDRSTORE_OK)
      << gdrstore_error(cluster_);
  std::vector<unsigned char> bytes(kOp * kOps);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<unsigned char>(i * 7 + 3);
  ASSERT_EQ(gdrstore_buffer_copy_in(out, 0, bytes.data(), bytes.size()), GDRSTORE_OK);

  gdrstore_stream* s = nullptr;
  ASSERT_EQ(gdrstore_stream_open(store(), &s), GDRSTORE_OK) << gdrstore_error(cluster_);
  for (int i = 0; i < kOps; ++i) {
    ASSERT_EQ(gdrstore_stream_put(s, out, i * kOp, "vol0", 1000 + i * kOp, kOp, 100 + i),
              GDRSTORE_OK) << gdrstore_error(s);
  }
  std::map<uint64_t, gdrstore_completion> puts = PollAll(s);
  ASSERT_EQ(puts.size(), size_t{kOps});
  for (const auto& [tag, c] : puts) {
    EXPECT_EQ(c.status, GDRSTORE_OK) << tag << ": " << c.message;
    EXPECT_EQ(c.bytes, kOp) << tag;
  }
  for (int i = 0; i < kOps; ++i) {
    ASSERT_EQ(gdrstore_stream_get(s, "vol0", 1000 + i * kOp, kOp, in, i * kOp, 200 + i),
              GDRSTORE_OK) << gdrstore_error(s);
  }
  std::map<uint64_t, gdrstore_completion> gets = PollAll(s);
  ASSERT_EQ(gets.size(), size_t{kOps});
  EXPECT_EQ(gets.begin()->first, 200u);
  for (const auto& [tag, c] : gets) EXPECT_EQ(c.status, GDRSTORE_OK) << tag << ": " << c.message;
  std::vector<unsigned char> back(bytes.size());
  ASSERT_EQ(gdrstore_buffer_copy_out(in, 0, back.data(), back.size()), GDRSTORE_OK);
  EXPECT_TRUE(back == bytes);

  // An op's failure comes back through poll, tagged: past the cluster volume's end.
  ASSERT_EQ(gdrstore_stream_get(s, "vol0", 33554432 - 10, 20, in, 0, 7), GDRSTORE_OK);
  std::map<uint64_t, gdrstore_completion> past = PollAll(s);
  ASSERT_EQ(past.count(7), 1u);
  EXPECT_NE(past[7].status, GDRSTORE_OK);

  // Blocking ops on the cluster handle too, sync on a put included.
  gdrstore_result r{};
  EXPECT_EQ(gdrstore_put(store(), out, 0, "vol0", 0, kOp, 1, &r), GDRSTORE_OK)
      << gdrstore_error(cluster_);
  EXPECT_EQ(r.bytes, kOp);
  EXPECT_EQ(gdrstore_stream_close(s), GDRSTORE_OK) << gdrstore_error(s);
  gdrstore_buffer_release(in);
  gdrstore_buffer_release(out);
}

TEST_F(CAbiClusterTest, WrongAndNullHandlesAreRefusedByName) {
  gdrstore_stream* s = nullptr;
  EXPECT_EQ(gdrstore_stream_open(nullptr, &s), GDRSTORE_INVALID_ARGUMENT);
  EXPECT_TRUE(absl::StrContains(gdrstore_error(nullptr), "client handle is NULL"))
      << gdrstore_error(nullptr);
  gdrstore_buffer* b = nullptr;
  ASSERT_EQ(gdrstore_alloc_host(store(), 4096, &b), GDRSTORE_OK) << gdrstore_error(cluster_);
  // A buffer is no store.
  auto* not_store = reinterpret_cast<gdrstore_client*>(b);
  EXPECT_EQ(gdrstore_stream_open(not_store, &s), GDRSTORE_INVALID_ARGUMENT);
  EXPECT_TRUE(absl::StrContains(gdrstore_error(b), "client or cluster handle is needed"))
      << gdrstore_error(b);
  // The old cluster calls still take a cluster only.
  gdrstore_cluster_buffer* cb = nullptr;
  EXPECT_EQ(gdrstore_cluster_alloc_host(reinterpret_cast<gdrstore_cluster*>(client_), 16, &cb),
            GDRSTORE_INVALID_ARGUMENT);
  EXPECT_TRUE(absl::StrContains(gdrstore_error(client_), "is a client, not a cluster"))
      << gdrstore_error(client_);
  // A client's buffer on a cluster stream: refused, naming its owner.
  gdrstore_buffer* mine = nullptr;
  ASSERT_EQ(gdrstore_alloc_host(client_, 4096, &mine), GDRSTORE_OK) << gdrstore_error(client_);
  ASSERT_EQ(gdrstore_stream_open(store(), &s), GDRSTORE_OK) << gdrstore_error(cluster_);
  EXPECT_EQ(gdrstore_stream_put(s, mine, 0, "vol0", 0, 16, 1), GDRSTORE_INVALID_ARGUMENT);
  EXPECT_TRUE(absl::StrContains(gdrstore_error(s), "belongs to client")) << gdrstore_error(s);
  EXPECT_EQ(gdrstore_stream_outstanding(s), 0u);
  // A cluster's buffer through the old cluster calls: the same handle.
  EXPECT_EQ(gdrstore_cluster_buffer_size(reinterpret_cast<gdrstore_cluster_buffer*>(b)), 4096u);
  EXPECT_EQ(gdrstore_cluster_put(cluster_, "vol0", 0, 4096,
                                 reinterpret_cast<gdrstore_cluster_buffer*>(b), 0),
            GDRSTORE_OK) << gdrstore_error(cluster_);
  // Once the cluster is closed its stream takes no new op.
  gdrstore_cluster_close(cluster_);
  EXPECT_EQ(gdrstore_stream_put(s, b, 0, "vol0", 0, 16, 2), GDRSTORE_FAILED_PRECONDITION);
  EXPECT_TRUE(absl::StrContains(gdrstore_error(s), "which was closed")) << gdrstore_error(s);
  EXPECT_EQ(gdrstore_stream_close(s), GDRSTORE_OK) << gdrstore_error(s);
  gdrstore_buffer_release(mine);
  gdrstore_buffer_release(b);
}

}  // namespace
}  // namespace gdr::integ
