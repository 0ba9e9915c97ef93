// Op traces end to end: a real gdrstored with --trace records the ops of several clients
// (unary and Stream calls), each with its fields and its client; SIGHUP starts a new file; the
// shipped checkpoint trace replays against a real daemon through gdrctl with matching counts
// and as many clients as it recorded; a recorded trace replays at its recorded pace.
#include <gtest/gtest.h>
#include <signal.h>

#include <cstdio>
#include <future>
#include <map>
#include <regex>
#include <set>
#include <thread>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/wire/trace_format.h"
#include "gdrstore/client.h"
#include "tests/integration/daemon_process.h"
#include "tests/integration/stats_rpc.h"

namespace gdr::integ {
namespace {

constexpr uint64_t kMiB = 1 << 20;
const std::string kShipped =
    std::string(GDR_SOURCE_DIR) + "/tests/data/checkpoint_load_8ranks.trace";


// (kind, volume, offset, length) of one op.
using OpKey = std::tuple<trace::OpKind, std::string, uint64_t, uint64_t>;

// The number after `"key":` following `after` in `json` (gdrctl replay --json); -1 if absent.
double JsonField(const std::string& json, const std::string& after, const std::string& key) {
  const size_t at = json.find(after);
  if (at == std::string::npos) return -1;
  std::smatch m;
  const std::string rest = json.substr(at + after.size());
  if (!std::regex_search(rest, m, std::regex("\"" + key + "\":([0-9.]+)"))) return -1;
  return std::stod(m[1].str());
}

class TraceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto dir = TempDir::Create("trace-test");
    ASSERT_TRUE(dir.ok()) << dir.status();
    dir_ = std::move(*dir);
  }
  std::unique_ptr<DaemonProcess> StartDaemon(const std::vector<std::string>& extra) {
    auto d = DaemonProcess::Start(extra);
    EXPECT_TRUE(d.ok()) << d.status();
    return d.ok() ? std::move(*d) : nullptr;
  }
  ProcessResult Gdrctl(const DaemonProcess& d, std::vector<std::string> args) {
    std::vector<std::string> argv = {GDR_GDRCTL_BIN, "--daemon", d.address()};
    argv.insert(argv.end(), args.begin(), args.end());
    auto r = RunProcess(argv, dir_->path(), absl::StrCat("gdrctl", runs_++), absl::Seconds(120));
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : ProcessResult{};
  }
  std::unique_ptr<TempDir> dir_;
  int runs_ = 0;
};

