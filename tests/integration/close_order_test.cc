// Closing in any order (issue 40): what a client made (streams, buffers, an op's future) may
// outlive it, and anything may be closed twice. Through the C ABI a stream or buffer of a closed
// client refuses ops with a status that says why and is freed once, by its own release; through
// the C++ API a Client destroyed first cancels its streams' calls, after which Submit and Close
// fail cleanly. Against a real daemon; a stopped one (SIGSTOP) holds ops in flight. The
// sanitized tree runs this under ASan, where a use after free, a double free or a leak fails it.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gdrstore/client.h"
#include "gdrstore/cluster.h"
#include "gdrstore/gdrstore.h"
#include "tests/integration/daemon_process.h"

namespace gdr::integ {
namespace {

constexpr size_t kKiB = 1024;
constexpr size_t kMiB = 1024 * kKiB;

std::string Error(const void* handle) { return gdrstore_error(handle); }

// A members file naming `d` alone, whose vol0 is the cluster volume vol0 (32 MiB).
std::string WriteMembersFile(const DaemonProcess& d) {
  const std::string path = d.dir() + "/members.json";
  FILE* f = std::fopen(path.c_str(), "w");
  EXPECT_NE(f, nullptr) << path;
  if (f == nullptr) return path;
  std::fprintf(f,
               "{\"members\":[{\"id\":\"m0\",\"address\":\"%s\",\"volumes\":[{\"name\":\"vol0\","
               "\"size\":\"67108864\"}]}],\"volumes\":[{\"name\":\"vol0\",\"stripe_unit\":"
               "\"1048576\",\"members\":[\"m0\"],\"replicas\":1,\"epoch\":\"1\",\"size\":"
               "\"33554432\"}]}\n",
               d.address().c_str());
  std::fclose(f);
  return path;
}

class CloseOrderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto d = DaemonProcess::Start({"--volume", "vol0=64MiB"});
    ASSERT_TRUE(d.ok()) << d.status();
    daemon_ = *std::move(d);
  }

  gdrstore_client* OpenC() {
    gdrstore_client_options o;
    gdrstore_client_options_init(&o);
    const std::string address = daemon_->address();
    o.daemon_address = address.c_str();
    gdrstore_client* c = nullptr;
    char error[256] = "";
    EXPECT_EQ(gdrstore_client_open(&o, &c, error, sizeof(error)), GDRSTORE_OK) << error;
    return c;
  }

  gdrstore_cluster* OpenCluster(const std::string& members) {
    gdrstore_cluster_options o;
    gdrstore_cluster_options_init(&o);
    o.members_file = members.c_str();
    gdrstore_cluster* c = nullptr;
    char error[256] = "";
    EXPECT_EQ(gdrstore_cluster_open(&o, &c, error, sizeof(error)), GDRSTORE_OK) << error;
    return c;
  }

  // Polls `stream` until nothing is outstanding; the completions.
  static std::vector<gdrstore_completion> PollAll(gdrstore_stream* stream) {
    std::vector<gdrstore_completion> all;
    std::array<gdrstore_completion, 16> batch{};
    while (gdrstore_stream_outstanding(stream) > 0) {
      size_t got = 0;
      const gdrstore_status st = gdrstore_poll(stream, batch.data(), batch.size(), -1, &got);
      EXPECT_EQ(st, GDRSTORE_OK) << Error(stream);
      if (st != GDRSTORE_OK) break;
      all.insert(all.end(), batch.begin(), batch.begin() + got);
    }
    return all;
  }

  std::unique_ptr<DaemonProcess> daemon_;
};

