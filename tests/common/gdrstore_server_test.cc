// The data RPCs' server side that gdrstored and gdragent share (GdrStoreServer and its
// StreamReactor), served by a real gRPC server on its in-process channel with a handler that
// holds its ops until the test ends them: what a side's handler is asked, and what the client
// is answered. Run with the answers batched (the daemon) and not (the agent).
#include "common/grpc/gdrstore_server.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/grpc/grpc_status.h"
#include "common/wire/stream_limits.h"

namespace gdr {
namespace {

namespace v1 = gdrstore::v1;

// An op the handler holds, copied (the request's pointers die with its callback).
struct HeldOp {
  StreamReactor* reactor = nullptr;
  uint64_t id = 0;
  bool write = false;
  uint64_t length = 0;
  bool sync = false;
  bool crc = false;
};

// What the server's handlers saw; shared with the test thread.
struct Seen {
  absl::Mutex mu;
  std::vector<HeldOp> held ABSL_GUARDED_BY(mu);
  int refused ABSL_GUARDED_BY(mu) = 0;
  int streams_closed ABSL_GUARDED_BY(mu) = 0;
  HeldOp unary ABSL_GUARDED_BY(mu);

  void AwaitHeld(size_t n) {
    absl::MutexLock lock(&mu);
    auto enough = [this, n]() ABSL_SHARED_LOCKS_REQUIRED(mu) { return held.size() >= n; };
    mu.Await(absl::Condition(&enough));
  }
  void AwaitClosed(int n) {
    absl::MutexLock lock(&mu);
    auto enough = [this, n]() ABSL_SHARED_LOCKS_REQUIRED(mu) { return streams_closed >= n; };
    mu.Await(absl::Condition(&enough));
  }
  HeldOp Take(uint64_t id) {
    absl::MutexLock lock(&mu);
    for (auto it = held.begin(); it != held.end(); ++it) {
      if (it->id != id) continue;
      HeldOp op = *it;
      held.erase(it);
      return op;
    }
    ADD_FAILURE() << "op " << id << " is not held";
    return {};
  }
};

// Volume "forbidden": Check refuses it. Volume "inline": answered inside Start. Otherwise held.
// Room for two ops in flight.
class TestHandler final : public StreamHandler {
 public:
  explicit TestHandler(Seen* seen) : seen_(seen) {}
  ~TestHandler() override {
    absl::MutexLock lock(&seen_->mu);
    ++seen_->streams_closed;
  }

  absl::Status Refused(absl::Status status) override {
    absl::MutexLock lock(&seen_->mu);
    ++seen_->refused;
    return absl::Status(status.code(), absl::StrCat("test: ", status.message()));
  }
  absl::Status Check(const StreamOpRequest& op) override {
    if (op.extent != nullptr && op.extent->volume() == "forbidden") {
      return absl::PermissionDeniedError("no right to volume forbidden");
    }
    return absl::OkStatus();
  }
  absl::Status Room(size_t inflight) override {
    if (inflight < 2) return absl::OkStatus();
    return absl::ResourceExhaustedError(absl::StrCat(inflight, " ops in flight"));
  }
  void Start(const StreamOpRequest& op, StreamReactor* reactor) override {
    HeldOp h{reactor, op.id, op.write, op.extent ? op.extent->length() : 0, op.sync, op.crc};
    if (op.extent != nullptr && op.extent->volume() == "inline") {
      StreamAnswer a;
      a.bytes = h.length;
      reactor->Finished(op.id, std::move(a));
      return;
    }
    absl::MutexLock lock(&seen_->mu);
    seen_->held.push_back(h);
  }
  size_t QueueCap() const override { return 4096; }

 private:
  Seen* const seen_;
};

// A Ping or Stream call with metadata "refuse" is refused; a unary op is answered with its
// length.
class TestServer final : public GdrStoreServer {
 public:
  TestServer(bool batch, Seen* seen) : GdrStoreServer(batch), seen_(seen) {}

 protected:
  grpc::ServerUnaryReactor* UnaryOp(grpc::CallbackServerContext* ctx, const StreamOpRequest& op,
                                    v1::OpResponse* response) override {
    HeldOp h{nullptr, op.id, op.write, op.extent ? op.extent->length() : 0, op.sync, op.crc};
    {
      absl::MutexLock lock(&seen_->mu);
      seen_->unary = h;
    }
    response->set_bytes(h.length);
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
  absl::Status Admit(grpc::CallbackServerContext* ctx) override {
    if (ctx->client_metadata().count("refuse") != 0) {
      return absl::UnauthenticatedError("no credential");
    }
    return absl::OkStatus();
  }
  absl::StatusOr<std::unique_ptr<StreamHandler>> OpenStream(
      grpc::CallbackServerContext* ctx) override {
    if (ctx->client_metadata().count("refuse") != 0) {
      return absl::PermissionDeniedError("this stream is refused");
    }
    return std::make_unique<TestHandler>(seen_);
  }

 private:
  Seen* const seen_;
};

v1::StreamOp WriteOp(uint64_t id, const std::string& volume, uint64_t length) {
  v1::StreamOp op;
  op.set_id(id);
  op.mutable_write()->mutable_extent()->set_volume(volume);
  op.mutable_write()->mutable_extent()->set_length(length);
  return op;
}

class GdrStoreServerTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    service_ = std::make_unique<TestServer>(GetParam(), &seen_);
    grpc::ServerBuilder builder;
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    stub_ = v1::GdrStore::NewStub(server_->InProcessChannel(grpc::ChannelArguments()));
  }
  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown();
  }

