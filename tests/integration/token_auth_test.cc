// Bearer tokens end to end: a real daemon started with --token-file refuses calls without a
// token (UNAUTHENTICATED) and with a wrong one (PERMISSION_DENIED), on unary calls and on the
// Stream, keeps answering the health check, serves gdrctl and libgdrclient presenting a right
// one, rotates tokens without a restart on SIGHUP and when a Kubernetes Secret's files are
// swapped, and keeps its systemd watchdog pings going (the in-process Ping behind them presents
// a token too).
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <fstream>
#include <future>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/ascii.h"
#include "gdrstore/client.h"
#include "tests/integration/daemon_process.h"
#include "tests/integration/notify_listener.h"
#include "tests/integration/secret_volume.h"

namespace gdr::integ {
namespace {

constexpr char kGood[] = "gdrstore-test-token-0123456789abcdef";
constexpr char kRotated[] = "gdrstore-test-token-rotated-fedcba9876";
constexpr char kWrong[] = "gdrstore-test-token-not-accepted-00000";

void WriteTokenFile(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::trunc) << text;
  ::chmod(path.c_str(), 0600);
}

class TokenAuthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto dir = TempDir::Create("gdr-token");
    ASSERT_TRUE(dir.ok()) << dir.status();
    dir_ = std::move(*dir);
    tokens_ = dir_->File("daemon.tokens");
    WriteTokenFile(tokens_, absl::StrCat("# accepted by the daemon\n\n  ", kGood, "  \n"));
    WriteTokenFile(dir_->File("good"), absl::StrCat(kGood, "\n"));
    WriteTokenFile(dir_->File("rotated"), absl::StrCat(kRotated, "\n"));
    WriteTokenFile(dir_->File("wrong"), absl::StrCat(kWrong, "\n"));
    auto d = DaemonProcess::Start({"--volume", "vol0=16MiB", "--token-file", tokens_});
    ASSERT_TRUE(d.ok()) << d.status();
    daemon_ = std::move(*d);
  }

  // gdrctl --daemon ADDR [--token-file F] args...
  ProcessResult Gdrctl(const std::string& token_file, std::vector<std::string> args) {
    std::vector<std::string> argv = {GDR_GDRCTL_BIN, "--daemon", daemon_->address()};
    if (!token_file.empty()) {
      argv.push_back("--token-file");
      argv.push_back(dir_->File(token_file));
    }
    argv.insert(argv.end(), args.begin(), args.end());
    auto r = RunProcess(argv, dir_->path(), absl::StrCat("gdrctl", runs_++), absl::Seconds(60));
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : ProcessResult{};
  }

  // Waits until the daemon takes the rotated token (a reload is applied on one of its own
  // threads: observed from outside), then checks the first one is refused.
  void ExpectRotatedTokenOnly() {
    ASSERT_TRUE(PollUntil([&] { return Gdrctl("rotated", {"info"}).exit_code == 0; },
                          absl::Seconds(20)))
        << daemon_->Stderr();
    ProcessResult old = Gdrctl("good", {"info"});
    EXPECT_EQ(old.exit_code, 1) << old.Describe();
    EXPECT_TRUE(absl::StrContains(old.err, "PERMISSION_DENIED")) << old.err;
  }

  std::unique_ptr<TempDir> dir_;
  std::string tokens_;
  std::unique_ptr<DaemonProcess> daemon_;
  int runs_ = 0;
};

