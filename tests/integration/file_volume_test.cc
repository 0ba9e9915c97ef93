// File-backed volumes on a real gdrstored: the file is created and pattern-filled when missing,
// bytes a Read stores survive SIGKILL and a restart (they are in the file's pages when the Read
// is answered), Read{sync=true} works, and an existing file of the wrong size is refused, not
// resized; a file truncated under the running daemon fails its volume's ops, naming the file,
// while the daemon serves on.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <future>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/src/daemon_rpc.h"
#include "common/base/pattern.h"
#include "gdrstore/client.h"
#include "tests/integration/daemon_process.h"
#include "tests/integration/verified_ops.h"

namespace gdr::integ {
namespace {

constexpr uint64_t kMiB = 1 << 20;
constexpr uint64_t kSize = 32 * kMiB;

std::string ReadRange(const std::string& path, uint64_t offset, uint64_t length) {
  std::ifstream in(path, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(offset));
  std::string out(length, '\0');
  in.read(out.data(), static_cast<std::streamsize>(length));
  return in ? out : std::string();
}

std::span<const std::byte> AsBytes(const std::string& s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}


TEST(FileVolumeTest, CreatedFilledAndSurvivesSigkill) {
  auto dir = TempDir::Create("gdr-filevol");
  ASSERT_TRUE(dir.ok());
  const std::string file = (*dir)->File("fv.img");
  const std::vector<std::string> args = {"--volume", absl::StrCat("fv=", kSize, ",file=", file)};

  auto d1 = DaemonProcess::Start(args);
  ASSERT_TRUE(d1.ok()) << d1.status();
  EXPECT_TRUE(absl::StrContains((*d1)->Stderr(), "created and filled")) << (*d1)->Stderr();
  // The new file holds the pattern, and no half-filled leftover is there.
  ASSERT_EQ(std::filesystem::file_size(file), kSize);
  EXPECT_FALSE(std::filesystem::exists(file + ".partial"));
  const std::string head = ReadRange(file, 0, 4 * kMiB);
  ASSERT_EQ(head.size(), 4 * kMiB);
  EXPECT_FALSE(PatternMismatch(PatternSeed("fv"), 0, AsBytes(head)).has_value());

  auto client = ConnectClient(**d1);
  ASSERT_NE(client, nullptr);
  auto info = client->GetInfo();
  ASSERT_TRUE(info.ok());
  ASSERT_EQ(info->volumes_size(), 1);
  EXPECT_EQ(info->volumes(0).backing(), "file:" + file);
  auto buf = client->AllocateBuffer(4 * kMiB + 2 * kGuardBytes + 8192);
  ASSERT_TRUE(buf.ok());

  // Plain Read (no sync) of a salted pattern, verified by a Write back.
  SaltMap salts(kSize);
  const gdrstore::Extent plain{"fv", 12345, 3 * kMiB + 7};
  ASSERT_TRUE(VerifiedRead(*client, **buf, kGuardBytes, kGuardBytes + 4096, plain, 77, &salts).ok());
  // The bytes are in the file the moment the Read is answered (read through the file, not
  // the daemon).
  const std::string in_file = ReadRange(file, plain.offset, plain.length);
  EXPECT_FALSE(PatternMismatch(PatternSeed("fv", 77), plain.offset, AsBytes(in_file)).has_value());

  // Read with sync=true through the raw RPC.
  const gdrstore::Extent synced{"fv", 20 * kMiB + 3, 1 * kMiB};
  PatternFill(PatternSeed("fv", 99), synced.offset,
              std::span<std::byte>((*buf)->data(), synced.length));
  auto rb = client->Describe(**buf, 0, synced.length);
  ASSERT_TRUE(rb.ok());
  gdrstore::v1::ReadRequest req;
  req.mutable_extent()->set_volume("fv");
  req.mutable_extent()->set_offset(synced.offset);
  req.mutable_extent()->set_length(synced.length);
  *req.mutable_buffer() = *rb;
  req.set_sync(true);
  gdrstore::v1::OpResponse resp;
  grpc::ClientContext ctx;
  grpc::Status s = gdr::DaemonStub(*client)->Read(&ctx, req, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(resp.bytes(), synced.length);
  EXPECT_TRUE(resp.synced());
  salts.Assign(synced.offset, synced.length, 99);

  // SIGKILL: no drain, no final flush.
  buf->reset();
  client.reset();
  ASSERT_TRUE((*d1)->Signal(SIGKILL).ok());
  auto st = (*d1)->Wait(absl::Seconds(10));
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(DescribeWaitStatus(*st), "killed by signal 9 (Killed)");

  // Restart on the same file: data kept, every byte as the model says.
  auto d2 = DaemonProcess::Start(args);
  ASSERT_TRUE(d2.ok()) << d2.status();
  EXPECT_TRUE(absl::StrContains((*d2)->Stderr(), "existing data kept")) << (*d2)->Stderr();
  client = ConnectClient(**d2);
  ASSERT_NE(client, nullptr);
  buf = client->AllocateBuffer(4 * kMiB + 2 * kGuardBytes + 8192);
  ASSERT_TRUE(buf.ok());
  for (const gdrstore::Extent& e :
       {plain, synced, gdrstore::Extent{"fv", 0, 12345}, gdrstore::Extent{"fv", kSize - kMiB, kMiB},
        gdrstore::Extent{"fv", plain.offset - 100, plain.length + 200}}) {
    absl::Status v = VerifiedWrite(*client, **buf, kGuardBytes, e, salts);
    EXPECT_TRUE(v.ok()) << v;
  }
  auto st2 = (*d2)->Terminate(absl::Seconds(30));
  ASSERT_TRUE(st2.ok());
  EXPECT_EQ(DescribeWaitStatus(*st2), "exited 0") << (*d2)->Stderr();
}

// sync reaches the daemon from every client path (gdrctl read --sync, Client::Read, a Stream
// op of kind kReadSync) and the answer says whether it waited for msync: only for a Read into
// a file-backed volume with sync asked.
TEST(FileVolumeTest, SyncIsAskedFromEveryClientPathAndReportedOnlyForFileVolumes) {
  auto dir = TempDir::Create("gdr-filevol-sync");
  ASSERT_TRUE(dir.ok());
  auto d = DaemonProcess::Start({"--volume", absl::StrCat("fv=8MiB,file=", (*dir)->File("fv.img")),
                                 "--volume", "mem=8MiB"});
  ASSERT_TRUE(d.ok()) << d.status();
  auto gdrctl = [&](std::vector<std::string> args) {
    std::vector<std::string> argv = {GDR_GDRCTL_BIN, "--daemon", (*d)->address()};
    argv.insert(argv.end(), args.begin(), args.end());
    auto r = RunProcess(argv, (*dir)->path(), "gdrctl", absl::Seconds(60));
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : ProcessResult{};
  };
  ProcessResult r = gdrctl({"read", "--volume", "fv", "-o", "4097", "-s", "1MiB", "--salt", "5",
                            "--sync", "--verify"});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_TRUE(absl::StrContains(r.out, "msync'ed to the volume's file")) << r.out;
  r = gdrctl({"--json", "read", "--volume", "fv", "-s", "4KiB", "--sync"});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_TRUE(absl::StrContains(r.out, "\"synced\":true")) << r.out;
  r = gdrctl({"--json", "read", "--volume", "fv", "-s", "4KiB"});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_TRUE(absl::StrContains(r.out, "\"synced\":false")) << r.out;
  r = gdrctl({"--json", "read", "--volume", "mem", "-s", "4KiB", "--sync"});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_TRUE(absl::StrContains(r.out, "\"synced\":false")) << r.out;

  auto client = ConnectClient(**d);
  ASSERT_NE(client, nullptr);
  auto buf = client->AllocateBuffer(64 * 1024);
  ASSERT_TRUE(buf.ok()) << buf.status();
  auto unary = client->Read({"fv", 65536, 65536}, **buf, 0, {.sync = true});
  ASSERT_TRUE(unary.ok()) << unary.status();
  EXPECT_TRUE(unary->synced);
  auto stream = client->OpenStream();
  ASSERT_TRUE(stream.ok()) << stream.status();
  std::vector<std::promise<absl::StatusOr<gdrstore::OpResult>>> answers(3);
  const struct {
    gdrstore::OpKind kind;
    const char* volume;
  } ops[] = {{gdrstore::OpKind::kReadSync, "fv"},
             {gdrstore::OpKind::kRead, "fv"},
             {gdrstore::OpKind::kReadSync, "mem"}};
  for (int i = 0; i < 3; ++i) {
    (*stream)->Submit(ops[i].kind, {ops[i].volume, uint64_t(i) * 4096, 4096}, **buf, 0,
                      [&answers, i](absl::StatusOr<gdrstore::OpResult> res) {
                        answers[i].set_value(std::move(res));
                      });
  }
  for (int i = 0; i < 3; ++i) {
    auto f = answers[i].get_future();
    ASSERT_EQ(f.wait_for(std::chrono::seconds(30)), std::future_status::ready) << "op " << i;
    absl::StatusOr<gdrstore::OpResult> res = f.get();
    ASSERT_TRUE(res.ok()) << "op " << i << ": " << res.status();
    EXPECT_EQ(res->synced, i == 0) << "op " << i;
  }
  EXPECT_TRUE((*stream)->Close().ok());
  stream->reset();
  buf->reset();
  client.reset();
  auto st = (*d)->Terminate(absl::Seconds(30));
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_EQ(DescribeWaitStatus(*st), "exited 0") << (*d)->Stderr();
}

// Issue 29: a file volume's file truncated behind the daemon's back killed the daemon with
// SIGBUS on the next put (the tcp link's copy into the mapping touched a page no file backs),
// taking every volume and client with it. Now the truncated volume's ops fail DATA_LOSS naming
// the file, while the daemon serves the memory volume (and other clients) on; restoring the
// file's size serves the volume again.
TEST(FileVolumeTest, ATruncatedFileFailsItsOpsAndTheDaemonServesOn) {
  auto dir = TempDir::Create("gdr-filevol-trunc");
  ASSERT_TRUE(dir.ok());
  const std::string file = (*dir)->File("fv.img");
  constexpr uint64_t kVolume = 8 * kMiB;
  auto d = DaemonProcess::Start({"--volume", absl::StrCat("fv=", kVolume, ",file=", file),
                                 "--volume", absl::StrCat("mem=", kVolume)});
  ASSERT_TRUE(d.ok()) << d.status();
  auto client = ConnectClient(**d);
  ASSERT_NE(client, nullptr);
  auto buf = client->AllocateBuffer(kMiB + 2 * kGuardBytes + 8192);
  ASSERT_TRUE(buf.ok());
  SaltMap fv_salts(kVolume), mem_salts(kVolume);
  const gdrstore::Extent tail{"fv", 6 * kMiB, kMiB};  // past where the file will end
  ASSERT_TRUE(VerifiedRead(*client, **buf, kGuardBytes, kGuardBytes, tail, 3, &fv_salts).ok());

  ASSERT_EQ(::truncate(file.c_str(), 4096), 0) << strerror(errno);
  auto failed = [&](const absl::StatusOr<gdrstore::OpResult>& r, const char* what) {
    ASSERT_FALSE(r.ok()) << what;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss) << what << ": " << r.status();
    EXPECT_TRUE(absl::StrContains(r.status().message(), file)) << what << ": " << r.status();
  };
  failed(client->Read(tail, **buf), "put past the file's new end");
  failed(client->Write(tail, **buf), "get past the file's new end");
  failed(client->Read({"fv", 0, 4096}, **buf), "put within what is left");
  // A Stream op too, and from a second client.
  auto other = ConnectClient(**d);
  ASSERT_NE(other, nullptr);
  auto other_buf = other->AllocateBuffer(kMiB);
  ASSERT_TRUE(other_buf.ok());
  auto stream = other->OpenStream();
  ASSERT_TRUE(stream.ok()) << stream.status();
  std::promise<absl::StatusOr<gdrstore::OpResult>> answer;
  (*stream)->Submit(gdrstore::OpKind::kRead, tail, **other_buf, 0,
                    [&answer](absl::StatusOr<gdrstore::OpResult> r) {
                      answer.set_value(std::move(r));
                    });
  auto f = answer.get_future();
  ASSERT_EQ(f.wait_for(std::chrono::seconds(60)), std::future_status::ready);
  failed(f.get(), "Stream put");
  EXPECT_TRUE((*stream)->Close().ok());

  // The daemon is alive and serves the other volume to both clients.
  EXPECT_TRUE((*d)->Running()) << (*d)->Stderr();
  const gdrstore::Extent m{"mem", 3 * kMiB + 5, kMiB};
  absl::Status v = VerifiedRead(*client, **buf, kGuardBytes, kGuardBytes, m, 9, &mem_salts);
  EXPECT_TRUE(v.ok()) << v;
  EXPECT_TRUE(other->Write({"mem", 0, kMiB}, **other_buf).ok());

  // Restored to its size (the bytes past the cut are gone: zeros), the volume serves again.
  ASSERT_EQ(::truncate(file.c_str(), static_cast<off_t>(kVolume)), 0) << strerror(errno);
  v = VerifiedRead(*client, **buf, kGuardBytes, kGuardBytes, tail, 4, &fv_salts);
  EXPECT_TRUE(v.ok()) << v;
  EXPECT_EQ(ReadRange(file, tail.offset, 16).size(), 16u);

  stream->reset();
  other_buf->reset();
  other.reset();
  buf->reset();
  client.reset();
  auto st = (*d)->Terminate(absl::Seconds(30));
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_EQ(DescribeWaitStatus(*st), "exited 0") << (*d)->Stderr();
}

TEST(FileVolumeTest, WrongSizeIsRefusedAndFileUntouched) {
  auto dir = TempDir::Create("gdr-filevol");
  ASSERT_TRUE(dir.ok());
  const std::string file = (*dir)->File("small.img");
  std::ofstream(file) << std::string(8192, 'x');
  auto r = RunProcess({GDR_GDRSTORED_BIN, "--listen", "127.0.0.1:0", "--volume",
                       absl::StrCat("v=1MiB,file=", file)},
                      (*dir)->path(), "wrong-size", absl::Seconds(30));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_code, 1) << r->Describe();
  EXPECT_TRUE(absl::StrContains(r->err, "refusing to resize")) << r->Describe();
  EXPECT_EQ(std::filesystem::file_size(file), 8192u);
  EXPECT_EQ(ReadRange(file, 0, 8192), std::string(8192, 'x'));

  // A relative path and a directory are refused with a reason too.
  auto rel = RunProcess({GDR_GDRSTORED_BIN, "--volume", "v=1MiB,file=rel.img"}, (*dir)->path(),
                        "relative", absl::Seconds(30));
  ASSERT_TRUE(rel.ok());
  EXPECT_EQ(rel->exit_code, 1);
  EXPECT_TRUE(absl::StrContains(rel->err, "absolute path")) << rel->Describe();
  auto isdir = RunProcess({GDR_GDRSTORED_BIN, "--listen", "127.0.0.1:0", "--volume",
                           absl::StrCat("v=1MiB,file=", (*dir)->path())},
                          (*dir)->path(), "dir", absl::Seconds(30));
  ASSERT_TRUE(isdir.ok());
  EXPECT_EQ(isdir->exit_code, 1);
  EXPECT_TRUE(absl::StrContains(isdir->err, "not a regular file")) << isdir->Describe();
}

}  // namespace
}  // namespace gdr::integ
