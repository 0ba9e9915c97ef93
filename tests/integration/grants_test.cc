// Per-volume grants end to end: a real gdrstored with a token file whose lines grant volumes
// and rights (get = store -> buffer, put = buffer -> store). Allowed ops move verified bytes,
// refused ones end PERMISSION_DENIED naming the credential, the volume and the missing right
// before a byte moves (the store and the caller's buffer stay as they were), GetInfo and
// GetStats show only granted volumes, a Stream refuses single ops and keeps serving, a SIGHUP
// changes the grants of a connected client's open Stream, and a broken file keeps the old ones.
#include <sys/stat.h>

#include <algorithm>
#include <csignal>
#include <cstring>
#include <fstream>
#include <future>
#include <span>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/base/pattern.h"
#include "gdrstore/client.h"
#include "gdrstore/v1/gdrstore.grpc.pb.h"
#include "tests/integration/daemon_process.h"
#include "tests/integration/stats_rpc.h"
#include "tests/integration/verified_ops.h"

namespace gdr::integ {
namespace {

namespace v1 = gdrstore::v1;
using gdrstore::OpKind;

constexpr uint64_t kVolumeSize = 4 << 20;
constexpr uint64_t kLen = 64 << 10;
constexpr char kAdmin[] = "grants-test-admin-token-0123456789";
constexpr char kGetter[] = "grants-test-getter-token-0123456789";
constexpr char kPutter[] = "grants-test-putter-token-0123456789";
constexpr char kStar[] = "grants-test-star-getter-token-0123456";

void WriteTokenFile(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::trunc) << text;
  ::chmod(path.c_str(), 0600);
}

std::string DaemonTokens() {
  return absl::StrCat("# grants of the test\n", kAdmin, " name=admin\n", kGetter,
                      " name=getter get=v1,v2\n", kPutter, " name=putter put=v1\n", kStar,
                      " name=star get=*  # every volume, gets only\n");
}

std::vector<std::string> VolumeNames(const v1::GetInfoResponse& info) {
  std::vector<std::string> out;
  for (const auto& v : info.volumes()) out.push_back(v.name());
  return out;
}

class GrantsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto dir = TempDir::Create("gdr-grants");
    ASSERT_TRUE(dir.ok()) << dir.status();
    dir_ = std::move(*dir);
    tokens_ = dir_->File("daemon.tokens");
    WriteTokenFile(tokens_, DaemonTokens());
    auto d = DaemonProcess::Start({"--volume", "v1=4MiB", "--volume", "v2=4MiB", "--volume",
                                   "v3=4MiB", "--token-file", tokens_});
    ASSERT_TRUE(d.ok()) << d.status();
    daemon_ = std::move(*d);
  }

  void TearDown() override {
    if (daemon_ == nullptr) return;
    const std::string log = daemon_->Stderr();
    for (const char* t : {kAdmin, kGetter, kPutter, kStar}) {
      EXPECT_FALSE(absl::StrContains(log, t)) << "a token was logged";
    }
  }

  std::unique_ptr<gdrstore::Client> Connect(const char* token) {
    gdrstore::ClientOptions o;
    o.daemon_address = daemon_->address();
    o.token = token;
    auto c = gdrstore::Client::Connect(o);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *std::move(c) : nullptr;
  }

  std::unique_ptr<gdrstore::Buffer> Allocate(gdrstore::Client& c, size_t n) {
    auto b = c.AllocateBuffer(n);
    EXPECT_TRUE(b.ok()) << b.status();
    return b.ok() ? *std::move(b) : nullptr;
  }

  // A put (the Read RPC) of the (volume, salt) pattern into [offset, +kLen).
  static absl::Status Put(gdrstore::Client& c, const gdrstore::Buffer& buf,
                          const std::string& volume, uint64_t offset, uint64_t salt) {
    PatternFill(PatternSeed(volume, salt), offset, std::span<std::byte>(buf.data(), kLen));
    return c.Read({volume, offset, kLen}, buf).status();
  }

  // What the store holds at [offset, +kLen) of `volume`, checked through the admin token.
  absl::Status StoreHolds(const std::string& volume, uint64_t offset, uint64_t salt) {
    auto admin = Connect(kAdmin);
    if (admin == nullptr) return absl::InternalError("no admin client");
    auto buf = Allocate(*admin, 2 * kLen);
    if (buf == nullptr) return absl::InternalError("no buffer");
    SaltMap salts(kVolumeSize);
    salts.Assign(offset, kLen, salt);
    return VerifiedWrite(*admin, *buf, kGuardBytes, {volume, offset, kLen}, salts);
  }

  ProcessResult Gdrctl(const std::string& token_file, std::vector<std::string> args) {
    std::vector<std::string> argv = {GDR_GDRCTL_BIN, "--daemon", daemon_->address(),
                                     "--token-file", dir_->File(token_file)};
    argv.insert(argv.end(), args.begin(), args.end());
    auto r = RunProcess(argv, dir_->path(), absl::StrCat("gdrctl", runs_++), absl::Seconds(60));
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : ProcessResult{};
  }

  std::unique_ptr<TempDir> dir_;
  std::string tokens_;
  std::unique_ptr<DaemonProcess> daemon_;
  int runs_ = 0;
};

