// A client process of gdragent for the agent suite: run as another uid (setpriv) to be refused,
// or kept busy with ops to be SIGKILLed in the middle of them.
//   agent_peer hello SOCKET            opens a session; prints "session N" (exit 0) or
//                                      "error CODE MESSAGE" (exit 3)
//   agent_peer load SOCKET VOLUME      hands over 4 MiB and keeps 16 gets in flight on a Stream
//                                      for ever; prints "running" once the first are answered
//   agent_peer bench SOCKET VOLUME SIZE QD N
//                                      N gets of SIZE bytes, QD in flight on one Stream, as
//                                      `gdrctl bench` runs them on a daemon; prints GB/s
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/grpc/grpc_status.h"
#include "tests/agent/agent_harness.h"

namespace {

namespace v1 = gdrstore::v1;
using gdr::agent::test::AgentClient;
using gdr::agent::test::SharedMemory;

int Fail(const absl::Status& s) {
  std::printf("error %s %s\n", absl::StatusCodeToString(s.code()).c_str(),
              std::string(s.message()).c_str());
  std::fflush(stdout);
  return 3;
}

int Hello(const std::string& socket) {
  absl::StatusOr<std::unique_ptr<gdr::handoff::HandoffClient>> c =
      gdr::handoff::HandoffClient::Connect(socket, "agent_peer", absl::Seconds(10));
  if (!c.ok()) return Fail(c.status());
  std::printf("session %llu\n", static_cast<unsigned long long>((*c)->session()));
  std::fflush(stdout);
  return 0;
}

int Load(const std::string& socket, const std::string& volume) {
  absl::StatusOr<AgentClient> c = AgentClient::Connect(socket, "agent_peer load");
  if (!c.ok()) return Fail(c.status());
  constexpr size_t kBytes = 4 << 20;
  constexpr int kOps = 16;
  absl::StatusOr<std::unique_ptr<SharedMemory>> mem = SharedMemory::Create(kBytes);
  if (!mem.ok()) return Fail(mem.status());
  absl::StatusOr<uint32_t> rkey = c->Register(**mem);
  if (!rkey.ok()) return Fail(rkey.status());
  grpc::ClientContext ctx;
  std::unique_ptr<grpc::ClientReaderWriter<v1::StreamRequest, v1::StreamResponse>> stream =
      c->stub->Stream(&ctx);
  const uint64_t piece = kBytes / kOps;
  for (uint64_t round = 0;; ++round) {
    v1::StreamRequest req;
    for (int i = 0; i < kOps; ++i) {
      v1::StreamOp* op = req.add_ops();
      op->set_id(round * kOps + static_cast<uint64_t>(i));
      v1::WriteRequest* w = op->mutable_write();
      w->mutable_extent()->set_volume(volume);
      w->mutable_extent()->set_offset(static_cast<uint64_t>(i) * piece);
      w->mutable_extent()->set_length(piece);
      *w->mutable_buffer() = c->Describe(**mem, *rkey, static_cast<uint64_t>(i) * piece, piece);
    }
    if (!stream->Write(req)) return Fail(gdr::FromGrpcStatus(stream->Finish()));
    for (int answered = 0; answered < kOps;) {
      v1::StreamResponse resp;
      if (!stream->Read(&resp)) return Fail(gdr::FromGrpcStatus(stream->Finish()));
      for (const v1::StreamResult& r : resp.results()) {
        if (r.code() != 0) return Fail(absl::Status(static_cast<absl::StatusCode>(r.code()),
                                                    r.message()));
        ++answered;
      }
    }
    if (round == 0) {
      std::printf("running\n");
      std::fflush(stdout);
    }
  }
}

int Bench(const std::string& socket, const std::string& volume, uint64_t size, uint32_t qd,
          uint64_t n) {
  absl::StatusOr<AgentClient> c = AgentClient::Connect(socket, "agent_peer bench");
  if (!c.ok()) return Fail(c.status());
  absl::StatusOr<std::unique_ptr<SharedMemory>> mem = SharedMemory::Create(size * qd);
  if (!mem.ok()) return Fail(mem.status());
  absl::StatusOr<uint32_t> rkey = c->Register(**mem);
  if (!rkey.ok()) return Fail(rkey.status());
  grpc::ClientContext ctx;
  auto stream = c->stub->Stream(&ctx);
  const uint64_t span = 256ull << 20;
  uint64_t sent = 0, done = 0;
  // Op i uses slot i % qd of the memory: a slot is free again once its op is answered.
  auto add = [&](v1::StreamRequest* req, uint64_t i) {
    v1::StreamOp* op = req->add_ops();
    op->set_id(i);
    v1::WriteRequest* w = op->mutable_write();
    w->mutable_extent()->set_volume(volume);
    w->mutable_extent()->set_offset((i * size) % (span - size + 1));
    w->mutable_extent()->set_length(size);
    *w->mutable_buffer() = c->Describe(**mem, *rkey, (i % qd) * size, size);
  };
  const auto start = std::chrono::steady_clock::now();
  v1::StreamRequest req;
  while (sent < n && sent < qd) add(&req, sent++);
  if (!stream->Write(req)) return Fail(gdr::FromGrpcStatus(stream->Finish()));
  while (done < n) {
    v1::StreamResponse resp;
    if (!stream->Read(&resp)) return Fail(gdr::FromGrpcStatus(stream->Finish()));
    req.Clear();
    for (const v1::StreamResult& r : resp.results()) {
      if (r.code() != 0) {
        return Fail(absl::Status(static_cast<absl::StatusCode>(r.code()), r.message()));
      }
      ++done;
      if (sent < n) add(&req, sent++);
    }
    if (req.ops_size() > 0 && !stream->Write(req)) {
      return Fail(gdr::FromGrpcStatus(stream->Finish()));
    }
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  stream->WritesDone();
  (void)stream->Finish();
  std::printf("ops %llu size %llu qd %u seconds %.3f GB/s %.3f\n",
              static_cast<unsigned long long>(done), static_cast<unsigned long long>(size), qd, s,
              static_cast<double>(done * size) / s / 1e9);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], "hello") == 0) return Hello(argv[2]);
  if (argc == 4 && std::strcmp(argv[1], "load") == 0) return Load(argv[2], argv[3]);
  if (argc == 7 && std::strcmp(argv[1], "bench") == 0) {
    return Bench(argv[2], argv[3], std::strtoull(argv[4], nullptr, 10),
                 static_cast<uint32_t>(std::strtoul(argv[5], nullptr, 10)),
                 std::strtoull(argv[6], nullptr, 10));
  }
  std::fprintf(stderr,
               "usage: agent_peer hello SOCKET | load SOCKET VOLUME | bench SOCKET VOLUME SIZE "
               "QD N\n");
  return 2;
}