  using Stream = grpc::ClientReaderWriter<v1::StreamRequest, v1::StreamResponse>;
  // Reads answers until `n` ops are answered (or the call ends), keyed by op id.
  static std::map<uint64_t, v1::StreamResult> Answers(Stream* stream, size_t n) {
    std::map<uint64_t, v1::StreamResult> out;
    v1::StreamResponse r;
    while (out.size() < n && stream->Read(&r)) {
      EXPECT_LE(r.results_size(), kMaxOpsPerMessage);
      for (const v1::StreamResult& x : r.results()) {
        EXPECT_TRUE(out.emplace(x.id(), x).second) << "op " << x.id() << " answered twice";
      }
    }
    return out;
  }

  Seen seen_;
  std::unique_ptr<TestServer> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::GdrStore::Stub> stub_;
};

TEST_P(GdrStoreServerTest, WriteAndReadCallsReachUnaryOpAsOneShape) {
  // What UnaryOp saw: write, length, sync, crc.
  auto unary = [this] {
    absl::MutexLock lock(&seen_.mu);
    return std::make_tuple(seen_.unary.write, seen_.unary.length, seen_.unary.sync,
                           seen_.unary.crc);
  };
  grpc::ClientContext wctx;
  v1::WriteRequest w;
  w.mutable_extent()->set_length(10);
  w.mutable_buffer()->set_length(10);
  w.set_crc32c(true);
  v1::OpResponse resp;
  ASSERT_TRUE(stub_->Write(&wctx, w, &resp).ok());
  EXPECT_EQ(resp.bytes(), 10u);
  EXPECT_EQ(unary(), std::make_tuple(true, uint64_t{10}, false, true));

  grpc::ClientContext rctx;
  v1::ReadRequest r;
  r.mutable_extent()->set_length(7);
  r.set_sync(true);
  ASSERT_TRUE(stub_->Read(&rctx, r, &resp).ok());
  EXPECT_EQ(resp.bytes(), 7u);
  EXPECT_EQ(unary(), std::make_tuple(false, uint64_t{7}, true, false));
}

TEST_P(GdrStoreServerTest, OpsAreAnsweredAsTheyEndAndTheCallFinishesAfterTheLast) {
  grpc::ClientContext ctx;
  std::unique_ptr<Stream> stream = stub_->Stream(&ctx);
  v1::StreamRequest req;
  *req.add_ops() = WriteOp(1, "a", 4);
  v1::StreamOp* read = req.add_ops();
  read->set_id(2);
  read->mutable_read()->mutable_extent()->set_length(8);
  read->mutable_read()->set_sync(true);
  read->mutable_read()->set_crc32c(true);
  ASSERT_TRUE(stream->Write(req));
  seen_.AwaitHeld(2);
  HeldOp second = seen_.Take(2);
  EXPECT_FALSE(second.write);
  EXPECT_EQ(second.length, 8u);
  EXPECT_TRUE(second.sync);
  EXPECT_TRUE(second.crc);

  StreamAnswer a;
  a.bytes = 8;
  a.service_ns = 3;
  a.synced = true;
  a.crc32c = 0xabcd;
  a.path = "test/path";
  second.reactor->Finished(2, std::move(a));
  std::map<uint64_t, v1::StreamResult> got = Answers(stream.get(), 1);
  ASSERT_EQ(got.count(2), 1u);
  EXPECT_EQ(got[2].code(), 0);
  EXPECT_EQ(got[2].bytes(), 8u);
  EXPECT_EQ(got[2].service_ns(), 3u);
  EXPECT_TRUE(got[2].synced());
  EXPECT_EQ(got[2].crc32c(), 0xabcdu);
  EXPECT_EQ(got[2].path(), "test/path");

  // The client is done sending; the call stays open for the op still in flight.
  ASSERT_TRUE(stream->WritesDone());
  HeldOp first = seen_.Take(1);
  EXPECT_TRUE(first.write);
  first.reactor->Finished(1, NotAdmittedError("no room just now"));
  got = Answers(stream.get(), 1);
  ASSERT_EQ(got.count(1), 1u);
  EXPECT_EQ(got[1].code(), static_cast<int>(absl::StatusCode::kResourceExhausted));
  EXPECT_EQ(got[1].message(), "no room just now");
  EXPECT_TRUE(got[1].not_admitted());
  EXPECT_EQ(got[1].bytes(), 0u);
  EXPECT_TRUE(stream->Finish().ok());
  seen_.AwaitClosed(1);
}