TEST_F(GrantsTest, AGetOnlyTokenGetsAndIsRefusedPutsNamingVolumeAndRight) {
  auto getter = Connect(kGetter);
  ASSERT_NE(getter, nullptr);
  auto buf = Allocate(*getter, 2 * kLen);
  ASSERT_NE(buf, nullptr);
  SaltMap initial(kVolumeSize);
  EXPECT_TRUE(VerifiedWrite(*getter, *buf, kGuardBytes, {"v1", 4096, kLen}, initial).ok());
  EXPECT_TRUE(VerifiedWrite(*getter, *buf, kGuardBytes, {"v2", 12345, kLen}, initial).ok());

  absl::Status put = Put(*getter, *buf, "v1", 0, 7);
  EXPECT_EQ(put.code(), absl::StatusCode::kPermissionDenied) << put;
  EXPECT_EQ(put.message(),
            "credential 'getter' may not put to volume 'v1' (granted: get v1,v2; put none)");
  EXPECT_FALSE(absl::StrContains(put.message(), kGetter));
  // Nothing moved: the store still holds its initial pattern there.
  EXPECT_TRUE(StoreHolds("v1", 0, 0).ok());

  // v3 is not granted at all: both directions refused, and it is not listed.
  absl::StatusOr<gdrstore::OpResult> get3 = getter->Write({"v3", 0, kLen}, *buf);
  EXPECT_EQ(get3.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(absl::StrContains(get3.status().message(), "may not get from volume 'v3'"))
      << get3.status();
  EXPECT_EQ(Put(*getter, *buf, "v3", 0, 8).code(), absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(StoreHolds("v3", 0, 0).ok());
  // A volume that does not exist is refused the same way: a caller learns nothing of volumes
  // it has no grant on.
  EXPECT_EQ(getter->Write({"nope", 0, 16}, *buf).status().code(),
            absl::StatusCode::kPermissionDenied);

  auto info = getter->GetInfo();
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(VolumeNames(*info), (std::vector<std::string>{"v1", "v2"}));
  auto stats = GetStats(*getter);
  ASSERT_TRUE(stats.ok()) << stats.status();
  std::vector<std::string> stat_volumes;
  for (const auto& v : stats->volumes()) stat_volumes.push_back(v.name());
  EXPECT_EQ(stat_volumes, (std::vector<std::string>{"v1", "v2"}));
  EXPECT_TRUE(getter->Ping().ok());
  EXPECT_TRUE(daemon_->Running());
}

TEST_F(GrantsTest, APutOnlyTokenPutsAndIsRefusedGetsWithTheBufferUntouched) {
  auto putter = Connect(kPutter);
  ASSERT_NE(putter, nullptr);
  auto buf = Allocate(*putter, kLen);
  ASSERT_NE(buf, nullptr);
  ASSERT_TRUE(Put(*putter, *buf, "v1", 8192, 21).ok());
  EXPECT_TRUE(StoreHolds("v1", 8192, 21).ok());

  std::memset(buf->data(), 0x5a, kLen);
  absl::StatusOr<gdrstore::OpResult> get = putter->Write({"v1", 0, kLen}, *buf);
  EXPECT_EQ(get.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(get.status().message(),
            "credential 'putter' may not get from volume 'v1' (granted: get none; put v1)");
  for (size_t i = 0; i < kLen; ++i) {
    ASSERT_EQ(buf->data()[i], std::byte{0x5a}) << "buffer byte " << i << " changed";
  }
  EXPECT_EQ(Put(*putter, *buf, "v2", 0, 22).code(), absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(StoreHolds("v2", 0, 0).ok());

  auto info = putter->GetInfo();
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(VolumeNames(*info), (std::vector<std::string>{"v1"}));
}

TEST_F(GrantsTest, AStarGrantReachesEveryVolumeForItsRightOnly) {
  auto star = Connect(kStar);
  ASSERT_NE(star, nullptr);
  auto buf = Allocate(*star, 2 * kLen);
  ASSERT_NE(buf, nullptr);
  SaltMap initial(kVolumeSize);
  for (const char* v : {"v1", "v2", "v3"}) {
    EXPECT_TRUE(VerifiedWrite(*star, *buf, kGuardBytes, {v, 100, kLen}, initial).ok()) << v;
    absl::Status put = Put(*star, *buf, v, 0, 5);
    EXPECT_EQ(put.code(), absl::StatusCode::kPermissionDenied) << v;
    EXPECT_TRUE(absl::StrContains(put.message(), "(granted: get *; put none)")) << put;
  }
  auto info = star->GetInfo();
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(VolumeNames(*info), (std::vector<std::string>{"v1", "v2", "v3"}));
  // A volume that does not exist, under a * grant: the store's answer.
  EXPECT_EQ(star->Write({"nope", 0, 16}, *buf).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(GrantsTest, AStreamRefusesOnlyTheOpsWithoutAGrantAndKeepsServing) {
  auto getter = Connect(kGetter);
  ASSERT_NE(getter, nullptr);
  constexpr int kOps = 12;
  auto buf = Allocate(*getter, kOps * kLen);
  ASSERT_NE(buf, nullptr);
  std::memset(buf->data(), 0, kOps * kLen);
  auto stream = getter->OpenStream();
  ASSERT_TRUE(stream.ok()) << stream.status();

  // Round robin: get v1 (allowed), put v1 (refused), get v3 (refused), get v2 (allowed).
  struct Planned {
    OpKind kind;
    std::string volume;
    bool allowed;
  };
  std::vector<Planned> plan;
  for (int i = 0; i < kOps; ++i) {
    switch (i % 4) {
      case 0: plan.push_back({OpKind::kWrite, "v1", true}); break;
      case 1: plan.push_back({OpKind::kRead, "v1", false}); break;
      case 2: plan.push_back({OpKind::kWrite, "v3", false}); break;
      case 3: plan.push_back({OpKind::kWrite, "v2", true}); break;
    }
  }
  std::vector<std::promise<absl::StatusOr<gdrstore::OpResult>>> answers(kOps);
  for (int i = 0; i < kOps; ++i) {
    if (plan[i].kind == OpKind::kRead) {
      PatternFill(PatternSeed(plan[i].volume, 99), i * kLen,
                  std::span<std::byte>(buf->data() + i * kLen, kLen));
    }
    (*stream)->Submit(plan[i].kind, {plan[i].volume, i * kLen, kLen}, *buf, i * kLen,
                      [&answers, i](absl::StatusOr<gdrstore::OpResult> r) {
                        answers[i].set_value(std::move(r));
                      });
  }
  for (int i = 0; i < kOps; ++i) {
    auto f = answers[i].get_future();
    ASSERT_EQ(f.wait_for(std::chrono::seconds(60)), std::future_status::ready) << i;
    absl::StatusOr<gdrstore::OpResult> r = f.get();
    const std::span<const std::byte> got(buf->data() + i * kLen, kLen);
    if (plan[i].allowed) {
      ASSERT_TRUE(r.ok()) << i << ": " << r.status();
      EXPECT_EQ(r->bytes, kLen);
      EXPECT_FALSE(PatternMismatch(PatternSeed(plan[i].volume), i * kLen, got).has_value()) << i;
      continue;
    }
    EXPECT_EQ(r.status().code(), absl::StatusCode::kPermissionDenied) << i;
    const char* refused = plan[i].kind == OpKind::kRead ? "put to" : "get from";
    const std::string want = absl::StrCat("may not ", refused, " volume '", plan[i].volume, "'");
    EXPECT_TRUE(absl::StrContains(r.status().message(), want)) << r.status();
    if (plan[i].kind == OpKind::kWrite) {  // a refused get left the buffer as it was (zeros)
      EXPECT_TRUE(std::all_of(got.begin(), got.end(),
                              [](std::byte b) { return b == std::byte{0}; }))
          << i;
    }
  }
  // The same stream still serves, and ends cleanly.
  std::promise<absl::StatusOr<gdrstore::OpResult>> after;
  (*stream)->Submit(OpKind::kWrite, {"v2", 0, kLen}, *buf, 0,
                    [&after](absl::StatusOr<gdrstore::OpResult> r) { after.set_value(r); });
  auto last = after.get_future().get();
  EXPECT_TRUE(last.ok()) << last.status();
  EXPECT_TRUE((*stream)->Close().ok());
  // The refused puts left the store alone.
  EXPECT_TRUE(StoreHolds("v1", 1 * kLen, 0).ok());
  EXPECT_TRUE(StoreHolds("v1", 5 * kLen, 0).ok());
  EXPECT_TRUE(daemon_->Running());
}

TEST_F(GrantsTest, SighupChangesTheGrantsOfAConnectedClientsOpenStream) {
  auto getter = Connect(kGetter);
  ASSERT_NE(getter, nullptr);
  auto buf = Allocate(*getter, kLen);
  ASSERT_NE(buf, nullptr);
  auto stream = getter->OpenStream();
  ASSERT_TRUE(stream.ok()) << stream.status();
  auto submit = [&](OpKind kind, const std::string& volume, uint64_t offset) {
    if (kind == OpKind::kRead) {
      PatternFill(PatternSeed(volume, 31), offset, std::span<std::byte>(buf->data(), kLen));
    }
    std::promise<absl::Status> p;
    (*stream)->Submit(kind, {volume, offset, kLen}, *buf, 0,
                      [&p](absl::StatusOr<gdrstore::OpResult> r) { p.set_value(r.status()); });
    return p.get_future().get();
  };
  ASSERT_TRUE(submit(OpKind::kWrite, "v2", 0).ok());
  ASSERT_EQ(submit(OpKind::kRead, "v1", 0).code(), absl::StatusCode::kPermissionDenied);

  const pid_t pid = daemon_->pid();
  WriteTokenFile(tokens_, absl::StrCat(kAdmin, " name=admin\n", kGetter,
                                       " name=getter get=v1 put=v1\n"));
  ASSERT_TRUE(daemon_->Signal(SIGHUP).ok());
  // The reload runs on the daemon's main thread; the open stream sees it on a later message.
  ASSERT_TRUE(PollUntil([&] { return submit(OpKind::kRead, "v1", 0).ok(); }, absl::Seconds(20)))
      << daemon_->Stderr();
  EXPECT_TRUE(StoreHolds("v1", 0, 31).ok());
  absl::Status v2 = submit(OpKind::kWrite, "v2", 0);
  EXPECT_EQ(v2.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(absl::StrContains(v2.message(), "(granted: get v1; put v1)")) << v2;
  // Unary calls and GetInfo follow too.
  auto info = getter->GetInfo();
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(VolumeNames(*info), (std::vector<std::string>{"v1"}));
  // A credential removed by the reload: its open stream's ops are refused from then on.
  auto star = Connect(kStar);
  ASSERT_NE(star, nullptr);
  EXPECT_EQ(star->Ping().code(), absl::StatusCode::kPermissionDenied);

  // A file that no longer parses is refused whole: the grants stay as they were.
  WriteTokenFile(tokens_, absl::StrCat(kAdmin, "\n", kGetter, " get=v1,,v2\n"));
  ASSERT_TRUE(daemon_->Signal(SIGHUP).ok());
  ASSERT_TRUE(PollUntil([&] {
    return absl::StrContains(daemon_->Stderr(), "configuration not reloaded");
  }, absl::Seconds(20))) << daemon_->Stderr();
  EXPECT_TRUE(absl::StrContains(daemon_->Stderr(), "get= holds an empty volume name"))
      << daemon_->Stderr();
  EXPECT_TRUE(submit(OpKind::kRead, "v1", kLen).ok());
  EXPECT_EQ(submit(OpKind::kWrite, "v2", 0).code(), absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE((*stream)->Close().ok());
  EXPECT_EQ(daemon_->pid(), pid);
  EXPECT_TRUE(daemon_->Running());
}

TEST_F(GrantsTest, ATokenRemovedByAReloadFailsTheOpsOfItsOpenStream) {
  auto star = Connect(kStar);
  ASSERT_NE(star, nullptr);
  auto buf = Allocate(*star, kLen);
  ASSERT_NE(buf, nullptr);
  auto stream = star->OpenStream();
  ASSERT_TRUE(stream.ok()) << stream.status();
  auto get = [&] {
    std::promise<absl::Status> p;
    (*stream)->Submit(OpKind::kWrite, {"v3", 0, kLen}, *buf, 0,
                      [&p](absl::StatusOr<gdrstore::OpResult> r) { p.set_value(r.status()); });
    return p.get_future().get();
  };
  ASSERT_TRUE(get().ok());
  WriteTokenFile(tokens_, absl::StrCat(kAdmin, " name=admin\n"));
  ASSERT_TRUE(daemon_->Signal(SIGHUP).ok());
  ASSERT_TRUE(PollUntil([&] { return !get().ok(); }, absl::Seconds(20))) << daemon_->Stderr();
  EXPECT_EQ(get().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ((*stream)->Close().code(), absl::StatusCode::kOk);
  EXPECT_TRUE(daemon_->Running());
}

TEST_F(GrantsTest, GdrctlPresentsTheTokenOfANewFormatFileAndShowsTheRefusal) {
  // A client's copy of its line, grants and all: only the token is sent.
  WriteTokenFile(dir_->File("getter"), absl::StrCat("# my line\n", kGetter,
                                                    " name=getter get=v1,v2\n"));
  ProcessResult info = Gdrctl("getter", {"--json", "info"});
  ASSERT_EQ(info.exit_code, 0) << info.Describe();
  EXPECT_TRUE(absl::StrContains(info.out, "\"v1\"")) << info.out;
  EXPECT_TRUE(absl::StrContains(info.out, "\"v2\"")) << info.out;
  EXPECT_FALSE(absl::StrContains(info.out, "\"v3\"")) << info.out;
  ProcessResult get = Gdrctl("getter", {"write", "--volume", "v2", "-s", "64KiB", "--verify"});
  EXPECT_EQ(get.exit_code, 0) << get.Describe();
  ProcessResult put = Gdrctl("getter", {"read", "--volume", "v1", "-s", "64KiB"});
  EXPECT_EQ(put.exit_code, 1) << put.Describe();
  EXPECT_TRUE(absl::StrContains(put.err, "PERMISSION_DENIED")) << put.err;
  EXPECT_TRUE(absl::StrContains(put.err, "may not put to volume 'v1'")) << put.err;
  EXPECT_FALSE(absl::StrContains(put.err, kGetter)) << put.err;
}

// Calls that name no volume need a credential and no grant: Ping, GetInfo (which then lists
// nothing) and rc's Connect. Without an RDMA device rc is not running here, so an admitted
// Connect answers UNIMPLEMENTED instead of the refusals.
TEST_F(GrantsTest, ConnectNeedsACredentialButNoVolumeRight) {
  WriteTokenFile(tokens_, absl::StrCat(kAdmin, " name=admin\n", kGetter, " name=getter get=v1\n",
                                       "grants-test-nothing-but-v9-0123456 name=other get=v9\n"));
  ASSERT_TRUE(daemon_->Signal(SIGHUP).ok());
  auto other = Connect("grants-test-nothing-but-v9-0123456");
  ASSERT_NE(other, nullptr);
  ASSERT_TRUE(PollUntil([&] { return other->Ping().ok(); }, absl::Seconds(20)))
      << daemon_->Stderr();
  EXPECT_TRUE(absl::StrContains(daemon_->Stderr(), "credential 'other' is granted volume 'v9', "
                                                   "which this daemon does not have"))
      << daemon_->Stderr();
  auto info = other->GetInfo();
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_TRUE(VolumeNames(*info).empty());

  auto connect = [&](const char* token) {
    grpc::ClientContext ctx;
    if (token != nullptr) ctx.AddMetadata("authorization", absl::StrCat("Bearer ", token));
    auto channel = grpc::CreateChannel(daemon_->address(), grpc::InsecureChannelCredentials());
    auto stub = v1::GdrStore::NewStub(channel);
    auto call = stub->Connect(&ctx);
    call->WritesDone();
    return call->Finish().error_code();
  };
  EXPECT_EQ(connect(nullptr), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(connect("grants-test-unknown-token-000000"), grpc::StatusCode::PERMISSION_DENIED);
  // Admitted: the credential is enough (this daemon runs no rc, so the answer is that).
  const grpc::StatusCode admitted = connect("grants-test-nothing-but-v9-0123456");
  EXPECT_TRUE(admitted == grpc::StatusCode::UNIMPLEMENTED || admitted == grpc::StatusCode::OK ||
              admitted == grpc::StatusCode::INVALID_ARGUMENT)
      << admitted;
}

}  // namespace
}  // namespace gdr::integ
