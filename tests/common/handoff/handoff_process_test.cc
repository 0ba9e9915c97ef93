// HandoffServer with real client processes (tests/common/handoff/handoff_peer.cc): one running
// as another uid (setpriv), refused by admit() with the uid named, or admitted and its memory
// read here; one SIGKILLed while holding regions, whose session ends at once while a reference
// held here still reads its memory and other sessions go on.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "common/handoff/handoff_client.h"
#include "common/handoff/handoff_server.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/handoff/handoff_test_util.h"

namespace gdr::handoff {
namespace {

using ::testing::HasSubstr;

constexpr uid_t kNobody = 65534;
constexpr char kSetpriv[] = "/usr/bin/setpriv";

// What handoff_peer printed.
struct PeerOutput {
  uint64_t session = 0;
  std::string key;
  struct Region {
    uint32_t rkey = 0;
    uint64_t address = 0, size = 0;
  };
  std::vector<Region> regions;
  bool ready = false;
  std::string error;  // the "error ..." line
};

PeerOutput Parse(const std::string& text) {
  PeerOutput out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string word, a, b, c, d;
    words >> word;
    if (word == "session" && (words >> a >> b >> c) && b == "key" &&
        absl::SimpleHexAtoi(a, &out.session)) {
      out.key = absl::HexStringToBytes(c);
    } else if (word == "region" && (words >> a >> b >> c >> d)) {
      PeerOutput::Region r;
      if (absl::SimpleHexAtoi(b, &r.rkey) && absl::SimpleHexAtoi(c, &r.address) &&
          absl::SimpleAtoi(d, &r.size)) {
        out.regions.push_back(r);
      }
    } else if (word == "ready") {
      out.ready = true;
    } else if (word == "error") {
      out.error = line;
    }
  }
  return out;
}

class HandoffProcessTest : public ::testing::Test {
 protected:
  // Starts handoff_peer (as `uid` through setpriv when nonzero) and waits until it is ready,
  // has failed, or has exited.
  PeerOutput RunPeer(const std::string& path, uid_t uid, int regions, uint64_t size) {
    std::vector<std::string> argv;
    if (uid != 0) {
      argv = {kSetpriv, "--reuid=" + std::to_string(uid), "--regid=" + std::to_string(uid),
              "--clear-groups"};
    }
    for (std::string a : {std::string(GDR_HANDOFF_PEER_BIN), path, std::string("peer"),
                          std::to_string(regions), std::to_string(size)}) {
      argv.push_back(a);
    }
    const std::string tag = "peer" + std::to_string(peers_.size());
    auto child = integ::ChildProcess::Spawn(argv, dir_->File(tag + ".out"),
                                            dir_->File(tag + ".err"));
    EXPECT_TRUE(child.ok()) << child.status();
    if (!child.ok()) return {};
    integ::ChildProcess* c = child->get();
    peers_.push_back(*std::move(child));
    PeerOutput out;
    integ::PollUntil(
        [&] {
          const bool running = c->Running();
          out = Parse(integ::ReadFileOrEmpty(c->stdout_path()));
          return out.ready || !out.error.empty() || !running;
        },
        absl::Seconds(60));
    if (!out.ready && out.error.empty()) {
      ADD_FAILURE() << "handoff_peer neither ready nor failed: "
                    << integ::ReadFileOrEmpty(c->stderr_path());
    }
    return out;
  }

  void SetUp() override {
    auto dir = integ::TempDir::Create("handoff_proc");
    ASSERT_TRUE(dir.ok()) << dir.status();
    dir_ = *std::move(dir);
  }

  static bool CanSwitchUid(std::string* why) {
    if (::getuid() != 0) {
      *why = "switching to uid 65534 needs root (the CI runs this suite as root)";
      return false;
    }
    if (::access(kSetpriv, X_OK) != 0) {
      *why = "no /usr/bin/setpriv (util-linux) to run a client as another uid";
      return false;
    }
    return true;
  }

