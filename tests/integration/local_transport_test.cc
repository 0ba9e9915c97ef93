// The local transport end to end: a real gdrstored serving --local-socket in a scratch
// directory; this process hands sealed memfds over with handoff::HandoffClient and calls the
// real gRPC Write/Read/Stream with a LocalEndpoint (the generated stub, no client library), and
// verifies every byte against the store's pattern. Also: GetInfo.local, the refusals (wrong key,
// unknown rkey, out-of-range address, a get into a read-only region), a media model, fault
// rules and the trace applied to local ops unchanged, per-transport stats, the admission rule
// (a client of another uid through setpriv), a handing process SIGKILLed mid-run (this binary
// again, LocalChild.*) leaving the daemon serving, and GPU memory where there is a GPU.
// Over 600 lines because: one daemon fixture and its raw client serve every case, the GPU ones
// too, which tests/gpu/run-gpu-tests.sh runs from this binary (--gtest_filter='*Gpu*').
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/base/pattern.h"
#include "common/cuda/gpu.h"
#include "common/cuda/gpu_ipc.h"
#include "common/handoff/handoff_client.h"
#include "gdrstore/v1/gdrstore.grpc.pb.h"
#include "tests/common/test_memfd.h"
#include "tests/integration/admin_rpc.h"
#include "tests/integration/daemon_process.h"

namespace gdr::integ {
namespace {

namespace v1 = gdrstore::v1;
constexpr uint64_t kMiB = 1 << 20;
constexpr char kChildEnv[] = "GDR_LOCAL_CHILD";
constexpr char kConnectEnv[] = "GDR_LOCAL_CONNECT";

using Memfd = gdr::test::TestMemfd;

absl::Status ToStatus(const grpc::Status& s) {
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
}

// One client of the local transport: its handoff session and a gRPC stub.
class LocalClient {
 public:
  static std::unique_ptr<LocalClient> Open(const std::string& socket, const std::string& address) {
    auto c = std::unique_ptr<LocalClient>(new LocalClient());
    absl::StatusOr<std::unique_ptr<handoff::HandoffClient>> h =
        handoff::HandoffClient::Connect(socket, "local_transport_test", absl::Seconds(10));
    EXPECT_TRUE(h.ok()) << h.status();
    if (!h.ok()) return nullptr;
    c->handoff = std::move(*h);
    c->stub = v1::GdrStore::NewStub(
        grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
    return c;
  }
  uint32_t Register(const Memfd& m, bool writable = true) {
    handoff::Register r;
    r.kind = handoff::MemoryKind::kHostMemfd;
    r.writable = writable;
    r.address = m.address();
    r.size = m.size;
    absl::StatusOr<uint32_t> rkey = handoff->Register(r, m.fd);
    EXPECT_TRUE(rkey.ok()) << rkey.status();
    return rkey.value_or(0);
  }
  v1::RemoteBuffer Buffer(uint64_t address, uint64_t length, uint32_t rkey) const {
    v1::RemoteBuffer b;
    b.set_address(address);
    b.set_length(length);
    b.set_rkey(rkey);
    b.mutable_local()->set_session(handoff->session());
    b.mutable_local()->set_key(handoff->key());
    return b;
  }
  // A get: store [offset, +length) of `volume` into the client's memory at `address`.
  absl::StatusOr<v1::OpResponse> Get(const std::string& volume, uint64_t offset, uint64_t length,
                                     const v1::RemoteBuffer& buffer) {
    return Unary<v1::WriteRequest>(volume, offset, length, buffer,
                                   [this](auto* ctx, const auto& req, auto* resp) {
                                     return stub->Write(ctx, req, resp);
                                   });
  }
  absl::StatusOr<v1::OpResponse> Put(const std::string& volume, uint64_t offset, uint64_t length,
                                     const v1::RemoteBuffer& buffer) {
    return Unary<v1::ReadRequest>(volume, offset, length, buffer,
                                  [this](auto* ctx, const auto& req, auto* resp) {
                                    return stub->Read(ctx, req, resp);
                                  });
  }
  // One unary op of request type `Request` (Write or Read) through `call`, within 60 s.
  template <class Request, class Call>
  absl::StatusOr<v1::OpResponse> Unary(const std::string& volume, uint64_t offset,
                                       uint64_t length, const v1::RemoteBuffer& buffer,
                                       Call call) {
    Request req;
    req.mutable_extent()->set_volume(volume);
    req.mutable_extent()->set_offset(offset);
    req.mutable_extent()->set_length(length);
    *req.mutable_buffer() = buffer;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    v1::OpResponse resp;
    grpc::Status s = call(&ctx, req, &resp);
    if (!s.ok()) return ToStatus(s);
    return resp;
  }
  absl::StatusOr<v1::GetStatsResponse> Stats() {
    grpc::ClientContext ctx;
    v1::GetStatsResponse resp;
    grpc::Status s = stub->GetStats(&ctx, v1::GetStatsRequest(), &resp);
    if (!s.ok()) return ToStatus(s);
    return resp;
  }
  // GetStats' page_locked_bytes of `volume`; 0 when it is not listed or GetStats fails.
  uint64_t PageLocked(const std::string& volume) {
    absl::StatusOr<v1::GetStatsResponse> s = Stats();
    if (!s.ok()) return 0;
    for (const v1::VolumeStats& v : s->volumes()) {
      if (v.name() == volume) return v.page_locked_bytes();
    }
    return 0;
  }

  std::unique_ptr<handoff::HandoffClient> handoff;
  std::unique_ptr<v1::GdrStore::Stub> stub;
};

std::string BootId() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(in, id);
  return id;
}

class LocalTransportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto dir = TempDir::Create("local-sock");
    ASSERT_TRUE(dir.ok()) << dir.status();
    dir_ = std::move(*dir);
    socket_ = dir_->File("local.sock");
  }
  void StartDaemon(std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"--volume", "vol0=64MiB", "--volume", "rw=16MiB",
                                     "--local-socket", socket_, "--local-copy-threads", "3"};
    args.insert(args.end(), extra.begin(), extra.end());
    auto d = DaemonProcess::Start(args);
    ASSERT_TRUE(d.ok()) << d.status();
    daemon_ = std::move(*d);
    client_ = LocalClient::Open(socket_, daemon_->address());
    ASSERT_NE(client_, nullptr);
  }
  // The first `size` bytes of cuMemAlloc memory at `ptr`, handed over by its CUDA IPC handle.
  absl::StatusOr<uint32_t> RegisterIpc(uint64_t ptr, uint64_t size) {
    absl::StatusOr<cuda::GpuExport> e = cuda::ExportAllocation(ptr);
    if (!e.ok()) return e.status();
    handoff::Register r;
    r.kind = handoff::MemoryKind::kGpuIpc;
    r.address = ptr;
    r.size = size;
    r.allocation_size = e->allocation_size;
    r.ipc_handle = e->ipc_handle;
    r.gpu = e->pci;
    return client_->handoff->Register(r, -1);
  }

  std::unique_ptr<TempDir> dir_;
  std::string socket_;
  std::unique_ptr<DaemonProcess> daemon_;
  std::unique_ptr<LocalClient> client_;
};

