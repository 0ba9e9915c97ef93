// Case 3: gdrctl end to end against a real daemon: info (plain and --json), verified write and
// read, size and offset flags with units landing where they say, exit code 2 with one stderr
// line for bad usage, exit 1 with a one-line reason when the op fails, exit 3 when
// verification finds other bytes.
#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tests/integration/daemon_process.h"
#include "tests/integration/silent_listener.h"

namespace gdr::integ {
namespace {

constexpr uint64_t kMiB = 1 << 20;
constexpr uint64_t kVolumeSize = 64 * kMiB;
constexpr uint64_t kMaxOp = 4 * kMiB;

// Exactly one line: text without a newline, then one newline.
bool IsOneLine(const std::string& s) {
  return !s.empty() && s.back() == '\n' && s.find('\n') == s.size() - 1;
}

class GdrctlTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto d = DaemonProcess::Start({"--volume", absl::StrCat("vol0=", kVolumeSize), "--volume",
                                   "aux=1MiB", "--max-op-size", absl::StrCat(kMaxOp)});
    ASSERT_TRUE(d.ok()) << d.status();
    daemon_ = d->release();
  }
  static void TearDownTestSuite() {
    if (daemon_ == nullptr) return;
    auto st = daemon_->Terminate(absl::Seconds(30));
    EXPECT_TRUE(st.ok()) << st.status();
    if (st.ok()) {
      EXPECT_EQ(DescribeWaitStatus(*st), "exited 0") << daemon_->Stderr();
    }
    delete daemon_;
    daemon_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(daemon_, nullptr);
    auto dir = TempDir::Create("gdrctl-e2e");
    ASSERT_TRUE(dir.ok()) << dir.status();
    dir_ = std::move(*dir);
  }

  // gdrctl --daemon ADDR args...
  ProcessResult Gdrctl(std::vector<std::string> args, bool with_daemon = true) {
    std::vector<std::string> argv = {GDR_GDRCTL_BIN};
    if (with_daemon) {
      argv.push_back("--daemon");
      argv.push_back(daemon_->address());
    }
    argv.insert(argv.end(), args.begin(), args.end());
    auto r = RunProcess(argv, dir_->path(), absl::StrCat("run", runs_++), absl::Seconds(60));
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : ProcessResult{};
  }

  static DaemonProcess* daemon_;
  std::unique_ptr<TempDir> dir_;
  int runs_ = 0;
};
DaemonProcess* GdrctlTest::daemon_ = nullptr;

TEST_F(GdrctlTest, InfoListsVolumesAndTransports) {
  ProcessResult r = Gdrctl({"info"});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_TRUE(absl::StrContains(r.out, "vol0")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, absl::StrCat(kVolumeSize))) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "tcp")) << r.out;
  EXPECT_EQ(r.err, "");
}

TEST_F(GdrctlTest, InfoJsonParsesAndNamesTheVolume) {
  ProcessResult r = Gdrctl({"--json", "info"});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  google::protobuf::Struct doc;
  auto parsed = google::protobuf::util::JsonStringToMessage(r.out, &doc);
  ASSERT_TRUE(parsed.ok()) << parsed.ToString() << "\n" << r.out;
  ASSERT_TRUE(doc.fields().contains("volumes")) << r.out;
  const auto& volumes = doc.fields().at("volumes").list_value();
  bool found_vol0 = false, found_aux = false;
  for (const auto& v : volumes.values()) {
    const auto& f = v.struct_value().fields();
    if (!f.contains("name") || !f.contains("size")) continue;
    if (f.at("name").string_value() == "vol0") {
      found_vol0 = true;
      EXPECT_EQ(f.at("size").number_value(), static_cast<double>(kVolumeSize));
    }
    found_aux |= f.at("name").string_value() == "aux";
  }
  EXPECT_TRUE(found_vol0) << r.out;
  EXPECT_TRUE(found_aux) << r.out;
  ASSERT_TRUE(doc.fields().contains("limits")) << r.out;
  EXPECT_EQ(doc.fields().at("limits").struct_value().fields().at("max_op_bytes").number_value(),
            static_cast<double>(kMaxOp));
}