// The C ABI form of the reported defect: ops in flight on a stream, the client closed, then
// the stream used and closed (a double free in the library, before).
TEST_F(CloseOrderTest, CStreamOutlivesItsClientWithOpsInFlight) {
  gdrstore_client* c = OpenC();
  ASSERT_NE(c, nullptr);
  gdrstore_buffer* b = nullptr;
  ASSERT_EQ(gdrstore_alloc_host(c, kMiB, &b), GDRSTORE_OK) << Error(c);
  gdrstore_stream* s = nullptr;
  ASSERT_EQ(gdrstore_stream_open(c, &s), GDRSTORE_OK) << Error(c);
  constexpr int kOps = 64;
  for (int i = 0; i < kOps; ++i) {
    ASSERT_EQ(gdrstore_stream_get(s, "vol0", i * 16 * kKiB, 16 * kKiB, b, i * 16 * kKiB, i),
              GDRSTORE_OK)
        << Error(s);
  }
  gdrstore_client_close(c);

  // The close ended the stream as gdrstore_stream_close would: every op answered, the answers
  // kept for poll.
  std::vector<gdrstore_completion> done = PollAll(s);
  ASSERT_EQ(done.size(), kOps);
  for (const gdrstore_completion& d : done) {
    EXPECT_EQ(d.status, GDRSTORE_OK) << d.tag << ": " << d.message;
    EXPECT_EQ(d.bytes, 16 * kKiB);
  }
  // New ops are refused, saying why.
  EXPECT_EQ(gdrstore_stream_get(s, "vol0", 0, 4096, b, 0, 99), GDRSTORE_FAILED_PRECONDITION);
  EXPECT_TRUE(absl::StrContains(Error(s), "was closed")) << Error(s);
  EXPECT_EQ(gdrstore_stream_put(s, b, 0, "vol0", 0, 4096, 99), GDRSTORE_FAILED_PRECONDITION);
  EXPECT_EQ(gdrstore_stream_outstanding(s), 0u);
  size_t got = 1;
  gdrstore_completion none[1];
  EXPECT_EQ(gdrstore_poll(s, none, 1, 0, &got), GDRSTORE_OK);
  EXPECT_EQ(got, 0u);
  // Freed once, by its own close; a second is refused, not a second free.
  EXPECT_EQ(gdrstore_stream_close(s), GDRSTORE_OK) << Error(s);
  EXPECT_EQ(gdrstore_stream_close(s), GDRSTORE_INVALID_ARGUMENT);
  EXPECT_TRUE(absl::StrContains(Error(s), "not a live handle")) << Error(s);

  // The buffer's memory stayed: the gets landed there, and it is still the caller's to use.
  EXPECT_EQ(gdrstore_verify(b, 0, kOps * 16 * kKiB, "vol0", 0, nullptr), GDRSTORE_OK) << Error(b);
  const char mark[] = "still here";
  char back[sizeof(mark)] = "";
  EXPECT_EQ(gdrstore_buffer_copy_in(b, 0, mark, sizeof(mark)), GDRSTORE_OK) << Error(b);
  EXPECT_EQ(gdrstore_buffer_copy_out(b, 0, back, sizeof(back)), GDRSTORE_OK) << Error(b);
  EXPECT_STREQ(back, mark);
  gdrstore_buffer_release(b);
  gdrstore_buffer_release(b);

  // The client itself: closed twice is nothing; a call on it is refused.
  gdrstore_client_close(c);
  EXPECT_EQ(gdrstore_get(c, "vol0", 0, 16, b, 0, nullptr), GDRSTORE_INVALID_ARGUMENT);
  EXPECT_TRUE(absl::StrContains(Error(c), "not a live handle")) << Error(c);
}

// Client, stream and buffer closed in each of the six orders, with ops in flight on the stream;
// each released twice. Whatever is left to poll is polled.
TEST_F(CloseOrderTest, CClientStreamAndBufferClosedInEveryOrder) {
  enum What { kClient, kStream, kBuffer };
  std::array<What, 3> order = {kClient, kStream, kBuffer};
  do {
    SCOPED_TRACE(absl::StrCat("order ", order[0], order[1], order[2]));
    gdrstore_client* c = OpenC();
    ASSERT_NE(c, nullptr);
    gdrstore_buffer* b = nullptr;
    ASSERT_EQ(gdrstore_alloc_host(c, 256 * kKiB, &b), GDRSTORE_OK) << Error(c);
    gdrstore_stream* s = nullptr;
    ASSERT_EQ(gdrstore_stream_open(c, &s), GDRSTORE_OK) << Error(c);
    for (int i = 0; i < 16; ++i) {
      ASSERT_EQ(gdrstore_stream_put(s, b, i * 16 * kKiB, "vol0", 32 * kMiB + i * 16 * kKiB,
                                    16 * kKiB, i),
                GDRSTORE_OK)
          << Error(s);
    }
    bool stream_open = true;
    for (What w : order) {
      switch (w) {
        case kClient:
          gdrstore_client_close(c);
          gdrstore_client_close(c);
          break;
        case kStream:
          EXPECT_EQ(gdrstore_stream_close(s), GDRSTORE_OK) << Error(s);
          EXPECT_EQ(gdrstore_stream_close(s), GDRSTORE_INVALID_ARGUMENT);
          stream_open = false;
          break;
        case kBuffer:
          // Waits for the ops on it; the stream may still hold their answers.
          gdrstore_buffer_release(b);
          gdrstore_buffer_release(b);
          if (stream_open) {
            for (const gdrstore_completion& d : PollAll(s)) {
              EXPECT_EQ(d.status, GDRSTORE_OK) << d.tag << ": " << d.message;
            }
          }
          break;
      }
    }
  } while (std::next_permutation(order.begin(), order.end()));
}