TEST_F(LocalTransportTest, GetInfoNamesTheSocketAndThisHost) {
  StartDaemon();
  grpc::ClientContext ctx;
  v1::GetInfoResponse info;
  ASSERT_TRUE(client_->stub->GetInfo(&ctx, v1::GetInfoRequest(), &info).ok());
  EXPECT_EQ(info.local().socket_path(), socket_);
  EXPECT_EQ(info.local().host_id(), BootId());
  bool offered = false;
  for (const v1::TransportInfo& t : info.transports()) {
    if (t.transport() == v1::TRANSPORT_LOCAL) {
      offered = t.available();
      EXPECT_TRUE(absl::StrContains(t.detail(), "socket " + socket_)) << t.detail();
    }
  }
  EXPECT_TRUE(offered);
}

TEST_F(LocalTransportTest, VerifiedGetsAndPutsOfEverySize) {
  StartDaemon();
  Memfd m(40 * kMiB);
  const uint32_t rkey = client_->Register(m);
  uint64_t i = 0;
  for (uint64_t size : {uint64_t{1}, uint64_t{4096}, uint64_t{65537}, kMiB, 5 * kMiB + 3,
                        32 * kMiB}) {
    SCOPED_TRACE(absl::StrCat("size ", size));
    const uint64_t voff = 4097 * (i + 1), boff = 13 * i++;
    std::fill(m.data, m.data + m.size, std::byte{0});
    auto r = client_->Get("vol0", voff, size, client_->Buffer(m.address() + boff, size, rkey));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->bytes(), size);
    EXPECT_EQ(PatternMismatch(PatternSeed("vol0"), voff, m.span(boff, size)), std::nullopt);
    if (boff > 0) {
      EXPECT_EQ(m.data[boff - 1], std::byte{0});
    }
    EXPECT_EQ(m.data[boff + size], std::byte{0});
    // A put of a salted pattern, fetched back by a get into another part of the buffer.
    if (size > 16 * kMiB) continue;
    PatternFill(PatternSeed("rw", i), 100, m.span(boff, size));
    const uint64_t back = 20 * kMiB;
    auto put = client_->Put("rw", 100, size, client_->Buffer(m.address() + boff, size, rkey));
    ASSERT_TRUE(put.ok()) << put.status();
    auto get = client_->Get("rw", 100, size, client_->Buffer(m.address() + back, size, rkey));
    ASSERT_TRUE(get.ok()) << get.status();
    EXPECT_EQ(PatternMismatch(PatternSeed("rw", i), 100, m.span(back, size)), std::nullopt);
  }
  auto stats = client_->Stats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  bool seen = false;
  for (const v1::TransportStats& t : stats->transports()) {
    if (t.transport() != v1::TRANSPORT_LOCAL) continue;
    seen = true;
    EXPECT_EQ(t.ops().write_ops(), 6u + 5u);
    EXPECT_EQ(t.ops().read_ops(), 5u);
    EXPECT_EQ(t.pool().capacity(), 3u);
    EXPECT_EQ(t.pool().destinations(), 1u);
  }
  EXPECT_TRUE(seen);
}