TEST_F(GdrctlTest, WriteAndReadVerifyExitZero) {
  ProcessResult w = Gdrctl({"write", "--volume", "vol0", "-o", "12345", "-s", "1MiB",
                            "--buffer-offset", "3", "--verify"});
  ASSERT_EQ(w.exit_code, 0) << w.Describe();
  EXPECT_TRUE(absl::StrContains(w.out, "verified")) << w.out;
  EXPECT_TRUE(absl::StrContains(w.out, "; path tcp/host")) << w.out;
  // --require: a path it rules out fails the command, naming the requirement and the path.
  ProcessResult strict = Gdrctl({"--require", "rc", "write", "--volume", "vol0", "-s", "4KiB"});
  EXPECT_NE(strict.exit_code, 0) << strict.Describe();
  EXPECT_TRUE(absl::StrContains(strict.err, "require=rc")) << strict.err;
  EXPECT_TRUE(absl::StrContains(strict.err, "tcp")) << strict.err;

  // A salted pattern stored by read --verify reads back with the same salt...
  ProcessResult rd = Gdrctl({"read", "--volume", "vol0", "-o", "777777", "-s", "300001",
                             "--buffer-offset", "5", "--salt", "9", "--verify"});
  ASSERT_EQ(rd.exit_code, 0) << rd.Describe();
  EXPECT_TRUE(absl::StrContains(rd.out, "verified")) << rd.out;
  ProcessResult back = Gdrctl({"--json", "write", "--volume", "vol0", "-o", "777777", "-s",
                               "300001", "--salt", "9", "--verify"});
  ASSERT_EQ(back.exit_code, 0) << back.Describe();
  google::protobuf::Struct doc;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(back.out, &doc).ok()) << back.out;
  EXPECT_EQ(doc.fields().at("bytes").number_value(), 300001.0);
  EXPECT_TRUE(doc.fields().at("verified").bool_value());
  EXPECT_EQ(doc.fields().at("path").string_value(), "tcp/host");

  // ...and no longer matches the initial fill: exit 3, one line naming the offset.
  ProcessResult stale =
      Gdrctl({"write", "--volume", "vol0", "-o", "777777", "-s", "300001", "--verify"});
  EXPECT_EQ(stale.exit_code, 3) << stale.Describe();
  EXPECT_TRUE(IsOneLine(stale.err)) << stale.err;
  EXPECT_TRUE(absl::StrContains(stale.err, "verify failed")) << stale.err;
}

TEST_F(GdrctlTest, BadUsageExitsTwoWithOneLine) {
  const std::vector<std::vector<std::string>> cases = {
      {},
      {"write", "--bogus-flag"},
      {"frobnicate"},
      {"write", "-s", "12XB"},
      {"read", "-o", "not-a-number"},
      {"bench", "-t", "sideways"},
      {"--timeout-ms", "0", "info"},
  };
  for (const auto& args : cases) {
    ProcessResult r = Gdrctl(args);
    const std::string what = absl::StrCat("gdrctl ", absl::StrJoin(args, " "));
    EXPECT_EQ(r.exit_code, 2) << what << ": " << r.Describe();
    EXPECT_TRUE(IsOneLine(r.err)) << what << ": stderr [" << r.err << "]";
    EXPECT_TRUE(absl::StartsWith(r.err, "gdrctl: ")) << what << ": " << r.err;
  }
}

// -o and -s take units like every size flag: a salted pattern stored with `read -o 1MiB` is
// found at byte 1048576 and not at byte 1; `bench -o 2MiB` changes exactly the extent there.
TEST_F(GdrctlTest, OffsetsTakeUnitsAndTheOpLandsThere) {
  ProcessResult rd = Gdrctl({"--json", "read", "--volume", "vol0", "-o", "1MiB", "-s", "64KiB",
                             "--salt", "7", "--verify"});
  ASSERT_EQ(rd.exit_code, 0) << rd.Describe();
  google::protobuf::Struct doc;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(rd.out, &doc).ok()) << rd.out;
  EXPECT_EQ(doc.fields().at("offset").number_value(), 1048576.0) << rd.out;
  EXPECT_EQ(doc.fields().at("bytes").number_value(), 65536.0) << rd.out;

  ProcessResult at = Gdrctl({"write", "--volume", "vol0", "-o", "1048576", "-s", "65536",
                             "--salt", "7", "--verify"});
  EXPECT_EQ(at.exit_code, 0) << at.Describe();
  ProcessResult off_by_unit =
      Gdrctl({"write", "--volume", "vol0", "-o", "1", "-s", "64KiB", "--salt", "7", "--verify"});
  EXPECT_EQ(off_by_unit.exit_code, 3) << off_by_unit.Describe();

  // --buffer-offset takes units too; the extent read back is still the salted pattern.
  ProcessResult shifted = Gdrctl({"write", "--volume", "vol0", "-o", "1MiB", "-s", "4KiB",
                                  "--buffer-offset", "1KiB", "--salt", "7", "--verify"});
  EXPECT_EQ(shifted.exit_code, 0) << shifted.Describe();

  // bench -t read stores its buffer over the initial fill at 2 MiB, and nowhere next to it.
  for (const char* offset : {"2093056", "2097152", "2101248"}) {
    ProcessResult before = Gdrctl({"write", "--volume", "vol0", "-o", offset, "-s", "4KiB",
                                   "--verify"});
    EXPECT_EQ(before.exit_code, 0) << offset << ": " << before.Describe();
  }
  ProcessResult bench = Gdrctl({"bench", "-t", "read", "--volume", "vol0", "-o", "2MiB", "-s",
                                "4KiB", "--span", "4KiB", "-n", "3", "-q"});
  ASSERT_EQ(bench.exit_code, 0) << bench.Describe();
  EXPECT_TRUE(absl::StrContains(bench.out, "read 4 KiB x 3")) << bench.out;
  ProcessResult changed =
      Gdrctl({"write", "--volume", "vol0", "-o", "2MiB", "-s", "4KiB", "--verify"});
  EXPECT_EQ(changed.exit_code, 3) << changed.Describe();
  EXPECT_TRUE(absl::StrContains(changed.err, "verify failed at volume offset 209")) << changed.err;
  for (const char* offset : {"2093056", "2101248"}) {
    ProcessResult beside = Gdrctl({"write", "--volume", "vol0", "-o", offset, "-s", "4KiB",
                                   "--verify"});
    EXPECT_EQ(beside.exit_code, 0) << offset << ": " << beside.Describe();
  }
}

