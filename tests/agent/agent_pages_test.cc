// GetInfo and GetStats through gdragent when the daemons' volume lists are past gRPC's 4 MiB
// message limit, or span several pages: the agent answers a page at a time as a daemon does,
// joined from its daemons' pages (names of two daemons interleaved, pages of any size), and
// reads every page of each daemon to route ops to volumes past the first page. The library
// client, gdrctl and a raw caller that predates paging all get their answers. Real daemons and
// agent processes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <functional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/src/daemon_rpc.h"
#include "gdrstore/client.h"
#include "tests/agent/agent_harness.h"
#include "tests/integration/daemon_process.h"

namespace gdr::agent::test {
namespace {

namespace v1 = gdrstore::v1;

constexpr size_t kGrpcDefaultMaxMessage = 4 << 20;

// tmpfs where the host has one: 10,000 files are made there in well under a second, and take
// seconds on a busy disk.
std::string FastScratch() {
  struct stat st;
  return ::stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) ? "/dev/shm" : "";
}

// `count` files of one byte, named by `name`, in `dir`.
void MakeFiles(const integ::TempDir& dir, int count, const std::function<std::string(int)>& name) {
  for (int i = 0; i < count; ++i) {
    std::FILE* f = std::fopen(dir.File(name(i)).c_str(), "wb");
    ASSERT_NE(f, nullptr) << name(i);
    ASSERT_EQ(std::fputc('x', f), 'x');
    ASSERT_EQ(std::fclose(f), 0);
  }
}

std::unique_ptr<gdrstore::Client> ThroughAgent(const AgentProcess& agent) {
  gdrstore::ClientOptions o;
  o.agent = agent.socket_path();
  auto c = gdrstore::Client::Connect(o);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *std::move(c) : nullptr;
}

std::vector<std::string> Names(const v1::GetInfoResponse& info) {
  std::vector<std::string> names;
  for (const v1::VolumeInfo& v : info.volumes()) names.push_back(v.name());
  return names;
}

TEST(AgentPagesTest, AVolumeListPastFourMebibytesComesThroughTheAgent) {
  constexpr int kVolumes = 10000;
  auto long_name = [](int i) { return absl::StrFormat("%05d-%s", i, std::string(234, 'n')); };
  auto files = integ::TempDir::Create("agent-pages", FastScratch());
  ASSERT_TRUE(files.ok()) << files.status();
  MakeFiles(**files, kVolumes, long_name);
  auto d = integ::DaemonProcess::Start({"--volume-dir", (*files)->path(), "--max-volumes",
                                        "20000"});
  ASSERT_TRUE(d.ok()) << d.status();
  auto agent = AgentProcess::Start((*d)->address(), {});
  ASSERT_TRUE(agent.ok()) << agent.status();

  // A caller that asks for nothing in particular (as one that predates paging) gets a page.
  auto raw = AgentClient::Connect((*agent)->socket_path(), "raw");
  ASSERT_TRUE(raw.ok()) << raw.status();
  auto page = raw->Info();
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_LT(page->ByteSizeLong(), kGrpcDefaultMaxMessage / 2);
  ASSERT_GT(page->volumes_size(), 0);
  EXPECT_LT(page->volumes_size(), kVolumes);
  EXPECT_EQ(page->next_volumes_after(), page->volumes(page->volumes_size() - 1).name());
  EXPECT_THAT(page->transports(0).detail(), ::testing::HasSubstr(" more"));

  auto c = ThroughAgent(**agent);
  ASSERT_NE(c, nullptr);
  auto info = c->GetInfo(std::chrono::seconds(60));
  ASSERT_TRUE(info.ok()) << info.status();
  std::vector<std::string> expected;
  for (int i = 0; i < kVolumes; ++i) expected.push_back(long_name(i));
  EXPECT_EQ(Names(*info), expected);
  // All of it in one message would not have passed gRPC's default limit.
  EXPECT_GT(info->ByteSizeLong(), kGrpcDefaultMaxMessage);

  auto one = c->GetVolumeInfo(long_name(6543));
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(Names(*one), std::vector<std::string>{long_name(6543)});

  // An op on a volume far past the first page.
  auto buf = c->AllocateBuffer(1);
  ASSERT_TRUE(buf.ok()) << buf.status();
  auto got = c->Write({long_name(kVolumes - 1), 0, 1}, **buf);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(static_cast<char>((*buf)->data()[0]), 'x');

  // gdrctl through the agent.
  auto scratch = integ::TempDir::Create("agent-pages-gdrctl");
  ASSERT_TRUE(scratch.ok()) << scratch.status();
  auto r = integ::RunProcess({GDR_GDRCTL_BIN, "--agent", (*agent)->socket_path(), "--json",
                              "info"},
                             (*scratch)->path(), "gdrctl", absl::Seconds(60));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->exit_code, 0) << r->Describe();
  EXPECT_TRUE(absl::StrContains(r->out, long_name(kVolumes - 1)));
}