TEST_F(TraceTest, EveryOpOfEveryClientIsRecordedWithItsFields) {
  const std::string path = dir_->File("ops.trace");
  auto d = StartDaemon({"--volume", "vol0=64MiB", "--volume", "vol1=16MiB", "--trace", path});
  ASSERT_NE(d, nullptr);
  std::multiset<OpKey> sent;
  std::vector<std::multiset<OpKey>> per_client(3);
  {
    std::vector<std::unique_ptr<gdrstore::Client>> clients;
    for (int i = 0; i < 3; ++i) clients.push_back(ConnectClient(*d));
    for (auto& c : clients) ASSERT_NE(c, nullptr);
    // Client 0: unary gets and puts on vol0.
    auto b0 = clients[0]->AllocateBuffer(4 * kMiB);
    ASSERT_TRUE(b0.ok());
    for (uint64_t i = 0; i < 4; ++i) {
      const uint64_t off = i * 3 * kMiB + 17, len = (i + 1) * 65536 + i;
      ASSERT_TRUE(clients[0]->Write({"vol0", off, len}, **b0).ok());
      per_client[0].insert({trace::OpKind::kGet, "vol0", off, len});
      ASSERT_TRUE(clients[0]->Read({"vol0", off + 40 * kMiB, len}, **b0).ok());
      per_client[0].insert({trace::OpKind::kPut, "vol0", off + 40 * kMiB, len});
    }
    // Client 1: a Stream of gets on vol1, all in flight together.
    auto b1 = clients[1]->AllocateBuffer(8 * kMiB);
    ASSERT_TRUE(b1.ok());
    auto stream = clients[1]->OpenStream();
    ASSERT_TRUE(stream.ok());
    std::vector<std::promise<absl::StatusOr<gdrstore::OpResult>>> done(8);
    for (uint64_t i = 0; i < 8; ++i) {
      (*stream)->Submit(gdrstore::OpKind::kWrite, {"vol1", i * kMiB, kMiB}, **b1, i * kMiB,
                        [&done, i](absl::StatusOr<gdrstore::OpResult> r) {
                          done[i].set_value(std::move(r));
                        });
      per_client[1].insert({trace::OpKind::kGet, "vol1", i * kMiB, kMiB});
    }
    for (auto& p : done) ASSERT_TRUE(p.get_future().get().ok());
    ASSERT_TRUE((*stream)->Close().ok());
    // Client 2: one put on each volume.
    auto b2 = clients[2]->AllocateBuffer(kMiB);
    ASSERT_TRUE(b2.ok());
    ASSERT_TRUE(clients[2]->Read({"vol1", 5, 4096}, **b2).ok());
    ASSERT_TRUE(clients[2]->Read({"vol0", 63 * kMiB, kMiB}, **b2).ok());
    per_client[2].insert({trace::OpKind::kPut, "vol1", 5, 4096});
    per_client[2].insert({trace::OpKind::kPut, "vol0", 63 * kMiB, kMiB});
    // An op refused before it starts is not an answered op: not in the trace.
    EXPECT_FALSE(clients[2]->Read({"vol1", 16 * kMiB, 4096}, **b2).ok());

    // GetStats shows the recorder's figures once the writer has taken the ops.
    const uint64_t want = 8 + 8 + 2;
    uint64_t records = 0;
    EXPECT_TRUE(PollUntil(
        [&] {
          auto s = GetStats(*clients[0]);
          records = s.ok() ? s->trace().records() : 0;
          return records == want;
        },
        absl::Seconds(10)))
        << records;
    auto s = GetStats(*clients[0]);
    ASSERT_TRUE(s.ok());
    ASSERT_TRUE(s->has_trace());
    EXPECT_EQ(s->trace().file(), path);
    EXPECT_EQ(s->trace().dropped(), 0u);
    EXPECT_GT(s->trace().bytes(), trace::kHeaderBytes + want * trace::kRecordBytes);
  }
  for (const auto& c : per_client) sent.insert(c.begin(), c.end());
  ProcessResult stats = Gdrctl(*d, {"stats"});
  EXPECT_EQ(stats.exit_code, 0) << stats.Describe();
  EXPECT_NE(stats.out.find(absl::StrCat("trace ", path, ": 18 ops recorded, 0 dropped")),
            std::string::npos)
      << stats.out;
  auto status = d->Terminate(absl::Seconds(20));
  ASSERT_TRUE(status.ok());
  EXPECT_EQ(*status, 0) << d->Stderr();

  absl::StatusOr<trace::Trace> t = trace::ReadTraceFile(path);
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->ops.size(), sent.size());
  EXPECT_EQ(t->clients.size(), 3u) << "each Client is a connection of its own";
  std::multiset<OpKey> got;
  std::map<uint32_t, std::multiset<OpKey>> by_client;
  for (const trace::TraceOp& op : t->ops) {
    const OpKey k{op.kind, t->volumes[op.volume], op.offset, op.length};
    got.insert(k);
    by_client[op.client].insert(k);
    EXPECT_EQ(op.code, 0);
    EXPECT_STREQ(trace::TransportCodeName(op.transport), "tcp");
    EXPECT_GT(op.latency_ns, 0u);
    EXPECT_GE(op.start_ns, 0);
    EXPECT_TRUE(t->clients[op.client].rfind("ipv4:127.0.0.1:", 0) == 0) << t->clients[op.client];
  }
  EXPECT_EQ(got, sent);
  // The ops of each Client carry one client id, and each client's ops are exactly its own.
  std::vector<std::multiset<OpKey>> recorded;
  for (const auto& [id, ops] : by_client) recorded.push_back(ops);
  for (const auto& mine : per_client) {
    EXPECT_EQ(std::count(recorded.begin(), recorded.end(), mine), 1);
  }
  // trace show reads it.
  auto d2 = StartDaemon({"--volume", "vol0=1MiB"});
  ASSERT_NE(d2, nullptr);
  ProcessResult show = Gdrctl(*d2, {"trace", "show", path, "-n", "3"});
  EXPECT_EQ(show.exit_code, 0) << show.Describe();
  EXPECT_NE(show.out.find("ops: 18 (get 12"), std::string::npos) << show.out;
  EXPECT_NE(show.out.find("clients (3)"), std::string::npos) << show.out;
}

