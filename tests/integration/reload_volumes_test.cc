// SIGHUP applies the configuration's volumes live (docs/operations.md "Reloading"): a real
// gdrstored started from a config file; the file loses one volume and gains a memory and a file
// volume; after the reload GetInfo lists the new set, both new volumes hold what is written to
// them, and the dropped one answers NOT_FOUND. A reload with a bad volume line changes nothing
// and names the line; the daemon goes on serving.
#include <gtest/gtest.h>
#include <signal.h>

#include <cstring>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gdrstore/client.h"
#include "tests/integration/child_process.h"
#include "tests/integration/daemon_process.h"

namespace gdr::integ {
namespace {

constexpr size_t kBytes = 64 * 1024;

std::set<std::string> VolumeNames(gdrstore::Client& client) {
  auto info = client.GetInfo();
  EXPECT_TRUE(info.ok()) << info.status();
  std::set<std::string> names;
  if (!info.ok()) return names;
  for (const auto& v : info->volumes()) names.insert(v.name());
  return names;
}

void WriteConfig(const std::string& path, const std::vector<std::string>& volumes) {
  std::ofstream out(path, std::ios::trunc);
  out << "volume = [";
  for (size_t i = 0; i < volumes.size(); ++i) out << (i ? ", " : "") << '"' << volumes[i] << '"';
  out << "]\n";
}

// A put of a pattern particular to `volume`, then a get into a cleared buffer (named from the
// daemon's side: Read puts the buffer into the store, Write gets the store into the buffer).
void PutGet(gdrstore::Client& client, const std::string& volume) {
  auto buf = client.AllocateBuffer(kBytes);
  ASSERT_TRUE(buf.ok()) << buf.status();
  std::vector<unsigned char> want(kBytes);
  for (size_t i = 0; i < kBytes; ++i) want[i] = static_cast<unsigned char>(i * 7 + volume[0]);
  std::memcpy((*buf)->data(), want.data(), kBytes);
  auto put = client.Read({volume, 4096, kBytes}, **buf);
  ASSERT_TRUE(put.ok()) << volume << ": " << put.status();
  std::memset((*buf)->data(), 0, kBytes);
  auto get = client.Write({volume, 4096, kBytes}, **buf);
  ASSERT_TRUE(get.ok()) << volume << ": " << get.status();
  EXPECT_EQ(std::memcmp((*buf)->data(), want.data(), kBytes), 0) << volume;
}

TEST(ReloadVolumesTest, SighupAddsAndRemovesConfiguredVolumes) {
  auto dir = TempDir::Create("gdr-reload-volumes");
  ASSERT_TRUE(dir.ok()) << dir.status();
  const std::string config = (*dir)->File("gdrstored.conf");
  const std::string d_file = (*dir)->File("d.vol");
  WriteConfig(config, {"a=4MiB", "b=4MiB"});
  auto d = DaemonProcess::Start({"--config", config});
  ASSERT_TRUE(d.ok()) << d.status();
  auto client = ConnectClient(**d);
  ASSERT_NE(client, nullptr);
  EXPECT_EQ(VolumeNames(*client), (std::set<std::string>{"a", "b"}));

  WriteConfig(config, {"a=4MiB", "c=4MiB", absl::StrCat("d=4MiB,file=", d_file)});
  ASSERT_TRUE((*d)->Signal(SIGHUP).ok());
  const std::set<std::string> after = {"a", "c", "d"};
  ASSERT_TRUE(PollUntil([&] { return VolumeNames(*client) == after; }, absl::Seconds(30)))
      << (*d)->Stderr();
  ASSERT_TRUE(PollUntil(
      [&] { return absl::StrContains((*d)->Stderr(), "SIGHUP: applied"); }, absl::Seconds(30)));
  const std::string log = (*d)->Stderr();
  EXPECT_TRUE(absl::StrContains(log, "volume c: added")) << log;
  EXPECT_TRUE(absl::StrContains(log, "volume d: added")) << log;
  EXPECT_TRUE(absl::StrContains(log, "volume b: removed")) << log;
  PutGet(*client, "c");
  PutGet(*client, "d");
  std::ifstream made(d_file, std::ios::binary | std::ios::ate);
  EXPECT_EQ(static_cast<uint64_t>(made.tellg()), 4u << 20) << "d's file";
  auto buf = client->AllocateBuffer(4096);
  ASSERT_TRUE(buf.ok());
  auto gone = client->Write({"b", 0, 4096}, **buf);
  ASSERT_FALSE(gone.ok());
  EXPECT_EQ(gone.status().code(), absl::StatusCode::kNotFound) << gone.status();

  // A bad line: nothing changes, the refusal names it, the daemon serves on.
  WriteConfig(config, {"a=4MiB", "c=4MiB", absl::StrCat("d=4MiB,file=", d_file), "e=lots"});
  ASSERT_TRUE((*d)->Signal(SIGHUP).ok());
  ASSERT_TRUE(PollUntil(
      [&] { return absl::StrContains((*d)->Stderr(), "configuration not reloaded"); },
      absl::Seconds(30)))
      << (*d)->Stderr();
  EXPECT_TRUE(absl::StrContains((*d)->Stderr(), "--volume 'e=lots': size 'lots'"))
      << (*d)->Stderr();
  EXPECT_EQ(VolumeNames(*client), after);
  PutGet(*client, "d");

  // Dropping the file volume keeps its file.
  WriteConfig(config, {"a=4MiB", "c=4MiB"});
  ASSERT_TRUE((*d)->Signal(SIGHUP).ok());
  const std::set<std::string> last = {"a", "c"};
  ASSERT_TRUE(PollUntil([&] { return VolumeNames(*client) == last; }, absl::Seconds(30)))
      << (*d)->Stderr();
  std::ifstream kept(d_file, std::ios::binary | std::ios::ate);
  EXPECT_EQ(static_cast<uint64_t>(kept.tellg()), 4u << 20) << "d's file is kept";

  auto st = (*d)->Terminate(absl::Seconds(30));
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_EQ(DescribeWaitStatus(*st), "exited 0");
}

}  // namespace
}  // namespace gdr::integ