// A buffer belongs to the client that made it: another client (or its stream) refuses it,
// naming the owner, whether that client is open or closed.
TEST_F(CloseOrderTest, CBufferOfAnotherOrAClosedClientIsRefused) {
  gdrstore_client* a = OpenC();
  gdrstore_client* other = OpenC();
  ASSERT_NE(a, nullptr);
  ASSERT_NE(other, nullptr);
  gdrstore_buffer* b = nullptr;
  ASSERT_EQ(gdrstore_alloc_host(a, 64 * kKiB, &b), GDRSTORE_OK) << Error(a);
  gdrstore_stream* s = nullptr;
  ASSERT_EQ(gdrstore_stream_open(other, &s), GDRSTORE_OK) << Error(other);

  EXPECT_EQ(gdrstore_get(other, "vol0", 0, 4096, b, 0, nullptr), GDRSTORE_INVALID_ARGUMENT);
  EXPECT_TRUE(absl::StrContains(Error(other), "belongs to client")) << Error(other);
  gdrstore_client_close(a);
  EXPECT_EQ(gdrstore_get(other, "vol0", 0, 4096, b, 0, nullptr), GDRSTORE_INVALID_ARGUMENT);
  EXPECT_TRUE(absl::StrContains(Error(other), "closed since")) << Error(other);
  EXPECT_EQ(gdrstore_stream_get(s, "vol0", 0, 4096, b, 0, 1), GDRSTORE_INVALID_ARGUMENT);
  EXPECT_TRUE(absl::StrContains(Error(s), "belongs to client")) << Error(s);
  EXPECT_EQ(gdrstore_stream_outstanding(s), 0u);
  EXPECT_EQ(gdrstore_get(a, "vol0", 0, 4096, b, 0, nullptr), GDRSTORE_INVALID_ARGUMENT);

  // The other client's own buffer still works on its stream.
  gdrstore_buffer* mine = nullptr;
  ASSERT_EQ(gdrstore_alloc_host(other, 64 * kKiB, &mine), GDRSTORE_OK) << Error(other);
  ASSERT_EQ(gdrstore_stream_get(s, "vol0", 0, 4096, mine, 0, 2), GDRSTORE_OK) << Error(s);
  std::vector<gdrstore_completion> done = PollAll(s);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].status, GDRSTORE_OK) << done[0].message;
  EXPECT_EQ(gdrstore_stream_close(s), GDRSTORE_OK) << Error(s);
  gdrstore_buffer_release(mine);
  gdrstore_buffer_release(b);
  gdrstore_client_close(other);
}

// One thread submits on a stream until it is refused while another closes the client: every op
// accepted is answered (none hangs, none is freed under the other thread), later ones refused.
TEST_F(CloseOrderTest, CClientClosedWhileAnotherThreadSubmits) {
  gdrstore_client* c = OpenC();
  ASSERT_NE(c, nullptr);
  gdrstore_buffer* b = nullptr;
  ASSERT_EQ(gdrstore_alloc_host(c, 64 * kKiB, &b), GDRSTORE_OK) << Error(c);
  gdrstore_stream* s = nullptr;
  ASSERT_EQ(gdrstore_stream_open(c, &s), GDRSTORE_OK) << Error(c);

  std::mutex mu;
  std::condition_variable cv;
  size_t accepted = 0;
  gdrstore_status refusal = GDRSTORE_OK;
  std::string why;
  std::thread submitter([&] {
    for (uint64_t tag = 0;; ++tag) {
      const gdrstore_status st = gdrstore_stream_get(s, "vol0", 0, 4096, b, 0, tag);
      std::lock_guard<std::mutex> lock(mu);
      if (st != GDRSTORE_OK) {
        refusal = st;
        why = Error(s);
        return;
      }
      if (++accepted == 200) cv.notify_all();
    }
  });
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return accepted >= 200 || refusal != GDRSTORE_OK; });
  }
  gdrstore_client_close(c);
  submitter.join();
  EXPECT_EQ(refusal, GDRSTORE_FAILED_PRECONDITION) << why;
  EXPECT_TRUE(absl::StrContains(why, "was closed")) << why;

  std::vector<gdrstore_completion> done = PollAll(s);
  EXPECT_EQ(done.size(), accepted);
  size_t ok = 0;
  for (const gdrstore_completion& d : done) {
    // Accepted as the close began: the stream's own refusal, through poll.
    if (d.status == GDRSTORE_OK) {
      ++ok;
    } else {
      EXPECT_EQ(d.status, GDRSTORE_FAILED_PRECONDITION) << d.message;
    }
  }
  EXPECT_GE(ok, 200u);
  EXPECT_EQ(gdrstore_stream_close(s), GDRSTORE_OK) << Error(s);
  gdrstore_buffer_release(b);
}