  std::unique_ptr<integ::TempDir> dir_;
  std::vector<std::unique_ptr<integ::ChildProcess>> peers_;  // SIGKILLed on destruction
};

TEST_F(HandoffProcessTest, UidThatAdmitRefusesIsNamedInTheError) {
  std::string why;
  if (!CanSwitchUid(&why)) GTEST_SKIP() << why;
  HandoffServerOptions o;
  o.socket_mode = 0666;
  o.admit = [](const PeerCredentials& p) {
    if (p.uid == kNobody) return absl::PermissionDeniedError("not on this server's allowlist");
    return absl::OkStatus();
  };
  auto t = test::StartTestServer(std::move(o));
  ASSERT_TRUE(t.ok()) << t.status();
  PeerOutput out = RunPeer(t->path(), kNobody, 1, 4096);
  EXPECT_THAT(out.error, HasSubstr("PERMISSION_DENIED"));
  EXPECT_THAT(out.error, HasSubstr("allowlist"));
  EXPECT_THAT(out.error, HasSubstr("uid 65534"));
  ASSERT_TRUE(peers_.back()->Wait(absl::Seconds(30)).ok());
  EXPECT_EQ(WEXITSTATUS(peers_.back()->wait_status()), 3);
  EXPECT_EQ(t->server->stats().sessions_total, 0u);
  EXPECT_GE(t->server->stats().refused, 1u);
}

TEST_F(HandoffProcessTest, AdmittedOtherUidHandsItsMemoryOver) {
  std::string why;
  if (!CanSwitchUid(&why)) GTEST_SKIP() << why;
  std::atomic<uid_t> seen{0};
  HandoffServerOptions o;
  o.socket_mode = 0666;
  o.admit = [&](const PeerCredentials& p) {
    seen = p.uid;
    return absl::OkStatus();
  };
  auto t = test::StartTestServer(std::move(o));
  ASSERT_TRUE(t.ok()) << t.status();
  constexpr uint64_t kSize = 64 << 10;
  PeerOutput out = RunPeer(t->path(), kNobody, 2, kSize);
  ASSERT_TRUE(out.ready) << out.error;
  EXPECT_EQ(seen.load(), kNobody);
  auto info = t->server->Session(out.session);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->peer.uid, kNobody);
  EXPECT_EQ(info->peer.gid, kNobody);
  EXPECT_EQ(info->peer.pid, peers_.back()->pid());  // setpriv exec'd handoff_peer in place
  ASSERT_EQ(out.regions.size(), 2u);
  for (uint32_t r = 0; r < 2; ++r) {
    auto region = t->server->Resolve(out.session, out.key, out.regions[r].rkey,
                                     out.regions[r].address, kSize, /*need_write=*/true);
    ASSERT_TRUE(region.ok()) << region.status();
    for (uint64_t i = 0; i < kSize; i += 997) {
      ASSERT_EQ(static_cast<uint8_t>((*region)->host()[i]), test::PeerByte(r, i)) << r << " " << i;
    }
  }
}

TEST_F(HandoffProcessTest, KilledClientLosesItsRegionsWhileHeldMemoryStaysReadable) {
  absl::Mutex mu;
  std::vector<uint64_t> ended;
  HandoffServerOptions o;
  o.on_session_end = [&](const SessionInfo& s) {
    absl::MutexLock lock(&mu);
    ended.push_back(s.id);
  };
  auto t = test::StartTestServer(std::move(o));
  ASSERT_TRUE(t.ok()) << t.status();
  // A bystander in this process with a region of its own.
  auto bystander = HandoffClient::Connect(t->path(), "bystander", absl::Seconds(30));
  ASSERT_TRUE(bystander.ok()) << bystander.status();
  auto mine = test::MakeSealedMemfd(4096);
  ASSERT_TRUE(mine.ok());
  Register r;
  r.address = reinterpret_cast<uint64_t>(mine->bytes);
  r.size = 4096;
  auto my_rkey = (*bystander)->Register(r, mine->fd.get());
  ASSERT_TRUE(my_rkey.ok()) << my_rkey.status();

  constexpr uint64_t kSize = 1 << 20;
  PeerOutput out = RunPeer(t->path(), 0, 3, kSize);
  ASSERT_TRUE(out.ready) << out.error;
  ASSERT_EQ(out.regions.size(), 3u);
  EXPECT_EQ(t->server->stats().regions, 4u);
  EXPECT_EQ(t->server->stats().bytes, 3 * kSize + 4096);
  auto held = t->server->Resolve(out.session, out.key, out.regions[1].rkey,
                                 out.regions[1].address, kSize, false);
  ASSERT_TRUE(held.ok()) << held.status();

  ASSERT_TRUE(peers_.back()->Signal(SIGKILL).ok());
  ASSERT_TRUE(peers_.back()->Wait(absl::Seconds(30)).ok());
  // The end is reported by on_session_end, which runs on the session's thread after its
  // regions left the table: wait for the report (the table's counts change first).
  ASSERT_TRUE(integ::PollUntil(
      [&] {
        absl::MutexLock lock(&mu);
        return !ended.empty();
      },
      absl::Seconds(30)))
      << "the killed client's session did not end";
  {
    absl::MutexLock lock(&mu);
    EXPECT_EQ(ended, std::vector<uint64_t>{out.session});
  }
  EXPECT_EQ(t->server->stats().sessions, 1u);
  EXPECT_EQ(t->server->stats().regions, 1u);
  EXPECT_EQ(t->server->stats().bytes, 4096u);
  auto after = t->server->Resolve(out.session, out.key, out.regions[0].rkey,
                                  out.regions[0].address, 1, false);
  EXPECT_TRUE(absl::IsPermissionDenied(after.status())) << after.status();
  EXPECT_TRUE(absl::IsNotFound(t->server->Session(out.session).status()));
  // The reference taken before the kill still reads the dead client's bytes.
  for (uint64_t i = 0; i < kSize; i += 4093) {
    ASSERT_EQ(static_cast<uint8_t>((*held)->host()[i]), test::PeerByte(1, i)) << i;
  }
  // The bystander is unaffected.
  EXPECT_TRUE((*bystander)->status().ok());
  EXPECT_TRUE(t->server
                  ->Resolve((*bystander)->session(), (*bystander)->key(), *my_rkey, r.address,
                            4096, true)
                  .ok());
  EXPECT_TRUE((*bystander)->Register(r, mine->fd.get()).ok());
}

}  // namespace
}  // namespace gdr::handoff