TEST_F(TokenAuthTest, NoTokenIsUnauthenticatedWrongIsDeniedRightIsServed) {
  ProcessResult none = Gdrctl("", {"info"});
  EXPECT_EQ(none.exit_code, 1) << none.Describe();
  EXPECT_TRUE(absl::StrContains(none.err, "UNAUTHENTICATED")) << none.err;
  EXPECT_TRUE(absl::StrContains(none.err, "--token-file")) << none.err;

  ProcessResult wrong = Gdrctl("wrong", {"write", "-s", "64KiB", "--verify"});
  EXPECT_EQ(wrong.exit_code, 1) << wrong.Describe();
  EXPECT_TRUE(absl::StrContains(wrong.err, "PERMISSION_DENIED")) << wrong.err;
  EXPECT_FALSE(absl::StrContains(wrong.err, kWrong)) << "a token was echoed: " << wrong.err;
  EXPECT_FALSE(absl::StrContains(daemon_->Stderr(), kWrong)) << "a token was logged";
  EXPECT_FALSE(absl::StrContains(daemon_->Stderr(), kGood)) << "a token was logged";

  // The Stream is refused the same way, before any op runs.
  ProcessResult stream = Gdrctl("wrong", {"bench", "-n", "10", "-s", "4KiB", "--qd", "4", "-q"});
  EXPECT_NE(stream.exit_code, 0) << stream.Describe();
  EXPECT_TRUE(absl::StrContains(stream.err, "PERMISSION_DENIED")) << stream.err;

  // Health checks need no token.
  auto health = HealthCheck(daemon_->address(), absl::Seconds(5));
  ASSERT_TRUE(health.ok()) << health.status();
  EXPECT_TRUE(*health);

  ProcessResult w = Gdrctl("good", {"write", "-o", "12345", "-s", "1MiB", "--verify"});
  EXPECT_EQ(w.exit_code, 0) << w.Describe();
  ProcessResult r = Gdrctl("good", {"read", "-o", "4096", "-s", "64KiB", "--salt", "9", "--verify"});
  EXPECT_EQ(r.exit_code, 0) << r.Describe();
  ProcessResult b = Gdrctl("good", {"bench", "-n", "200", "-s", "4KiB", "--qd", "8", "-q"});
  EXPECT_EQ(b.exit_code, 0) << b.Describe();
  ProcessResult s = Gdrctl("good", {"stats"});
  EXPECT_EQ(s.exit_code, 0) << s.Describe();

  // The library, given the token in ClientOptions, on unary and Stream calls alike.
  gdrstore::ClientOptions o;
  o.daemon_address = daemon_->address();
  o.token = kGood;
  auto client = gdrstore::Client::Connect(o);
  ASSERT_TRUE(client.ok()) << client.status();
  auto buf = (*client)->AllocateBuffer(8192);
  ASSERT_TRUE(buf.ok()) << buf.status();
  auto op = (*client)->Write({"vol0", 0, 8192}, **buf);
  EXPECT_TRUE(op.ok()) << op.status();
  o.token = kWrong;
  auto denied = gdrstore::Client::Connect(o);
  ASSERT_TRUE(denied.ok()) << denied.status();
  EXPECT_EQ((*denied)->Ping().code(), absl::StatusCode::kPermissionDenied);
  auto denied_buf = (*denied)->AllocateBuffer(4096);
  ASSERT_TRUE(denied_buf.ok()) << denied_buf.status();
  auto op_stream = (*denied)->OpenStream();
  ASSERT_TRUE(op_stream.ok()) << op_stream.status();
  std::promise<absl::Status> answered;
  (*op_stream)->Submit(gdrstore::OpKind::kWrite, {"vol0", 0, 4096}, **denied_buf, 0,
                    [&](absl::StatusOr<gdrstore::OpResult> r) { answered.set_value(r.status()); });
  auto answer = answered.get_future();
  ASSERT_EQ(answer.wait_for(std::chrono::seconds(30)), std::future_status::ready);
  EXPECT_EQ(answer.get().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ((*op_stream)->Close().code(), absl::StatusCode::kPermissionDenied);

  // The daemon served the refusals without harm.
  EXPECT_TRUE(daemon_->Running());
}

TEST_F(TokenAuthTest, SighupRotatesTokensWithoutARestart) {
  ASSERT_EQ(Gdrctl("good", {"info"}).exit_code, 0);
  const pid_t pid = daemon_->pid();
  WriteTokenFile(tokens_, absl::StrCat(kRotated, "\n"));
  ASSERT_TRUE(daemon_->Signal(SIGHUP).ok());
  ExpectRotatedTokenOnly();
  EXPECT_EQ(daemon_->pid(), pid);
  EXPECT_TRUE(daemon_->Running());
  EXPECT_TRUE(absl::StrContains(daemon_->Stderr(), "tokens: 1 token -> 1 token accepted"))
      << daemon_->Stderr();

  // A token file that no longer parses is refused whole: the rotated token stays valid.
  WriteTokenFile(tokens_, "short\n");
  ASSERT_TRUE(daemon_->Signal(SIGHUP).ok());
  ASSERT_TRUE(PollUntil([&] {
    return absl::StrContains(daemon_->Stderr(), "configuration not reloaded");
  }, absl::Seconds(20))) << daemon_->Stderr();
  EXPECT_EQ(Gdrctl("rotated", {"info"}).exit_code, 0);
}

TEST_F(TokenAuthTest, SecretSwappedTheKubernetesWayIsReadWithoutASignal) {
  ASSERT_EQ(::mkdir(dir_->File("secret").c_str(), 0755), 0);
  SecretVolume secret(dir_->File("secret"));
  secret.Publish(absl::StrCat(kGood, "\n"));
  daemon_.reset();
  auto d = DaemonProcess::Start({"--volume", "vol0=16MiB", "--token-file", secret.path()});
  ASSERT_TRUE(d.ok()) << d.status();
  daemon_ = std::move(*d);
  ASSERT_EQ(Gdrctl("good", {"info"}).exit_code, 0) << daemon_->Stderr();

  secret.Publish(absl::StrCat(kRotated, "\n"));
  ExpectRotatedTokenOnly();
  EXPECT_TRUE(absl::StrContains(daemon_->Stderr(), secret.path() + " changed: applied tokens"))
      << daemon_->Stderr();

  // A new Secret that does not pass the checks SIGHUP makes is refused whole, saying why; the
  // running tokens stay.
  secret.Publish("short\n");
  ASSERT_TRUE(PollUntil([&] {
    return absl::StrContains(daemon_->Stderr(),
                             secret.path() + " changed: configuration not reloaded");
  }, absl::Seconds(20))) << daemon_->Stderr();
  EXPECT_EQ(Gdrctl("rotated", {"info"}).exit_code, 0);
  EXPECT_TRUE(daemon_->Running());
}

TEST(TokenAuthStartTest, BadTokenFileStopsTheDaemonNamingTheLine) {
  auto dir = TempDir::Create("gdr-token-bad");
  ASSERT_TRUE(dir.ok()) << dir.status();
  WriteTokenFile((*dir)->File("tokens"), "# comment\ntoo-short\n");
  auto r = RunProcess({GDR_GDRSTORED_BIN, "--listen", "127.0.0.1:0", "--token-file",
                       (*dir)->File("tokens")},
                      (*dir)->path(), "daemon", absl::Seconds(30));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_code, 1) << r->Describe();
  EXPECT_TRUE(absl::StrContains(r->err, "--token-file")) << r->err;
  EXPECT_TRUE(absl::StrContains(r->err, ":2:")) << r->err;
  EXPECT_FALSE(absl::StrContains(r->err, "too-short")) << "a token was echoed: " << r->err;

  auto missing = RunProcess({GDR_GDRSTORED_BIN, "--listen", "127.0.0.1:0", "--token-file",
                             (*dir)->File("absent")},
                            (*dir)->path(), "daemon2", absl::Seconds(30));
  ASSERT_TRUE(missing.ok()) << missing.status();
  EXPECT_EQ(missing->exit_code, 1) << missing->Describe();
  EXPECT_TRUE(absl::StrContains(missing->err, "absent")) << missing->err;
}

