#include "tests/agent/agent_harness.h"

#include <fcntl.h>
#include <grpcpp/create_channel_posix.h>
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/grpc/grpc_status.h"

namespace gdr::agent::test {

namespace v1 = gdrstore::v1;

std::string AgentBinary() { return GDR_GDRAGENT_BIN; }

absl::StatusOr<std::unique_ptr<AgentProcess>> AgentProcess::Start(
    const std::string& daemon, const std::vector<std::string>& args,
    std::shared_ptr<integ::TempDir> dir, absl::Duration timeout,
    const std::vector<std::string>& env) {
  std::unique_ptr<AgentProcess> a(new AgentProcess());
  if (dir == nullptr) {
    absl::StatusOr<std::unique_ptr<integ::TempDir>> d = integ::TempDir::Create("gdragent-test");
    if (!d.ok()) return d.status();
    dir = std::move(*d);
    // Another uid must reach the socket for the allowlist to be what refuses it.
    if (::chmod(dir->path().c_str(), 0755) != 0) return absl::ErrnoToStatus(errno, "chmod");
  }
  a->dir_ = std::move(dir);
  a->socket_ = a->dir_->File("agent.sock");
  std::vector<std::string> argv = {GDR_GDRAGENT_BIN, "--socket", a->socket_, "--socket-mode",
                                   "0666"};
  if (!daemon.empty()) argv.insert(argv.end(), {"--daemon", daemon});
  argv.insert(argv.end(), args.begin(), args.end());
  const std::string tag = absl::StrCat(absl::ToUnixNanos(absl::Now()));
  absl::StatusOr<std::unique_ptr<integ::ChildProcess>> child = integ::ChildProcess::SpawnWithEnv(
      argv, env, a->dir_->File("agent-" + tag + ".out"), a->dir_->File("agent-" + tag + ".err"));
  if (!child.ok()) return child.status();
  a->child_ = std::move(*child);
  absl::Status last = absl::UnavailableError("not tried");
  const bool ready = integ::PollUntil(
      [&] {
        if (!a->child_->Running()) return true;
        absl::StatusOr<std::unique_ptr<handoff::HandoffClient>> c =
            handoff::HandoffClient::Connect(a->socket_, "ready-check", absl::Seconds(2));
        last = c.status();
        return c.ok();
      },
      timeout, absl::Milliseconds(20));
  if (!a->child_->Running()) {
    return absl::InternalError(absl::StrCat("gdragent exited (",
                                            integ::DescribeWaitStatus(a->child_->wait_status()),
                                            "): ", a->Stderr()));
  }
  if (!ready) {
    return absl::DeadlineExceededError(
        absl::StrCat("gdragent not ready: ", last.message(), "; stderr: ", a->Stderr()));
  }
  return a;
}

AgentProcess::~AgentProcess() {
  if (child_ != nullptr && child_->Running()) {
    (void)child_->Signal(SIGTERM);
    (void)child_->Wait(absl::Seconds(20));
  }
}

std::string AgentProcess::Stderr() const {
  return integ::ReadFileOrEmpty(child_->stderr_path());
}

absl::StatusOr<std::unique_ptr<SharedMemory>> SharedMemory::Create(size_t size) {
  std::unique_ptr<SharedMemory> m(new SharedMemory());
  m->fd_ = ScopedFd(::memfd_create("gdragent-test", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!m->fd_.valid()) return absl::ErrnoToStatus(errno, "memfd_create");
  if (::ftruncate(m->fd_.get(), static_cast<off_t>(size)) != 0) {
    return absl::ErrnoToStatus(errno, "ftruncate");
  }
  if (::fcntl(m->fd_.get(), F_ADD_SEALS, F_SEAL_SHRINK) != 0) {
    return absl::ErrnoToStatus(errno, "F_ADD_SEALS");
  }
  void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, m->fd_.get(), 0);
  if (p == MAP_FAILED) return absl::ErrnoToStatus(errno, "mmap");
  m->data_ = static_cast<std::byte*>(p);
  m->size_ = size;
  return m;
}

SharedMemory::~SharedMemory() {
  if (data_ != nullptr) ::munmap(data_, size_);
}

absl::StatusOr<AgentClient> AgentClient::Connect(const std::string& socket_path,
                                                 const std::string& name) {
  AgentClient c;
  absl::StatusOr<std::unique_ptr<handoff::HandoffClient>> s =
      handoff::HandoffClient::Connect(socket_path, name, absl::Seconds(10));
  if (!s.ok()) return s.status();
  c.session = std::move(*s);
  absl::StatusOr<ScopedFd> end = c.session->OpenChannel();
  if (!end.ok()) return end.status();
  // gRPC owns the end from here.
  c.channel = grpc::CreateInsecureChannelFromFd("gdragent", end->Release());
  c.stub = v1::GdrStore::NewStub(c.channel);
  return c;
}

absl::StatusOr<uint32_t> AgentClient::Register(const SharedMemory& memory, bool writable) {
  handoff::Register r;
  r.kind = handoff::MemoryKind::kHostMemfd;
  r.writable = writable;
  r.address = memory.address();
  r.size = memory.size();
  r.offset = 0;
  return session->Register(r, memory.fd());
}

v1::RemoteBuffer AgentClient::Describe(const SharedMemory& memory, uint32_t rkey,
                                       uint64_t offset, uint64_t length) const {
  v1::RemoteBuffer b;
  b.set_address(memory.address() + offset);
  b.set_length(length);
  b.set_rkey(rkey);
  b.mutable_local()->set_session(session->session());
  b.mutable_local()->set_key(session->key());
  return b;
}

namespace {

void SetDeadline(grpc::ClientContext* ctx) {
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
}

}  // namespace

absl::StatusOr<v1::OpResponse> AgentClient::Get(const std::string& volume, uint64_t volume_offset,
                                                 const v1::RemoteBuffer& buffer, bool crc32c) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  v1::WriteRequest req;
  req.mutable_extent()->set_volume(volume);
  req.mutable_extent()->set_offset(volume_offset);
  req.mutable_extent()->set_length(buffer.length());
  *req.mutable_buffer() = buffer;
  req.set_crc32c(crc32c);
  v1::OpResponse resp;
  grpc::Status s = stub->Write(&ctx, req, &resp);
  if (!s.ok()) return FromGrpcStatus(s);
  return resp;
}

absl::StatusOr<v1::OpResponse> AgentClient::Put(const std::string& volume, uint64_t volume_offset,
                                                 const v1::RemoteBuffer& buffer) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  v1::ReadRequest req;
  req.mutable_extent()->set_volume(volume);
  req.mutable_extent()->set_offset(volume_offset);
  req.mutable_extent()->set_length(buffer.length());
  *req.mutable_buffer() = buffer;
  v1::OpResponse resp;
  grpc::Status s = stub->Read(&ctx, req, &resp);
  if (!s.ok()) return FromGrpcStatus(s);
  return resp;
}

absl::StatusOr<v1::GetStatsResponse> AgentClient::Stats() {
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  v1::GetStatsResponse resp;
  grpc::Status s = stub->GetStats(&ctx, v1::GetStatsRequest(), &resp);
  if (!s.ok()) return FromGrpcStatus(s);
  return resp;
}

absl::StatusOr<v1::GetInfoResponse> AgentClient::Info() {
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  v1::GetInfoResponse resp;
  grpc::Status s = stub->GetInfo(&ctx, v1::GetInfoRequest(), &resp);
  if (!s.ok()) return FromGrpcStatus(s);
  return resp;
}

}  // namespace gdr::agent::test