TEST_F(TraceTest, SighupStartsANewFileAtThePath) {
  const std::string path = dir_->File("rotating.trace");
  auto d = StartDaemon({"--volume", "vol0=8MiB", "--trace", path});
  ASSERT_NE(d, nullptr);
  auto c = ConnectClient(*d);
  ASSERT_NE(c, nullptr);
  auto b = c->AllocateBuffer(kMiB);
  ASSERT_TRUE(b.ok());
  ASSERT_TRUE(c->Write({"vol0", 0, 4096}, **b).ok());
  // What logrotate does: move the file away, then reload.
  const std::string moved = path + ".1";
  ASSERT_EQ(std::rename(path.c_str(), moved.c_str()), 0);
  ASSERT_TRUE(d->Signal(SIGHUP).ok());
  ASSERT_TRUE(PollUntil([&] { return !ReadFileOrEmpty(path).empty(); }, absl::Seconds(10)))
      << d->Stderr();
  ASSERT_TRUE(c->Write({"vol0", 8192, 100}, **b).ok());
  ASSERT_TRUE(c->Read({"vol0", 0, 200}, **b).ok());
  auto status = d->Terminate(absl::Seconds(20));
  ASSERT_TRUE(status.ok());
  absl::StatusOr<trace::Trace> old = trace::ReadTraceFile(moved);
  ASSERT_TRUE(old.ok()) << old.status();
  ASSERT_EQ(old->ops.size(), 1u);
  EXPECT_EQ(old->ops[0].length, 4096u);
  absl::StatusOr<trace::Trace> now = trace::ReadTraceFile(path);
  ASSERT_TRUE(now.ok()) << now.status();
  ASSERT_EQ(now->ops.size(), 2u);
  EXPECT_GT(now->start_unix_ns, old->start_unix_ns);
  EXPECT_EQ(now->clients.size(), 1u);  // names are defined afresh in the new file
}