// Every size and offset flag says which flag it cannot parse and why, in one line, exit 2.
TEST_F(GdrctlTest, BadSizeOrOffsetNamesTheFlag) {
  struct Case {
    std::vector<std::string> args;
    std::string flag;
  };
  const std::vector<Case> cases = {
      {{"write", "-o", "12XB"}, "-o,--offset"},
      {{"read", "-o", "lots"}, "-o,--offset"},
      {{"read", "-s", "1.5MiB"}, "-s,--size"},
      {{"write", "--buffer-offset", "3Q"}, "--buffer-offset"},
      {{"bench", "-o", "512MB!"}, "-o,--offset"},
      {{"bench", "-s", "0x10"}, "-s,--size"},
      {{"bench", "--span", "-1"}, "--span"},
      {{"selftest", "-o", "half"}, "-o,--offset"},
  };
  for (const Case& c : cases) {
    ProcessResult r = Gdrctl(c.args);
    const std::string what = absl::StrCat("gdrctl ", absl::StrJoin(c.args, " "));
    EXPECT_EQ(r.exit_code, 2) << what << ": " << r.Describe();
    EXPECT_TRUE(IsOneLine(r.err)) << what << ": stderr [" << r.err << "]";
    EXPECT_TRUE(absl::StartsWith(r.err, absl::StrCat("gdrctl: ", c.flag, ": size '")))
        << what << ": " << r.err;
  }
}

// --stream-batch N (issue 45's split of a Stream's batch) caps each request message of the
// Stream at N ops: the JSON carries the setting and the messages the stream wrote. Bad values,
// and the flag with --unary (no Stream), are usage errors naming it.
TEST_F(GdrctlTest, BenchStreamBatchCapsOpsPerMessage) {
  constexpr int kOps = 256;
  for (int batch : {1, 8}) {
    ProcessResult r = Gdrctl({"--json", "bench", "--volume", "vol0", "-n", absl::StrCat(kOps),
                              "--qd", "32", "--stream-batch", absl::StrCat(batch)});
    ASSERT_EQ(r.exit_code, 0) << batch << ": " << r.Describe();
    google::protobuf::Struct doc;
    auto parsed = google::protobuf::util::JsonStringToMessage(r.out, &doc);
    ASSERT_TRUE(parsed.ok()) << parsed.ToString() << "\n" << r.out;
    const auto& f = doc.fields();
    ASSERT_TRUE(f.contains("stream_batch") && f.contains("stream_messages")) << r.out;
    EXPECT_EQ(f.at("stream_batch").number_value(), batch) << r.out;
    const double messages = f.at("stream_messages").number_value();
    if (batch == 1) {
      EXPECT_EQ(messages, kOps) << r.out;  // one op a message, whatever queued behind a write
    } else {
      EXPECT_GE(messages, kOps / batch) << r.out;
    }
  }
  for (const std::vector<std::string>& bad :
       {std::vector<std::string>{"--stream-batch", "-1"}, {"--stream-batch", "1025"},
        {"--stream-batch", "eight"}, {"--unary", "--stream-batch", "8"}}) {
    std::vector<std::string> args = {"bench", "--volume", "vol0", "-n", "8"};
    args.insert(args.end(), bad.begin(), bad.end());
    ProcessResult r = Gdrctl(args);
    const std::string what = absl::StrJoin(bad, " ");
    EXPECT_EQ(r.exit_code, 2) << what << ": " << r.Describe();
    EXPECT_TRUE(IsOneLine(r.err)) << what << ": stderr [" << r.err << "]";
    EXPECT_TRUE(absl::StrContains(r.err, "--stream-batch")) << what << ": " << r.err;
  }
}