TEST_F(LocalTransportTest, AStreamCarriesManyLocalOpsAtOnce) {
  StartDaemon();
  Memfd m(8 * kMiB);
  const uint32_t rkey = client_->Register(m);
  grpc::ClientContext ctx;
  auto stream = client_->stub->Stream(&ctx);
  v1::StreamRequest req;
  constexpr int kOps = 64;
  constexpr uint64_t kLen = 100000;
  for (int i = 0; i < kOps; ++i) {
    v1::StreamOp* op = req.add_ops();
    op->set_id(i + 1);
    v1::WriteRequest* w = op->mutable_write();
    w->mutable_extent()->set_volume("vol0");
    w->mutable_extent()->set_offset(i * 7 * kLen);
    w->mutable_extent()->set_length(kLen);
    *w->mutable_buffer() = client_->Buffer(m.address() + i * kLen, kLen, rkey);
  }
  ASSERT_TRUE(stream->Write(req));
  int answered = 0;
  v1::StreamResponse resp;
  while (answered < kOps && stream->Read(&resp)) {
    for (const v1::StreamResult& r : resp.results()) {
      EXPECT_EQ(r.code(), 0) << r.message();
      ++answered;
    }
  }
  stream->WritesDone();
  EXPECT_TRUE(stream->Finish().ok());
  ASSERT_EQ(answered, kOps);
  for (int i = 0; i < kOps; ++i) {
    EXPECT_EQ(PatternMismatch(PatternSeed("vol0"), i * 7 * kLen, m.span(i * kLen, kLen)),
              std::nullopt)
        << "op " << i;
  }
}

TEST_F(LocalTransportTest, RefusalsNameTheirCause) {
  StartDaemon();
  Memfd m(4 * kMiB), ro(kMiB);
  const uint32_t rkey = client_->Register(m);
  const uint32_t ro_rkey = client_->Register(ro, /*writable=*/false);
  auto code = [](const absl::StatusOr<v1::OpResponse>& r) { return r.status().code(); };
  // Wrong key: PERMISSION_DENIED, the key never quoted.
  v1::RemoteBuffer b = client_->Buffer(m.address(), 4096, rkey);
  std::string wrong = client_->handoff->key();
  wrong[3] = static_cast<char>(wrong[3] ^ 0x40);
  b.mutable_local()->set_key(wrong);
  auto r = client_->Get("vol0", 0, 4096, b);
  EXPECT_EQ(code(r), absl::StatusCode::kPermissionDenied) << r.status();
  EXPECT_FALSE(absl::StrContains(r.status().message(), wrong));
  // A key of the wrong size and a zero session are the parser's.
  b.mutable_local()->set_key("short");
  r = client_->Get("vol0", 0, 4096, b);
  EXPECT_EQ(code(r), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(r.status().message(), "buffer.local.key")) << r.status();
  b = client_->Buffer(m.address(), 4096, rkey);
  b.mutable_local()->set_session(0);
  r = client_->Get("vol0", 0, 4096, b);
  EXPECT_TRUE(absl::StrContains(r.status().message(), "buffer.local.session")) << r.status();
  // Unknown rkey; a range past the region; a get into a read-only region.
  r = client_->Get("vol0", 0, 4096, client_->Buffer(m.address(), 4096, rkey ^ 0x5a5a));
  EXPECT_EQ(code(r), absl::StatusCode::kInvalidArgument) << r.status();
  EXPECT_TRUE(absl::StrContains(r.status().message(), "not registered")) << r.status();
  r = client_->Get("vol0", 0, 8192, client_->Buffer(m.address() + 4 * kMiB - 4096, 8192, rkey));
  EXPECT_EQ(code(r), absl::StatusCode::kInvalidArgument) << r.status();
  EXPECT_TRUE(absl::StrContains(r.status().message(), "outside region")) << r.status();
  r = client_->Get("vol0", 0, 4096, client_->Buffer(ro.address(), 4096, ro_rkey));
  EXPECT_EQ(code(r), absl::StatusCode::kInvalidArgument) << r.status();
  EXPECT_TRUE(absl::StrContains(r.status().message(), "read-only")) << r.status();
  // The read-only region still feeds a put.
  PatternFill(PatternSeed("rw", 3), 0, ro.span(0, 4096));
  EXPECT_TRUE(client_->Put("rw", 0, 4096, client_->Buffer(ro.address(), 4096, ro_rkey)).ok());
  // The daemon's key never reached its log either.
  EXPECT_FALSE(absl::StrContains(daemon_->Stderr(), client_->handoff->key()));
}

