// File-backed volumes on a real gdrstored: the file is created and pattern-filled when missing,
// bytes a Read stores survive SIGKILL and a restart (they are in the file's pages when the Read
// is answered), Read{sync=true} works, and an existing file of the wrong size is refused, not
// resized.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/pattern.h"
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

std::unique_ptr<gdrstore::Client> Connect(const DaemonProcess& d) {
  gdrstore::ClientOptions o;
  o.daemon_address = d.address();
  auto c = gdrstore::Client::Connect(o);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? std::move(*c) : nullptr;
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

  auto client = Connect(**d1);
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
  grpc::Status s = client->stub()->Read(&ctx, req, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(resp.bytes(), synced.length);
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
  client = Connect(**d2);
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
