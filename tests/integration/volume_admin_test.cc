// Volumes made and deleted while a real gdrstored serves, through the Admin service: a made
// volume serves verified bytes at once and a deleted one is NOT_FOUND, while an op already on it
// finishes; hostile names, sizes and limits are refused naming the field; a --volume-dir serves
// its files by relative path, read-only unless writable, and a writable one takes new files.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <random>

#include "absl/strings/str_cat.h"
#include "common/base/pattern.h"
#include "gdrstore/client.h"
#include "tests/integration/admin_rpc.h"
#include "tests/integration/daemon_process.h"
#include "tests/integration/stats_rpc.h"

namespace gdr::integ {
namespace {

namespace v1 = gdrstore::v1;
namespace fs = std::filesystem;
using ::testing::HasSubstr;

constexpr uint64_t kMiB = 1 << 20;
constexpr char kAdminToken[] = "volume-test-admin-token-0123456789";
constexpr char kUserToken[] = "volume-test-user-token-0123456789ab";

v1::CreateVolumeRequest Request(const std::string& name, uint64_t size, bool file = false,
                                const std::string& media = "") {
  v1::CreateVolumeRequest r;
  r.set_name(name);
  r.set_size(size);
  r.set_file(file);
  r.set_media(media);
  return r;
}

// The first `length` bytes of `b` (all of it when 0) hold `volume`'s pattern from `offset`.
bool HoldsPattern(const gdrstore::Buffer& b, const std::string& volume, uint64_t offset,
                  uint64_t salt = 0, uint64_t length = 0) {
  return !PatternMismatch(PatternSeed(volume, salt), offset,
                          std::span<const std::byte>(b.data(), length ? length : b.size()))
              .has_value();
}

std::vector<std::string> VolumeNames(gdrstore::Client& c) {
  std::vector<std::string> names;
  auto info = c.GetInfo();
  if (info.ok()) {
    for (const auto& v : info->volumes()) names.push_back(v.name());
  }
  return names;
}

TEST(VolumeAdminTest, AMadeVolumeServesVerifiedBytesAndADeletedOneIsNotFound) {
  auto d = DaemonProcess::Start({"--volume", "vol0=4MiB"});
  ASSERT_TRUE(d.ok()) << d.status();
  auto made = CreateVolume((*d)->address(), Request("made/at-run-time", 8 * kMiB));
  ASSERT_TRUE(made.ok()) << made.status();
  EXPECT_EQ(made->volume().size(), 8 * kMiB);
  EXPECT_EQ(made->volume().backing(), "memory");
  auto c = ConnectClient(**d);
  ASSERT_NE(c, nullptr);
  EXPECT_THAT(VolumeNames(*c), ::testing::Contains("made/at-run-time"));
  auto buf = c->AllocateBuffer(2 * kMiB);
  ASSERT_TRUE(buf.ok());
  ASSERT_TRUE(c->Write({"made/at-run-time", 3 * kMiB, 2 * kMiB}, **buf).ok());
  EXPECT_TRUE(HoldsPattern(**buf, "made/at-run-time", 3 * kMiB));
  // A put lands and comes back.
  PatternFill(PatternSeed("made/at-run-time", 9), 0, std::span((*buf)->data(), 2 * kMiB));
  ASSERT_TRUE(c->Read({"made/at-run-time", 0, 2 * kMiB}, **buf).ok());
  std::memset((*buf)->data(), 0, 2 * kMiB);
  ASSERT_TRUE(c->Write({"made/at-run-time", 0, 2 * kMiB}, **buf).ok());
  EXPECT_TRUE(HoldsPattern(**buf, "made/at-run-time", 0, 9));

  ASSERT_TRUE(DeleteVolume((*d)->address(), "made/at-run-time").ok());
  auto gone = c->Write({"made/at-run-time", 0, 4096}, **buf);
  EXPECT_EQ(gone.status().code(), absl::StatusCode::kNotFound) << gone.status();
  EXPECT_THAT(VolumeNames(*c), ::testing::Not(::testing::Contains("made/at-run-time")));
  // Made again under the name: a new volume, its pattern again.
  ASSERT_TRUE(CreateVolume((*d)->address(), Request("made/at-run-time", kMiB)).ok());
  ASSERT_TRUE(c->Write({"made/at-run-time", 0, kMiB}, **buf).ok());
  EXPECT_TRUE(HoldsPattern(**buf, "made/at-run-time", 0, 0, kMiB));
}

TEST(VolumeAdminTest, AnOpInFlightOnADeletedVolumeFinishesWithItsBytes) {
  auto d = DaemonProcess::Start({"--volume", "vol0=4MiB"});
  ASSERT_TRUE(d.ok()) << d.status();
  // 4 MiB/s: a 4 MiB get is on the simulated device for about a second, time enough to see it
  // there on a loaded host.
  ASSERT_TRUE(
      CreateVolume((*d)->address(), Request("slow", 8 * kMiB, false, "bandwidth=4MiB/s")).ok());
  auto c = ConnectClient(**d);
  ASSERT_NE(c, nullptr);
  auto buf = c->AllocateBuffer(4 * kMiB);
  ASSERT_TRUE(buf.ok());
  std::future<absl::StatusOr<gdrstore::OpResult>> op =
      c->SubmitAsync(gdrstore::OpKind::kWrite, {"slow", kMiB, 4 * kMiB}, **buf, 0);
  // The delete must come while the op is in the daemon, not before it arrives: wait until the
  // volume counts it in flight (a fixed 50 ms was too short under load).
  ASSERT_TRUE(PollUntil(
      [&] {
        auto s = GetStats(*c);
        if (!s.ok()) return false;
        for (const v1::VolumeStats& v : s->volumes()) {
          if (v.name() == "slow") return v.ops().inflight_ops() == 1;
        }
        return false;
      },
      absl::Seconds(30)))
      << "the op never showed in flight";
  ASSERT_TRUE(DeleteVolume((*d)->address(), "slow").ok());
  auto answered = op.get();
  ASSERT_TRUE(answered.ok()) << answered.status();
  EXPECT_TRUE(HoldsPattern(**buf, "slow", kMiB));
  EXPECT_GE(answered->service_ns, 150'000'000u) << "the delete did not wait behind the op";
  EXPECT_EQ(c->Write({"slow", 0, 4096}, **buf).status().code(), absl::StatusCode::kNotFound);
}

TEST(VolumeAdminTest, HostileRequestsAreRefusedNamingTheField) {
  auto d = DaemonProcess::Start({"--volume", "vol0=4MiB", "--max-volumes", "3"});
  ASSERT_TRUE(d.ok()) << d.status();
  const std::string at = (*d)->address();
  const struct {
    v1::CreateVolumeRequest request;
    absl::StatusCode code;
    const char* says;
  } bad[] = {
      {Request("../escape", 4096), absl::StatusCode::kInvalidArgument, "name"},
      {Request("", 4096), absl::StatusCode::kInvalidArgument, "name"},
      {Request("a//b", 4096), absl::StatusCode::kInvalidArgument, "name"},
      {Request(std::string(300, 'n'), 4096), absl::StatusCode::kInvalidArgument, "name"},
      {Request(std::string("nul\0byte", 8), 4096), absl::StatusCode::kInvalidArgument, "name"},
      {Request("/abs", 4096), absl::StatusCode::kInvalidArgument, "name"},
      {Request("zero", 0), absl::StatusCode::kInvalidArgument, "size"},
      {Request("huge", uint64_t{1} << 60), absl::StatusCode::kInvalidArgument, "size"},
      {Request("big", uint64_t{1} << 46), absl::StatusCode::kResourceExhausted,
       "memory available"},
      {Request("m", 4096, false, "media=bogus"), absl::StatusCode::kInvalidArgument, "media"},
      {Request("m", 4096, false, "file=/etc/passwd"), absl::StatusCode::kInvalidArgument,
       "media"},
      {Request("f", 4096, true), absl::StatusCode::kFailedPrecondition, "writable --volume-dir"},
      {Request("vol0", 4096), absl::StatusCode::kAlreadyExists, "vol0"},
  };
  for (const auto& b : bad) {
    auto r = CreateVolume(at, b.request);
    EXPECT_EQ(r.status().code(), b.code) << b.request.ShortDebugString() << ": " << r.status();
    EXPECT_THAT(std::string(r.status().message()), HasSubstr(b.says)) << r.status();
  }
  ASSERT_TRUE(CreateVolume(at, Request("two", 4096)).ok());
  ASSERT_TRUE(CreateVolume(at, Request("three", 4096)).ok());
  auto past = CreateVolume(at, Request("four", 4096));
  EXPECT_EQ(past.status().code(), absl::StatusCode::kResourceExhausted) << past.status();
  EXPECT_THAT(std::string(past.status().message()), HasSubstr("--max-volumes 3"));
  EXPECT_EQ(DeleteVolume(at, "nobody").code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(DeleteVolume(at, "two", /*delete_file=*/true).code(),
            absl::StatusCode::kFailedPrecondition);
  // The daemon serves on.
  auto c = ConnectClient(**d);
  ASSERT_NE(c, nullptr);
  auto buf = c->AllocateBuffer(4096);
  ASSERT_TRUE(buf.ok());
  EXPECT_TRUE(c->Write({"three", 0, 4096}, **buf).ok());
}

TEST(VolumeAdminTest, OnlyAnAdminTokenMakesOrDeletesVolumes) {
  auto dir = TempDir::Create("gdr-volume-admin");
  ASSERT_TRUE(dir.ok());
  const std::string tokens = (*dir)->File("tokens");
  std::ofstream(tokens) << kAdminToken << " name=ops admin=yes\n"
                        << kUserToken << " name=trainer get=* put=*\n";
  ::chmod(tokens.c_str(), 0600);
  auto d = DaemonProcess::Start({"--volume", "vol0=4MiB", "--token-file", tokens});
  ASSERT_TRUE(d.ok()) << d.status();
  const std::string at = (*d)->address();
  EXPECT_EQ(CreateVolume(at, Request("x", 4096)).status().code(),
            absl::StatusCode::kUnauthenticated);
  auto user = CreateVolume(at, Request("x", 4096), kUserToken);
  EXPECT_EQ(user.status().code(), absl::StatusCode::kPermissionDenied) << user.status();
  EXPECT_EQ(DeleteVolume(at, "vol0", false, kUserToken).code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(CreateVolume(at, Request("x", 4096), kAdminToken).ok());
  EXPECT_TRUE(DeleteVolume(at, "x", false, kAdminToken).ok());
}

TEST(VolumeAdminTest, AVolumeDirServesItsFilesReadOnlyAndAWritableOneTakesNewFiles) {
  auto scratch = TempDir::Create("gdr-volume-dir");
  ASSERT_TRUE(scratch.ok());
  const std::string ro = (*scratch)->File("models"), rw = (*scratch)->File("ckpt");
  fs::create_directories(ro + "/llama");
  fs::create_directories(rw);
  std::string shard(3 * kMiB + 17, '\0');
  std::mt19937_64 rng(7);
  for (char& ch : shard) ch = static_cast<char>(rng());
  std::ofstream(ro + "/llama/model-00001-of-00002.safetensors", std::ios::binary) << shard;
  auto d = DaemonProcess::Start({"--volume-dir", ro, "--volume-dir", rw + ",writable"});
  ASSERT_TRUE(d.ok()) << d.status();
  const std::string at = (*d)->address();
  auto c = ConnectClient(**d);
  ASSERT_NE(c, nullptr);
  auto info = c->GetInfo();
  ASSERT_TRUE(info.ok());
  ASSERT_EQ(info->volumes_size(), 1) << info->ShortDebugString();
  EXPECT_EQ(info->volumes(0).name(), "llama/model-00001-of-00002.safetensors");
  EXPECT_TRUE(info->volumes(0).read_only());
  EXPECT_EQ(info->volumes(0).size(), shard.size());

  // The file's own bytes, unaligned at the end.
  auto buf = c->AllocateBuffer(shard.size());
  ASSERT_TRUE(buf.ok());
  ASSERT_TRUE(c->Write({"llama/model-00001-of-00002.safetensors", 0, shard.size()}, **buf).ok());
  EXPECT_EQ(std::memcmp((*buf)->data(), shard.data(), shard.size()), 0);
  auto put = c->Read({"llama/model-00001-of-00002.safetensors", 0, 4096}, **buf);
  EXPECT_EQ(put.status().code(), absl::StatusCode::kFailedPrecondition) << put.status();
  EXPECT_THAT(std::string(put.status().message()), HasSubstr("read-only"));
  EXPECT_EQ(DeleteVolume(at, "llama/model-00001-of-00002.safetensors", true).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(fs::exists(ro + "/llama/model-00001-of-00002.safetensors"));

  // A save: a file volume made in the writable directory, its bytes in the file as answered.
  auto made = CreateVolume(at, Request("step-100/rank0.bin", 2 * kMiB, /*file=*/true));
  ASSERT_TRUE(made.ok()) << made.status();
  EXPECT_TRUE(made->created());
  const std::string file = rw + "/step-100/rank0.bin";
  EXPECT_EQ(made->volume().backing(), "file:" + file);
  ASSERT_EQ(fs::file_size(file), 2 * kMiB);
  std::memcpy((*buf)->data(), shard.data(), 2 * kMiB);
  ASSERT_TRUE(c->Read({"step-100/rank0.bin", 0, 2 * kMiB}, **buf, 0, {.sync = true}).ok());
  std::string back(2 * kMiB, '\0');
  std::ifstream(file, std::ios::binary).read(back.data(), static_cast<std::streamsize>(back.size()));
  EXPECT_EQ(back, shard.substr(0, 2 * kMiB));
  // An existing file of the size is served as it is; of another size, refused.
  ASSERT_TRUE(DeleteVolume(at, "step-100/rank0.bin").ok());
  EXPECT_TRUE(fs::exists(file));
  auto again = CreateVolume(at, Request("step-100/rank0.bin", 2 * kMiB, true));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_FALSE(again->created());
  std::memset((*buf)->data(), 0, 2 * kMiB);
  ASSERT_TRUE(c->Write({"step-100/rank0.bin", 0, 2 * kMiB}, **buf).ok());
  EXPECT_EQ(std::memcmp((*buf)->data(), shard.data(), 2 * kMiB), 0);
  ASSERT_TRUE(DeleteVolume(at, "step-100/rank0.bin", /*delete_file=*/true).ok());
  EXPECT_FALSE(fs::exists(file));
  std::ofstream(rw + "/odd.bin") << "abc";
  auto odd = CreateVolume(at, Request("odd.bin", 4096, true));
  EXPECT_EQ(odd.status().code(), absl::StatusCode::kFailedPrecondition) << odd.status();
  // A link planted in the directory is not followed.
  fs::create_directory_symlink("/tmp", rw + "/out");
  auto link = CreateVolume(at, Request("out/x.bin", 4096, true));
  EXPECT_EQ(link.status().code(), absl::StatusCode::kFailedPrecondition) << link.status();
}

// Hostile use of the writable directory, through a real daemon: a subdirectory swapped for a
// link to elsewhere is never deleted through (the file outside stays, the answer says why), a
// name the rule allows is made however long its last part.
TEST(VolumeAdminTest, AWritableDirectoryIsNeverLeftThroughALinkAndTakesEveryValidName) {
  auto scratch = TempDir::Create("gdr-volume-dir-hostile");
  ASSERT_TRUE(scratch.ok());
  const std::string rw = (*scratch)->File("rw"), outside = (*scratch)->File("outside");
  fs::create_directories(rw);
  fs::create_directories(outside);
  auto d = DaemonProcess::Start({"--volume-dir", rw + ",writable"});
  ASSERT_TRUE(d.ok()) << d.status();
  const std::string at = (*d)->address();
  ASSERT_TRUE(CreateVolume(at, Request("dl/a.bin", 4096, true)).ok());
  std::ofstream(outside + "/a.bin") << "keep me";
  fs::rename(rw + "/dl", rw + "/dl.moved");
  fs::create_directory_symlink(outside, rw + "/dl");
  absl::Status del = DeleteVolume(at, "dl/a.bin", /*delete_file=*/true);
  EXPECT_EQ(del.code(), absl::StatusCode::kFailedPrecondition) << del;
  EXPECT_THAT(std::string(del.message()), HasSubstr("symbolic link"));
  EXPECT_TRUE(fs::exists(outside + "/a.bin"));
  EXPECT_TRUE(fs::exists(rw + "/dl.moved/a.bin"));
  // Refused, so still served; with the directory back, deleted with its file.
  fs::remove(rw + "/dl");
  fs::rename(rw + "/dl.moved", rw + "/dl");
  ASSERT_TRUE(DeleteVolume(at, "dl/a.bin", /*delete_file=*/true).ok());
  EXPECT_FALSE(fs::exists(rw + "/dl/a.bin"));

  const std::string long_name = "ck/" + std::string(252, 'L');
  auto made = CreateVolume(at, Request(long_name, 8192, true));
  ASSERT_TRUE(made.ok()) << made.status();
  EXPECT_EQ(fs::file_size(rw + "/" + long_name), 8192u);
}

}  // namespace
}  // namespace gdr::integ