TEST_F(LocalTransportTest, MediaModelAndFaultRulesApplyToLocalOps) {
  StartDaemon({"--volume", "slow=8MiB,latency_us=30000", "--fault",
               "kind=error,volume=vol0,count=1,code=UNAVAILABLE", "--trace",
               dir_->File("ops.trace")});
  Memfd m(4 * kMiB);
  const uint32_t rkey = client_->Register(m);
  const v1::RemoteBuffer b = client_->Buffer(m.address(), kMiB, rkey);
  // The configured error rule hits the first get of vol0, and only it.
  auto r = client_->Get("vol0", 0, kMiB, b);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << r.status();
  EXPECT_TRUE(absl::StrContains(r.status().message(), "injected fault")) << r.status();
  ASSERT_TRUE(client_->Get("vol0", 0, kMiB, b).ok());
  // A corrupt rule set at run time: one bit of one byte differs, delivered over local too.
  v1::FaultSpec corrupt;
  corrupt.set_kind(v1::FAULT_CORRUPT);
  corrupt.set_volume("vol0");
  corrupt.set_count(1);
  ASSERT_TRUE(SetFault(daemon_->address(), corrupt).ok());
  ASSERT_TRUE(client_->Get("vol0", 4096, kMiB, b).ok());
  std::vector<std::byte> want(kMiB);
  PatternFill(PatternSeed("vol0"), 4096, want);
  int bytes = 0, bits = 0;
  for (size_t i = 0; i < kMiB; ++i) {
    const unsigned x = static_cast<unsigned>(want[i] ^ m.data[i]);
    bytes += x != 0;
    bits += __builtin_popcount(x);
  }
  EXPECT_EQ(bytes, 1);
  EXPECT_EQ(bits, 1);
  // The media model: every local op of `slow` is booked on its simulated device and answered
  // no sooner than its latency.
  for (int i = 0; i < 3; ++i) {
    auto s = client_->Get("slow", i * kMiB, kMiB, b);
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_GE(s->service_ns(), 30'000'000u);
    EXPECT_EQ(PatternMismatch(PatternSeed("slow"), i * kMiB, m.span(0, kMiB)), std::nullopt);
  }
  auto stats = client_->Stats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  for (const v1::VolumeStats& v : stats->volumes()) {
    if (v.name() == "slow") {
      EXPECT_EQ(v.media().ops(), 3u);
    }
  }
  // The trace recorded every op that started, as on any transport: five (the one the error
  // rule refused never started). Its writer thread records them a moment after the answers.
  uint64_t records = 0;
  EXPECT_TRUE(PollUntil(
      [&] {
        auto s = client_->Stats();
        records = s.ok() ? s->trace().records() : 0;
        return records == 5;
      },
      absl::Seconds(30)))
      << records;
}