TEST_P(GdrStoreServerTest, TheRefusalsEverySideMakesAreAnsweredPerOp) {
  grpc::ClientContext ctx;
  std::unique_ptr<Stream> stream = stub_->Stream(&ctx);
  v1::StreamRequest req;
  req.add_ops()->set_id(1);                     // neither write nor read
  *req.add_ops() = WriteOp(2, "forbidden", 1);  // Check refuses it
  *req.add_ops() = WriteOp(3, "a", 1);          // held
  *req.add_ops() = WriteOp(3, "a", 1);          // its id is in flight
  *req.add_ops() = WriteOp(5, "a", 1);          // held: two in flight now
  *req.add_ops() = WriteOp(6, "a", 1);          // no Room
  ASSERT_TRUE(stream->Write(req));
  std::map<uint64_t, v1::StreamResult> got = Answers(stream.get(), 4);
  ASSERT_EQ(got.size(), 4u);
  const int invalid = static_cast<int>(absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(got[1].code(), invalid);
  EXPECT_EQ(got[1].message(), "test: stream op has no write or read set");
  // Check's refusal is the side's own, already worded.
  EXPECT_EQ(got[2].code(), static_cast<int>(absl::StatusCode::kPermissionDenied));
  EXPECT_EQ(got[2].message(), "no right to volume forbidden");
  EXPECT_EQ(got[3].code(), invalid);
  EXPECT_EQ(got[3].message(), "test: stream op id 3 is already in flight on this stream");
  EXPECT_EQ(got[6].code(), static_cast<int>(absl::StatusCode::kResourceExhausted));
  EXPECT_EQ(got[6].message(), "test: 2 ops in flight");
  {
    absl::MutexLock lock(&seen_.mu);
    EXPECT_EQ(seen_.refused, 3);
    EXPECT_EQ(seen_.held.size(), 2u);
  }
  ASSERT_TRUE(stream->WritesDone());
  for (uint64_t id : {3, 5}) seen_.Take(id).reactor->Finished(id, absl::OkStatus());
  got = Answers(stream.get(), 2);
  EXPECT_EQ(got.size(), 2u);
  EXPECT_EQ(got[3].code(), 0);
  EXPECT_EQ(got[5].code(), 0);
  EXPECT_TRUE(stream->Finish().ok());
}

TEST_P(GdrStoreServerTest, OpsPastOneMessagesWorthAreRefusedAndAnswersFillMessages) {
  grpc::ClientContext ctx;
  std::unique_ptr<Stream> stream = stub_->Stream(&ctx);
  v1::StreamRequest req;
  const int n = kMaxOpsPerMessage + 2;
  for (int i = 0; i < n; ++i) *req.add_ops() = WriteOp(i + 1, "inline", i + 1);
  ASSERT_TRUE(stream->Write(req));
  ASSERT_TRUE(stream->WritesDone());
  std::map<uint64_t, v1::StreamResult> got = Answers(stream.get(), n);
  ASSERT_EQ(got.size(), static_cast<size_t>(n));
  for (int i = 1; i <= kMaxOpsPerMessage; ++i) {
    ASSERT_EQ(got[i].code(), 0) << "op " << i << ": " << got[i].message();
    EXPECT_EQ(got[i].bytes(), static_cast<uint64_t>(i));
  }
  for (int i = kMaxOpsPerMessage + 1; i <= n; ++i) {
    EXPECT_EQ(got[i].code(), static_cast<int>(absl::StatusCode::kInvalidArgument));
    EXPECT_EQ(got[i].message(), absl::StrCat("test: more than ", kMaxOpsPerMessage,
                                             " ops in one StreamRequest; op not started"));
  }
  EXPECT_TRUE(stream->Finish().ok());
}

TEST_P(GdrStoreServerTest, AStreamTheSideRefusesEndsWithItsStatus) {
  grpc::ClientContext ctx;
  ctx.AddMetadata("refuse", "1");
  std::unique_ptr<Stream> stream = stub_->Stream(&ctx);
  v1::StreamResponse r;
  EXPECT_FALSE(stream->Read(&r));
  const grpc::Status s = stream->Finish();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(s.error_message(), "this stream is refused");
  absl::MutexLock lock(&seen_.mu);
  EXPECT_EQ(seen_.streams_closed, 0);  // no handler was made
}

TEST_P(GdrStoreServerTest, PingAnswersWhomAdmitLetsIn) {
  v1::PingResponse resp;
  grpc::ClientContext ok;
  EXPECT_TRUE(stub_->Ping(&ok, v1::PingRequest(), &resp).ok());
  grpc::ClientContext refused;
  refused.AddMetadata("refuse", "1");
  const grpc::Status s = stub_->Ping(&refused, v1::PingRequest(), &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(s.error_message(), "no credential");
}

INSTANTIATE_TEST_SUITE_P(BatchedAndNot, GdrStoreServerTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& p) {
                           return p.param ? "Batched" : "Unbatched";
                         });

}  // namespace
}  // namespace gdr