TEST_F(TraceTest, TheShippedCheckpointTraceReplaysWithItsClientsAndBytes) {
  const std::string path = dir_->File("replayed.trace");
  auto d = StartDaemon({"--volume", "vol0=256MiB", "--trace", path});
  ASSERT_NE(d, nullptr);
  ProcessResult r = Gdrctl(*d, {"replay", kShipped, "--pace", "fast", "--volume-map",
                                "ckpt=vol0", "--verify", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.Describe() << r.out;
  EXPECT_EQ(JsonField(r.out, "\"recorded\":{\"get\":", "ops"), 256) << r.out;
  EXPECT_EQ(JsonField(r.out, "\"replayed\":{\"get\":", "ops"), 256) << r.out;
  EXPECT_EQ(JsonField(r.out, "\"replayed\":{\"get\":", "bytes"), 256.0 * kMiB) << r.out;
  EXPECT_EQ(JsonField(r.out, "\"replayed\":", "failed"), 0) << r.out;
  EXPECT_EQ(JsonField(r.out, "", "clients"), 8) << r.out;
  EXPECT_EQ(JsonField(r.out, "", "verify_mismatches"), 0) << r.out;
  // The text form prints both columns.
  ProcessResult text = Gdrctl(*d, {"replay", kShipped, "--pace", "fast", "--clients", "2",
                                   "--volume-map", "ckpt=vol0"});
  ASSERT_EQ(text.exit_code, 0) << text.Describe();
  EXPECT_NE(text.out.find("replaying 256 as 2 clients"), std::string::npos) << text.out;
  EXPECT_TRUE(std::regex_search(text.out, std::regex("get ops +256 +256"))) << text.out;
  // Without the map the daemon has no volume ckpt: every op fails, counted by code, exit 1.
  ProcessResult bad = Gdrctl(*d, {"replay", kShipped, "--pace", "fast"});
  EXPECT_EQ(bad.exit_code, 1) << bad.Describe();
  EXPECT_NE(bad.err.find("256 ops failed (NOT_FOUND 256)"), std::string::npos) << bad.err;
  auto status = d->Terminate(absl::Seconds(20));
  ASSERT_TRUE(status.ok());
  // The daemon's own trace of the first two replays: 8 and then 2 distinct clients.
  absl::StatusOr<trace::Trace> t = trace::ReadTraceFile(path);
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->ops.size(), 512u);
  EXPECT_EQ(t->clients.size(), 10u);
}

TEST_F(TraceTest, AMalformedTraceIsRefusedNamingTheRecord) {
  auto d = StartDaemon({"--volume", "vol0=1MiB"});
  ASSERT_NE(d, nullptr);
  std::string bytes = ReadFileOrEmpty(kShipped);
  ASSERT_GT(bytes.size(), 100u);
  const std::string cut = dir_->File("cut.trace");
  {
    FILE* f = std::fopen(cut.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    std::fwrite(bytes.data(), 1, bytes.size() - 7, f);
    std::fclose(f);
  }
  ProcessResult r = Gdrctl(*d, {"replay", cut});
  EXPECT_EQ(r.exit_code, 1) << r.Describe();
  EXPECT_NE(r.err.find("(op record 255): truncated record"), std::string::npos) << r.err;
  ProcessResult show = Gdrctl(*d, {"trace", "show", cut});
  EXPECT_EQ(show.exit_code, 1);
  EXPECT_NE(show.err.find("at byte offset"), std::string::npos) << show.err;
}

// Issue 29: two records of length 2^63 + 4096 (a hostile trace, also a seed of the trace fuzz
// target) made `replay --verify` size its buffer as slots x length, which wrapped, and fill a
// wild address (SIGSEGV, rc 139); `trace show` summed them to "8192 bytes". The reader refuses
// the first such record, naming it and the field, for every command that reads traces.
TEST_F(TraceTest, AHostileTraceIsRefusedByEveryReaderNamingTheRecordAndField) {
  auto d = StartDaemon({"--volume", "vol0=1MiB"});
  ASSERT_NE(d, nullptr);
  const std::string hostile =
      std::string(GDR_SOURCE_DIR) + "/tests/fuzz/corpus/trace_file_fuzz/hostile_length_2p63_get";
  const std::string want = "(op record 0): length 9223372036854779904 outside 1..";
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"replay", hostile, "--verify", "--volume-map", "vol0=vol0"},
        std::vector<std::string>{"replay", hostile, "--pace", "fast"},
        std::vector<std::string>{"trace", "show", hostile}}) {
    ProcessResult r = Gdrctl(*d, args);
    EXPECT_EQ(r.exit_code, 1) << args[0] << ": " << r.Describe();  // refused, not killed
    EXPECT_NE(r.err.find(absl::StrCat("trace ", hostile, ": at byte offset ")), std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find(want), std::string::npos) << r.err;
    EXPECT_EQ(r.out.find("8192 bytes"), std::string::npos) << r.out;
  }
  EXPECT_TRUE(d->Running());
}