TEST_F(LocalTransportTest, ByDefaultTheSocketIsTheDaemonsUidsAlone) {
  StartDaemon();
  struct stat st {};
  ASSERT_EQ(::stat(socket_.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

// The second child: connects to the socket as whatever uid it runs as and writes what it got.
TEST(LocalChild, ConnectAndReport) {
  const char* env = std::getenv(kConnectEnv);
  if (env == nullptr) {
    GTEST_SKIP() << "runs only as the child process of LocalTransportTest.AnotherUid* ("
                 << kConnectEnv << " unset)";
  }
  std::vector<std::string> f = absl::StrSplit(env, ';');
  ASSERT_EQ(f.size(), 2u);
  absl::StatusOr<std::unique_ptr<handoff::HandoffClient>> h =
      handoff::HandoffClient::Connect(f[0], "other-uid", absl::Seconds(10));
  std::ofstream(f[1]) << (h.ok() ? std::string("OK") : h.status().ToString());
}

// What a process of uid/gid 65534 (nobody) hears from the daemon's socket.
std::string ConnectAsNobody(const TempDir& dir, const std::string& socket) {
  char self[4096] = {};
  EXPECT_GT(::readlink("/proc/self/exe", self, sizeof(self) - 1), 0);
  const std::string out = dir.File("connect.out");
  ::unlink(out.c_str());
  auto child = ChildProcess::SpawnWithEnv(
      {"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--", self,
       "--gtest_filter=LocalChild.ConnectAndReport"},
      {absl::StrCat(kConnectEnv, "=", socket, ";", out)}, dir.File("nobody.out"),
      dir.File("nobody.err"));
  EXPECT_TRUE(child.ok()) << child.status();
  if (!child.ok()) return "";
  absl::StatusOr<int> ws = (*child)->Wait(absl::Seconds(60));
  EXPECT_TRUE(ws.ok()) << ws.status();
  return ReadFileOrEmpty(out) + ReadFileOrEmpty(dir.File("nobody.err"));
}

TEST_F(LocalTransportTest, AnotherUidIsRefusedByNameUnlessAdmitted) {
  if (::geteuid() != 0 || ::access("/usr/bin/setpriv", X_OK) != 0) {
    GTEST_SKIP() << "needs root and setpriv to run a client as another uid";
  }
  ASSERT_EQ(::chmod(dir_->path().c_str(), 0777), 0);  // nobody writes its report here
  // Mode 0666 lets nobody reach the socket: its credentials are refused, by uid.
  StartDaemon({"--local-socket-mode", "0666"});
  const std::string refused = ConnectAsNobody(*dir_, socket_);
  EXPECT_TRUE(absl::StrContains(refused, "PERMISSION_DENIED")) << refused;
  EXPECT_TRUE(absl::StrContains(refused, "uid 65534 (gid 65534")) << refused;
  EXPECT_TRUE(absl::StrContains(refused, "--local-allow-uid")) << refused;
  daemon_.reset();
  client_.reset();
  // Admitted by uid: the socket is made 0666 and the session opens.
  StartDaemon({"--local-allow-uid", "65534"});
  EXPECT_EQ(ConnectAsNobody(*dir_, socket_).substr(0, 2), "OK");
}

// GPU memory over local (skipped without a GPU): a cuMemAlloc allocation handed over by CUDA
// IPC handle at an interior pointer, and a VMM allocation by descriptor; gets into each and puts
// out of each, verified through the driver on this side.
TEST_F(LocalTransportTest, GpuMemoryByIpcHandleAndByVmmDescriptor) {
  absl::StatusOr<std::vector<cuda::GpuInfo>> gpus = cuda::ListGpus();
  if (!gpus.ok()) GTEST_SKIP() << "no GPU here: " << gpus.status().message();
  StartDaemon();
  Memfd host(8 * kMiB);
  const uint32_t host_rkey = client_->Register(host);
  auto legacy = cuda::DeviceMemory::Create(0, 16 * kMiB);
  ASSERT_TRUE(legacy.ok()) << legacy.status();
  auto vmm = cuda::ShareableGpuMemory::Create(0, 16 * kMiB);
  ASSERT_TRUE(vmm.ok()) << vmm.status();
  auto vmm_view = cuda::DeviceMemory::Borrow((*vmm)->ptr(), (*vmm)->size());
  ASSERT_TRUE(vmm_view.ok()) << vmm_view.status();
  struct Case {
    const char* what;
    uint64_t ptr;  // where the region starts: an interior pointer for the IPC case
    const cuda::DeviceMemory* view;
    uint64_t view_base;
  } cases[] = {{"gpu-ipc", (*legacy)->ptr() + kMiB + 4096, legacy->get(), (*legacy)->ptr()},
               {"gpu-vmm-fd", (*vmm)->ptr(), vmm_view->get(), (*vmm)->ptr()}};
  int salt = 40;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    absl::StatusOr<cuda::GpuExport> e = cuda::ExportAllocation(c.ptr);
    ASSERT_TRUE(e.ok()) << e.status();
    handoff::Register r;
    r.kind = e->kind == cuda::GpuExport::Kind::kIpcHandle ? handoff::MemoryKind::kGpuIpc
                                                          : handoff::MemoryKind::kGpuVmmFd;
    r.address = c.ptr;
    r.size = 8 * kMiB;
    r.offset = c.ptr - e->allocation_base;
    r.allocation_size = e->allocation_size;
    r.ipc_handle = e->ipc_handle;
    r.gpu = e->pci;
    absl::StatusOr<uint32_t> rkey =
        client_->handoff->Register(r, e->chunks.empty() ? -1 : e->chunks[0].fd.get());
    ASSERT_TRUE(rkey.ok()) << rkey.status();
    // A get into GPU memory, read back through the driver.
    const uint64_t len = 5 * kMiB + 7, voff = 333;
    ASSERT_TRUE(client_->Get("vol0", voff, len, client_->Buffer(c.ptr + 9, len, *rkey)).ok());
    std::vector<std::byte> back(len);
    ASSERT_TRUE(c.view->CopyToHost(c.ptr + 9 - c.view_base, back.data(), len).ok());
    EXPECT_EQ(PatternMismatch(PatternSeed("vol0"), voff, back), std::nullopt);
    // A put out of GPU memory, fetched into host memory over local.
    PatternFill(PatternSeed("rw", ++salt), 0, back);
    ASSERT_TRUE(c.view->CopyFromHost(c.ptr - c.view_base, back.data(), len).ok());
    ASSERT_TRUE(client_->Put("rw", 0, len, client_->Buffer(c.ptr, len, *rkey)).ok());
    ASSERT_TRUE(client_->Get("rw", 0, len, client_->Buffer(host.address(), len, host_rkey)).ok());
    EXPECT_EQ(PatternMismatch(PatternSeed("rw", salt), 0, host.span(0, len)), std::nullopt);
  }
  // Rates for the record (printed, not asserted): 64 MiB gets into GPU memory over local, one
  // at a time, against a pinned host->GPU copy of the same bytes in this process.
  auto big = cuda::DeviceMemory::Create(0, 64 * kMiB);
  ASSERT_TRUE(big.ok()) << big.status();
  absl::StatusOr<uint32_t> big_rkey = RegisterIpc((*big)->ptr(), 64 * kMiB);
  ASSERT_TRUE(big_rkey.ok()) << big_rkey.status();
  const v1::RemoteBuffer bb = client_->Buffer((*big)->ptr(), 64 * kMiB, *big_rkey);
  ASSERT_TRUE(client_->Get("vol0", 0, 64 * kMiB, bb).ok());
  // Timed once vol0 is page-locked (in the background, from the daemon's start or this get).
  ASSERT_TRUE(PollUntil([&] { return client_->PageLocked("vol0") == 64 * kMiB; },
                        absl::Seconds(120)));
  constexpr int kReps = 8;
  absl::Time t0 = absl::Now();
  for (int i = 0; i < kReps; ++i) ASSERT_TRUE(client_->Get("vol0", 0, 64 * kMiB, bb).ok());
  const double local_gbs = kReps * 64.0 * kMiB / absl::ToDoubleSeconds(absl::Now() - t0) / 1e9;
  auto pinned = cuda::PinnedMemory::Create(64 * kMiB);
  ASSERT_TRUE(pinned.ok()) << pinned.status();
  ASSERT_TRUE((*big)->CopyFromHost(0, (*pinned)->data(), 64 * kMiB).ok());
  t0 = absl::Now();
  for (int i = 0; i < kReps; ++i) {
    ASSERT_TRUE((*big)->CopyFromHost(0, (*pinned)->data(), 64 * kMiB).ok());
  }
  const double pinned_gbs = kReps * 64.0 * kMiB / absl::ToDoubleSeconds(absl::Now() - t0) / 1e9;
  std::cout << "64 MiB gets into GPU memory over local: " << local_gbs
            << " GB/s; pinned cuMemcpyHtoD of the same: " << pinned_gbs
            << " GB/s; ratio " << local_gbs / pinned_gbs << "\n";
  // And host memory: 32 MiB gets into a memfd against one memcpy of the same size.
  Memfd hb(32 * kMiB);
  const uint32_t hb_rkey = client_->Register(hb);
  const v1::RemoteBuffer hbb = client_->Buffer(hb.address(), 32 * kMiB, hb_rkey);
  ASSERT_TRUE(client_->Get("vol0", 0, 32 * kMiB, hbb).ok());
  t0 = absl::Now();
  for (int i = 0; i < kReps; ++i) ASSERT_TRUE(client_->Get("vol0", 0, 32 * kMiB, hbb).ok());
  const double host_gbs = kReps * 32.0 * kMiB / absl::ToDoubleSeconds(absl::Now() - t0) / 1e9;
  std::vector<std::byte> src(32 * kMiB, std::byte{1});
  std::memcpy(hb.data, src.data(), src.size());
  t0 = absl::Now();
  for (int i = 0; i < kReps; ++i) std::memcpy(hb.data, src.data(), src.size());
  const double memcpy_gbs = kReps * 32.0 * kMiB / absl::ToDoubleSeconds(absl::Now() - t0) / 1e9;
  std::cout << "32 MiB gets into host memory over local: " << host_gbs
            << " GB/s; one memcpy of the same: " << memcpy_gbs << " GB/s; ratio "
            << host_gbs / memcpy_gbs << "\n";
  // Which path the bytes took: the store pages of vol0 and rw page-locked for GPU copies.
  grpc::ClientContext ctx;
  v1::GetInfoResponse info;
  ASSERT_TRUE(client_->stub->GetInfo(&ctx, v1::GetInfoRequest(), &info).ok());
  for (const v1::TransportInfo& t : info.transports()) {
    if (t.transport() == v1::TRANSPORT_LOCAL) std::cout << "local: " << t.detail() << "\n";
  }
}

// A GPU op never waits for a page lock (issue 41): with nothing locked ahead (no lock at
// start), a file volume's first gets into GPU memory go through the copy threads' bounce
// buffers and land whole; the pieces they touched, and only those, are locked in the
// background, after which gets run straight from them; puts are verified either way (a file's
// shared mapping may only take a read-only lock, which leaves them staged). Skipped without a
// GPU.
TEST_F(LocalTransportTest, GpuCopiesAreStagedUntilTheirPiecesAreLocked) {
  absl::StatusOr<std::vector<cuda::GpuInfo>> gpus = cuda::ListGpus();
  if (!gpus.ok()) GTEST_SKIP() << "no GPU here: " << gpus.status().message();
  StartDaemon({"--volume", "f0=64MiB,file=" + dir_->File("f0"), "--local-lock-at-start",
               "false", "--local-lock-idle-ms", "0", "--local-lock-piece-size", "16MiB"});
  auto gpu = cuda::DeviceMemory::Create(0, 64 * kMiB);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  absl::StatusOr<uint32_t> rkey = RegisterIpc((*gpu)->ptr(), 64 * kMiB);
  ASSERT_TRUE(rkey.ok()) << rkey.status();
  EXPECT_EQ(client_->PageLocked("f0"), 0u);  // nothing touched yet
  // Pieces 0-2 of f0 (16 MiB each), from an odd offset, into an odd place.
  const uint64_t voff = 4096 + 5, len = 40 * kMiB + 123;
  std::vector<std::byte> back(len);
  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE(round == 0 ? "staged" : "from the locked pieces");
    ASSERT_TRUE(
        client_->Get("f0", voff, len, client_->Buffer((*gpu)->ptr() + 9, len, *rkey)).ok());
    std::fill(back.begin(), back.end(), std::byte{0});
    ASSERT_TRUE((*gpu)->CopyToHost(9, back.data(), len).ok());
    EXPECT_EQ(PatternMismatch(PatternSeed("f0"), voff, back), std::nullopt);
    if (round == 0) {
      ASSERT_TRUE(PollUntil([&] { return client_->PageLocked("f0") == 48 * kMiB; },
                            absl::Seconds(120)));
    }
  }
  EXPECT_EQ(client_->PageLocked("f0"), 48 * kMiB);  // piece 3 was never touched
  // A put out of GPU memory into the locked pieces 1-2 (straight under a read-write lock,
  // staged under a read-only one), read back into host memory.
  std::vector<std::byte> src(8 * kMiB + 3);
  PatternFill(PatternSeed("f0-put"), 0, src);
  ASSERT_TRUE((*gpu)->CopyFromHost(0, src.data(), src.size()).ok());
  ASSERT_TRUE(
      client_->Put("f0", 20 * kMiB, src.size(), client_->Buffer((*gpu)->ptr(), src.size(), *rkey))
          .ok());
  Memfd host(src.size());
  const uint32_t host_rkey = client_->Register(host);
  ASSERT_TRUE(client_->Get("f0", 20 * kMiB, src.size(),
                           client_->Buffer(host.address(), src.size(), host_rkey))
                  .ok());
  EXPECT_EQ(std::memcmp(host.data, src.data(), src.size()), 0);
  grpc::ClientContext ctx;
  v1::GetInfoResponse info;
  ASSERT_TRUE(client_->stub->GetInfo(&ctx, v1::GetInfoRequest(), &info).ok());
  for (const v1::TransportInfo& t : info.transports()) {
    if (t.transport() != v1::TRANSPORT_LOCAL) continue;
    std::cout << "local: " << t.detail() << "\n";
    // The first gets were staged.
    EXPECT_FALSE(absl::StrContains(t.detail(), "; 0 GPU copies staged")) << t.detail();
    EXPECT_TRUE(absl::StrContains(t.detail(), "GPU copies staged")) << t.detail();
  }
}

// The child: hands a memfd over and gets into it until it is killed.
TEST(LocalChild, HandOverAndGetUntilKilled) {
  const char* env = std::getenv(kChildEnv);
  if (env == nullptr) {
    GTEST_SKIP() << "runs only as the child process of LocalTransportTest.AKilledClient* ("
                 << kChildEnv << " unset)";
  }
  std::vector<std::string> f = absl::StrSplit(env, ';');
  ASSERT_EQ(f.size(), 3u);
  auto c = LocalClient::Open(f[0], f[1]);
  ASSERT_NE(c, nullptr);
  Memfd m(16 * kMiB);
  const uint32_t rkey = c->Register(m);
  for (uint64_t i = 0;; ++i) {
    auto r = c->Get("vol0", (i % 4) * 16 * kMiB, 16 * kMiB,
                    c->Buffer(m.address(), 16 * kMiB, rkey));
    ASSERT_TRUE(r.ok()) << r.status();
    if (i == 0) std::ofstream(f[2]) << "running\n";
  }
}

TEST_F(LocalTransportTest, AKilledClientLeavesTheDaemonServing) {
  StartDaemon();
  Memfd m(4 * kMiB);
  const uint32_t rkey = client_->Register(m);
  char self[4096] = {};
  ASSERT_GT(::readlink("/proc/self/exe", self, sizeof(self) - 1), 0);
  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE(absl::StrCat("round ", round));
    const std::string marker = dir_->File(absl::StrCat("child", round));
    auto child = ChildProcess::SpawnWithEnv(
        {self, "--gtest_filter=LocalChild.HandOverAndGetUntilKilled"},
        {absl::StrCat(kChildEnv, "=", socket_, ";", daemon_->address(), ";", marker)},
        dir_->File("child.out"), dir_->File("child.err"));
    ASSERT_TRUE(child.ok()) << child.status();
    ASSERT_TRUE(PollUntil([&] { return !ReadFileOrEmpty(marker).empty() || !(*child)->Running(); },
                          absl::Seconds(60)));
    ASSERT_TRUE((*child)->Running()) << ReadFileOrEmpty(dir_->File("child.out"));
    auto before = client_->Stats();
    ASSERT_TRUE(before.ok());
    ASSERT_TRUE((*child)->Signal(SIGKILL).ok());
    ASSERT_TRUE((*child)->Wait(absl::Seconds(30)).ok());
    // Its session ends (one local client left: this one) and the daemon goes on serving.
    auto destinations = [&]() -> uint32_t {
      auto s = client_->Stats();
      if (!s.ok()) return 99;
      for (const v1::TransportStats& t : s->transports()) {
        if (t.transport() == v1::TRANSPORT_LOCAL) return t.pool().destinations();
      }
      return 98;
    };
    EXPECT_TRUE(PollUntil([&] { return destinations() == 1; }, absl::Seconds(30)))
        << destinations();
    ASSERT_TRUE(daemon_->Running()) << daemon_->Stderr();
    auto r = client_->Get("vol0", 12345, 3 * kMiB, client_->Buffer(m.address(), 3 * kMiB, rkey));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(PatternMismatch(PatternSeed("vol0"), 12345, m.span(0, 3 * kMiB)), std::nullopt);
  }
}

}  // namespace
}  // namespace gdr::integ