// -a takes HOST, HOST:PORT and [V6]:PORT; a port given twice must agree, a malformed one is a
// usage error naming the forms (it once became "HOST:PORT:PORT" and a DNS failure).
TEST_F(GdrctlTest, AddressFlagTakesHostPort) {
  const std::string port = absl::StrCat(daemon_->port());
  const std::string other = absl::StrCat(daemon_->port() == 1 ? 2 : daemon_->port() - 1);
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"-a", "127.0.0.1:" + port, "info"},
        std::vector<std::string>{"-a", "127.0.0.1", "-p", port, "info"},
        std::vector<std::string>{"-a", "127.0.0.1:" + port, "-p", port, "info"},
        std::vector<std::string>{"--daemon", "127.0.0.1:" + port, "info"}}) {
    ProcessResult r = Gdrctl(args, /*with_daemon=*/false);
    EXPECT_EQ(r.exit_code, 0) << absl::StrJoin(args, " ") << ": " << r.Describe();
    EXPECT_TRUE(absl::StrContains(r.out, "vol0")) << r.out;
  }
  struct Refused {
    std::vector<std::string> args;
    std::string says;
  };
  for (const Refused& c : std::vector<Refused>{
           {{"-a", "127.0.0.1:" + port, "-p", other, "info"}, "give the port once"},
           {{"-a", "127.0.0.1:", "info"}, "-a takes HOST, HOST:PORT or [V6]:PORT"},
           {{"-a", "127.0.0.1:http", "info"}, "-a takes HOST, HOST:PORT or [V6]:PORT"},
           {{"-a", "[::1", "info"}, "-a takes HOST, HOST:PORT or [V6]:PORT"},
           {{"--daemon", "127.0.0.1", "info"}, "--daemon: bad address"}}) {
    ProcessResult r = Gdrctl(c.args, /*with_daemon=*/false);
    const std::string what = absl::StrJoin(c.args, " ");
    EXPECT_EQ(r.exit_code, 2) << what << ": " << r.Describe();
    EXPECT_TRUE(IsOneLine(r.err)) << what << ": " << r.err;
    EXPECT_TRUE(absl::StrContains(r.err, c.says)) << what << ": " << r.err;
  }
}

TEST_F(GdrctlTest, OpErrorsExitOneWithOneLineReason) {
  struct Case {
    std::vector<std::string> args;
    std::string code;
  };
  const std::vector<Case> cases = {
      {{"write", "--volume", "nosuch", "-s", "4096"}, "NOT_FOUND"},
      {{"write", "--volume", "vol0", "-o", absl::StrCat(kVolumeSize - 100), "-s", "4096"},
       "OUT_OF_RANGE"},
      {{"read", "--volume", "aux", "-o", "0", "-s", "2MiB"}, "OUT_OF_RANGE"},
      {{"write", "--volume", "vol0", "-s", absl::StrCat(kMaxOp + 1)}, "INVALID_ARGUMENT"},
      {{"bench", "--volume", "nosuch", "-n", "10"}, "nosuch"},
  };
  for (const Case& c : cases) {
    ProcessResult r = Gdrctl(c.args);
    const std::string what = absl::StrCat("gdrctl ", absl::StrJoin(c.args, " "));
    EXPECT_EQ(r.exit_code, 1) << what << ": " << r.Describe();
    EXPECT_TRUE(IsOneLine(r.err)) << what << ": stderr [" << r.err << "]";
    EXPECT_TRUE(absl::StrContains(r.err, c.code)) << what << ": " << r.err;
  }
  // No daemon behind the port: a clean failure within the deadline, not a hang.
  auto closed = ClosedPort::Reserve();
  ASSERT_TRUE(closed.ok()) << closed.status();
  ProcessResult r = Gdrctl(
      {"--daemon", absl::StrCat("127.0.0.1:", (*closed)->port()), "--timeout-ms", "2000", "info"},
      /*with_daemon=*/false);
  EXPECT_EQ(r.exit_code, 1) << r.Describe();
  EXPECT_TRUE(IsOneLine(r.err)) << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, "UNAVAILABLE") ||
              absl::StrContains(r.err, "DEADLINE_EXCEEDED"))
      << r.err;
}

}  // namespace
}  // namespace gdr::integ