TEST(AgentPagesTest, PagesOfTwoDaemonsJoinInNameOrderAndEveryVolumeRoutes) {
  constexpr int kEach = 1500;  // past one page of either daemon
  auto name = [](int i) { return absl::StrFormat("v%05d", i); };
  auto even = integ::TempDir::Create("agent-pages-even", FastScratch());
  auto odd = integ::TempDir::Create("agent-pages-odd", FastScratch());
  ASSERT_TRUE(even.ok() && odd.ok());
  MakeFiles(**even, kEach, [&](int i) { return name(2 * i); });
  MakeFiles(**odd, kEach, [&](int i) { return name(2 * i + 1); });
  auto a = integ::DaemonProcess::Start({"--volume-dir", (*even)->path()});
  auto b = integ::DaemonProcess::Start({"--volume-dir", (*odd)->path()});
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  auto agent = AgentProcess::Start((*a)->address(), {"--daemon", (*b)->address()});
  ASSERT_TRUE(agent.ok()) << agent.status();
  auto c = ThroughAgent(**agent);
  ASSERT_NE(c, nullptr);

  std::vector<std::string> expected;
  for (int i = 0; i < 2 * kEach; ++i) expected.push_back(name(i));
  auto info = c->GetInfo(std::chrono::seconds(60));
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(Names(*info), expected);

  // Small pages, from a cursor that is no volume's name, join to the same tail.
  auto raw = AgentClient::Connect((*agent)->socket_path(), "raw");
  ASSERT_TRUE(raw.ok()) << raw.status();
  v1::GetInfoRequest request;
  request.set_volumes_after("v02990-");
  request.set_max_volumes(3);
  auto tail = gdrstore::GetInfoPages(*raw->stub, request,
                                     std::chrono::system_clock::now() + std::chrono::seconds(30));
  ASSERT_TRUE(tail.ok()) << tail.status();
  EXPECT_EQ(Names(*tail), std::vector<std::string>(expected.end() - 9, expected.end()));

  // Each daemon's volumes past its first page route to it.
  auto buf = c->AllocateBuffer(1);
  ASSERT_TRUE(buf.ok()) << buf.status();
  for (int i : {2 * kEach - 2, 2 * kEach - 1}) {
    auto got = c->Write({name(i), 0, 1}, **buf);
    EXPECT_TRUE(got.ok()) << name(i) << ": " << got.status();
  }

  // Refused naming the field, as a daemon refuses it.
  v1::GetInfoRequest bad;
  bad.set_volume("a/../b");
  grpc::ClientContext ctx;
  v1::GetInfoResponse out;
  grpc::Status s = raw->stub->GetInfo(&ctx, bad, &out);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(absl::StrContains(s.error_message(), "volume")) << s.error_message();
}

TEST(AgentPagesTest, SessionsComeAPageAtATime) {
  auto d = integ::DaemonProcess::Start({"--volume", "vol0=1MiB"});
  ASSERT_TRUE(d.ok()) << d.status();
  auto agent = AgentProcess::Start((*d)->address(), {});
  ASSERT_TRUE(agent.ok()) << agent.status();
  // A session is in the table once it has handed memory over.
  std::vector<AgentClient> clients;
  std::vector<std::unique_ptr<SharedMemory>> memory;
  for (int i = 0; i < 5; ++i) {
    auto c = AgentClient::Connect((*agent)->socket_path(), absl::StrCat("s", i));
    ASSERT_TRUE(c.ok()) << c.status();
    auto m = SharedMemory::Create(4096);
    ASSERT_TRUE(m.ok()) << m.status();
    ASSERT_TRUE(c->Register(**m).ok());
    clients.push_back(*std::move(c));
    memory.push_back(*std::move(m));
  }
  // Two to a page: every session once, in session order.
  v1::GetStatsRequest request;
  request.set_max_entries(2);
  std::vector<uint64_t> seen;
  for (int pages = 0;; ++pages) {
    ASSERT_LT(pages, 10);
    grpc::ClientContext ctx;
    v1::GetStatsResponse page;
    grpc::Status s = clients[0].stub->GetStats(&ctx, request, &page);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_LE(page.agent().clients_size(), 2);
    for (const v1::AgentSession& a : page.agent().clients()) seen.push_back(a.session());
    if (page.next_page_after().empty()) break;
    request.set_page_after(page.next_page_after());
  }
  EXPECT_EQ(seen.size(), 5u);
  EXPECT_TRUE(std::is_sorted(seen.begin(), seen.end()));
  EXPECT_EQ(std::adjacent_find(seen.begin(), seen.end()), seen.end());
  // Every page joined by the library.
  auto all = gdrstore::GetStatsPages(*clients[0].stub,
                                     std::chrono::system_clock::now() + std::chrono::seconds(30));
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->agent().clients_size(), 5);

  grpc::ClientContext ctx;
  v1::GetStatsRequest bad;
  bad.set_page_after("12x");
  v1::GetStatsResponse out;
  grpc::Status s = clients[0].stub->GetStats(&ctx, bad, &out);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(absl::StrContains(s.error_message(), "page_after")) << s.error_message();
}

}  // namespace
}  // namespace gdr::agent::test