TEST_F(CloseOrderTest, CClusterBufferOutlivesItsCluster) {
  const std::string members = WriteMembersFile(*daemon_);
  gdrstore_cluster* cl = OpenCluster(members);
  gdrstore_cluster* other = OpenCluster(members);
  ASSERT_NE(cl, nullptr);
  ASSERT_NE(other, nullptr);
  gdrstore_cluster_buffer* cb = nullptr;
  ASSERT_EQ(gdrstore_cluster_alloc_host(cl, 256 * kKiB, &cb), GDRSTORE_OK) << Error(cl);
  ASSERT_EQ(gdrstore_cluster_get(cl, "vol0", 0, 256 * kKiB, cb, 0), GDRSTORE_OK) << Error(cl);
  gdrstore_cluster_close(cl);
  gdrstore_cluster_close(cl);

  // Its memory stays until it is released, and holds what the get delivered.
  void* data = gdrstore_cluster_buffer_data(cb);
  ASSERT_NE(data, nullptr);
  EXPECT_EQ(gdrstore_cluster_buffer_size(cb), 256 * kKiB);
  EXPECT_EQ(gdrstore_pattern_check(data, 256 * kKiB, "vol0", 0, nullptr), GDRSTORE_OK);
  // Another cluster refuses it, naming its own.
  EXPECT_EQ(gdrstore_cluster_get(other, "vol0", 0, 4096, cb, 0), GDRSTORE_INVALID_ARGUMENT);
  EXPECT_TRUE(absl::StrContains(Error(other), "belongs to cluster")) << Error(other);
  EXPECT_EQ(gdrstore_cluster_put(cl, "vol0", 0, 4096, cb, 0), GDRSTORE_INVALID_ARGUMENT);
  gdrstore_cluster_buffer_release(cb);
  gdrstore_cluster_buffer_release(cb);
  EXPECT_EQ(gdrstore_cluster_buffer_data(cb), nullptr);
  gdrstore_cluster_close(other);
}