// Issue 29: `--clients 4000000000` allocated a replay client per requested client and died of
// std::bad_alloc. More replay clients than recorded ones would have nothing to issue: refused
// (usage, exit 2) naming the recorded count, before anything is allocated or connected. A
// --volume-map naming a volume the trace does not have is refused the same way.
TEST_F(TraceTest, ReplayOptionsBeyondTheTraceAreRefused) {
  auto d = StartDaemon({"--volume", "vol0=256MiB"});
  ASSERT_NE(d, nullptr);
  ProcessResult many = Gdrctl(*d, {"replay", kShipped, "--clients", "4000000000",
                                   "--volume-map", "ckpt=vol0"});
  EXPECT_EQ(many.exit_code, 2) << many.Describe();
  EXPECT_NE(many.err.find("--clients 4000000000: trace " + kShipped + " recorded 8 clients"),
            std::string::npos)
      << many.err;
  EXPECT_NE(many.err.find("use at most 8"), std::string::npos) << many.err;
  ProcessResult nine = Gdrctl(*d, {"replay", kShipped, "--clients", "9", "--volume-map",
                                   "ckpt=vol0"});
  EXPECT_EQ(nine.exit_code, 2) << nine.Describe();
  ProcessResult zero = Gdrctl(*d, {"replay", kShipped, "--clients", "0"});
  EXPECT_EQ(zero.exit_code, 2) << zero.Describe();
  ProcessResult map = Gdrctl(*d, {"replay", kShipped, "--volume-map", "ckpt0=vol0"});
  EXPECT_EQ(map.exit_code, 2) << map.Describe();
  EXPECT_NE(map.err.find("has no volume 'ckpt0' (volumes: ckpt)"), std::string::npos)
      << map.err;
  // The recorded count itself is fine.
  ProcessResult eight = Gdrctl(*d, {"replay", kShipped, "--pace", "fast", "--clients", "8",
                                    "--volume-map", "ckpt=vol0"});
  EXPECT_EQ(eight.exit_code, 0) << eight.Describe();
  EXPECT_NE(eight.out.find("replaying 256 as 8 clients"), std::string::npos) << eight.out;
}

TEST_F(TraceTest, ARecordedTraceReplaysAtItsRecordedPace) {
  const std::string path = dir_->File("paced.trace");
  {
    auto d = StartDaemon({"--volume", "vol0=16MiB", "--trace", path});
    ASSERT_NE(d, nullptr);
    // Two clients, an op every 40 ms each for about half a second.
    std::vector<std::thread> threads;
    for (int i = 0; i < 2; ++i) {
      threads.emplace_back([&d, i] {
        auto c = ConnectClient(*d);
        ASSERT_NE(c, nullptr);
        auto b = c->AllocateBuffer(kMiB);
        ASSERT_TRUE(b.ok());
        for (uint64_t k = 0; k < 12; ++k) {
          ASSERT_TRUE(c->Write({"vol0", (i * 12 + k) * 4096, 4096}, **b).ok());
          absl::SleepFor(absl::Milliseconds(40));
        }
      });
    }
    for (auto& t : threads) t.join();
    ASSERT_TRUE(d->Terminate(absl::Seconds(20)).ok());
  }
  absl::StatusOr<trace::Trace> t = trace::ReadTraceFile(path);
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->ops.size(), 24u);
  auto d = StartDaemon({"--volume", "vol0=16MiB"});
  ASSERT_NE(d, nullptr);
  ProcessResult r = Gdrctl(*d, {"replay", path, "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  const double recorded = JsonField(r.out, "\"recorded\":", "span_s");
  const double replayed = JsonField(r.out, "\"replayed\":", "span_s");
  EXPECT_EQ(JsonField(r.out, "", "clients"), 2) << r.out;
  ASSERT_GT(recorded, 0.3) << r.out;
  // Replay issues each op no earlier than its recorded offset, so it cannot take less than
  // the recorded starts span; how much longer depends on the machine's load: only printed.
  EXPECT_GE(replayed, 0.9 * recorded) << r.out;
  std::printf("recorded span %.3f s, replayed at recorded pace %.3f s (ratio %.2f)\n", recorded,
              replayed, replayed / recorded);
}

}  // namespace
}  // namespace gdr::integ