// The watchdog's in-process Ping goes through the same check with the daemon's own token,
// which it accepts whatever the file holds: pings go on.
void ExpectWatchdogPingsWith(const std::string& token_file_text) {
  auto dir = TempDir::Create("gdr-token-wd");
  ASSERT_TRUE(dir.ok()) << dir.status();
  WriteTokenFile((*dir)->File("tokens"), token_file_text);
  auto notify = NotifyListener::Bind((*dir)->File("notify.sock"));
  ASSERT_TRUE(notify.ok()) << notify.status();
  NotifyListener& sd = **notify;
  auto child = ChildProcess::SpawnWithEnv(
      {GDR_GDRSTORED_BIN, "--listen", "127.0.0.1:0", "--volume", "vol0=4MiB", "--token-file",
       (*dir)->File("tokens")},
      {"NOTIFY_SOCKET=" + sd.path(), "WATCHDOG_USEC=1000000"}, (*dir)->File("stdout"),
      (*dir)->File("stderr"));
  ASSERT_TRUE(child.ok()) << child.status();
  const int ready = sd.WaitFor("READY=1", 0, absl::Seconds(60));
  ASSERT_GE(ready, 0) << ReadFileOrEmpty((*child)->stderr_path());
  int seen = ready;
  for (int i = 0; i < 3; ++i) {
    seen = sd.WaitFor("WATCHDOG=1", seen + 1, absl::Seconds(10));
    ASSERT_GE(seen, 0) << "watchdog ping " << i << " missing; stderr:\n"
                       << ReadFileOrEmpty((*child)->stderr_path());
  }
  ASSERT_TRUE((*child)->Signal(SIGTERM).ok());
  auto st = (*child)->Wait(absl::Seconds(30));
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_EQ(DescribeWaitStatus(*st), "exited 0");
}

TEST(TokenAuthWatchdogTest, WatchdogPingsContinueWithTokensOn) {
  ExpectWatchdogPingsWith(absl::StrCat(kGood, " get=vol0\n"));
}

// A file of certificate identities only: no token a client could send, yet the daemon's own
// Ping is admitted.
TEST(TokenAuthWatchdogTest, WatchdogPingsContinueWithOnlyIdentities) {
  ExpectWatchdogPingsWith("san:client.example.org get=*\n");
}

}  // namespace
}  // namespace gdr::integ