// The C++ root of it all: a Client destroyed while its Stream and a unary op have ops in flight
// on a daemon that does not answer (stopped). The Client's destruction cancels them, at once;
// the Stream, the op's future and the Buffer outlive it safely.
TEST_F(CloseOrderTest, CppClientDestroyedWithOpsInFlight) {
  gdrstore::ClientOptions opts;
  opts.daemon_address = daemon_->address();
  // Long enough that only the Client's cancellation, not a deadline, can end the ops.
  opts.rpc_timeout = std::chrono::minutes(10);
  std::unique_ptr<gdrstore::Client> client = ConnectClient(*daemon_, opts);
  ASSERT_NE(client, nullptr);
  absl::StatusOr<std::unique_ptr<gdrstore::Buffer>> buf = client->AllocateBuffer(kMiB);
  ASSERT_TRUE(buf.ok()) << buf.status();
  absl::StatusOr<std::unique_ptr<gdrstore::OpStream>> stream = client->OpenStream();
  ASSERT_TRUE(stream.ok()) << stream.status();
  auto submit = [&](const gdrstore::Extent& e) {
    auto p = std::make_shared<std::promise<absl::StatusOr<gdrstore::OpResult>>>();
    std::future<absl::StatusOr<gdrstore::OpResult>> f = p->get_future();
    (*stream)->Submit(gdrstore::OpKind::kWrite, e, **buf, 0,
                      [p](absl::StatusOr<gdrstore::OpResult> r) { p->set_value(std::move(r)); });
    return f;
  };
  // The stream works (its call is up) before the daemon stops.
  absl::StatusOr<gdrstore::OpResult> first = submit({"vol0", 0, 4096}).get();
  ASSERT_TRUE(first.ok()) << first.status();

  ASSERT_TRUE(daemon_->Stop().ok());
  absl::Cleanup resume = [&] { (void)daemon_->Signal(SIGCONT); };
  std::vector<std::future<absl::StatusOr<gdrstore::OpResult>>> in_flight;
  for (int i = 0; i < 8; ++i) in_flight.push_back(submit({"vol0", i * 4096ull, 4096}));
  std::future<absl::StatusOr<gdrstore::OpResult>> unary =
      client->SubmitAsync(gdrstore::OpKind::kWrite, {"vol0", 0, 4096}, **buf, 0);

  client.reset();
  for (auto& f : in_flight) {
    absl::StatusOr<gdrstore::OpResult> r = f.get();
    EXPECT_EQ(r.status().code(), absl::StatusCode::kCancelled) << r.status();
    EXPECT_TRUE(absl::StrContains(r.status().message(), "Client was closed")) << r.status();
  }
  absl::StatusOr<gdrstore::OpResult> u = unary.get();
  EXPECT_EQ(u.status().code(), absl::StatusCode::kCancelled) << u.status();

  // The stream outlives its Client: a new op is refused through its callback, Close returns
  // the call's status each time, and the destructor frees it once.
  absl::StatusOr<gdrstore::OpResult> late = submit({"vol0", 0, 4096}).get();
  EXPECT_EQ(late.status().code(), absl::StatusCode::kFailedPrecondition) << late.status();
  EXPECT_TRUE(absl::StrContains(late.status().message(), "Client was closed")) << late.status();
  absl::Status closed = (*stream)->Close();
  EXPECT_EQ(closed.code(), absl::StatusCode::kCancelled) << closed;
  EXPECT_TRUE(absl::StrContains(closed.message(), "Client was closed")) << closed;
  EXPECT_EQ((*stream)->Close(), closed);
  stream->reset();
  // So does the buffer, whose memory is still the caller's.
  EXPECT_TRUE((*buf)->CopyIn(0, "x", 1).ok());
  buf->reset();
}

// Stream closed first and then the Client, or the Client first and then an idle Stream.
TEST_F(CloseOrderTest, CppStreamAndClientClosedInEitherOrder) {
  for (bool client_first : {false, true}) {
    SCOPED_TRACE(client_first ? "client first" : "stream first");
    std::unique_ptr<gdrstore::Client> client = ConnectClient(*daemon_);
    ASSERT_NE(client, nullptr);
    absl::StatusOr<std::unique_ptr<gdrstore::OpStream>> stream = client->OpenStream();
    ASSERT_TRUE(stream.ok()) << stream.status();
    if (client_first) {
      client.reset();
      absl::Status st = (*stream)->Close();
      EXPECT_EQ(st.code(), absl::StatusCode::kCancelled) << st;
    } else {
      EXPECT_TRUE((*stream)->Close().ok());
      client.reset();
      EXPECT_TRUE((*stream)->Close().ok());
    }
    stream->reset();
  }
}

// A ClusterBuffer outlives its ClusterClient; another ClusterClient refuses it.
TEST_F(CloseOrderTest, CppClusterBufferOutlivesItsCluster) {
  gdrstore::ClusterOptions opts;
  opts.members_file = WriteMembersFile(*daemon_);
  absl::StatusOr<std::unique_ptr<gdrstore::ClusterClient>> cl = gdrstore::ClusterClient::Open(opts);
  ASSERT_TRUE(cl.ok()) << cl.status();
  absl::StatusOr<std::unique_ptr<gdrstore::ClusterBuffer>> cb = (*cl)->AllocateBuffer(64 * kKiB);
  ASSERT_TRUE(cb.ok()) << cb.status();
  ASSERT_TRUE((*cl)->Get("vol0", 0, 64 * kKiB, **cb).ok());
  cl->reset();
  EXPECT_EQ(gdrstore_pattern_check((*cb)->data(), 64 * kKiB, "vol0", 0, nullptr), GDRSTORE_OK);

  absl::StatusOr<std::unique_ptr<gdrstore::ClusterClient>> other =
      gdrstore::ClusterClient::Open(opts);
  ASSERT_TRUE(other.ok()) << other.status();
  absl::Status st = (*other)->Get("vol0", 0, 4096, **cb);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_TRUE(absl::StrContains(st.message(), "another ClusterClient")) << st;
  EXPECT_EQ((*other)->PathOf(**cb), "");
  cb->reset();
}

}  // namespace
}  // namespace gdr::integ
