// GetStats and `gdrctl stats` against a real gdrstored: after a known mix of ops the counters
// are exact (per transport, per volume, errors by code), latency summaries are consistent, the
// pool and admission figures are live, and gdrctl renders them (text, --json, --watch).
#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gdrstore/client.h"
#include "tests/integration/daemon_process.h"
#include "tests/integration/stats_rpc.h"

namespace gdr::integ {
namespace {

namespace v1 = gdrstore::v1;

uint64_t ErrorCount(const v1::OpCounters& c, const std::string& name) {
  for (const auto& e : c.errors())
    if (e.name() == name) return e.count();
  return 0;
}

TEST(StatsTest, CountersMatchTheOpsAndGdrctlShowsThem) {
  auto d = DaemonProcess::Start({"--volume", "a=64MiB", "--volume",
                                 "b=16MiB,latency_us=200,bandwidth=1GiB", "--tcp-max-links", "9"});
  ASSERT_TRUE(d.ok()) << d.status();
  gdrstore::ClientOptions o;
  o.daemon_address = (*d)->address();
  auto c = gdrstore::Client::Connect(o);
  ASSERT_TRUE(c.ok());
  auto buf = (*c)->AllocateBuffer(1 << 20);
  ASSERT_TRUE(buf.ok());

  for (int i = 0; i < 7; ++i) ASSERT_TRUE((*c)->Write({"a", i * 1000u, 1000}, **buf).ok());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE((*c)->Read({"b", i * 65536u, 65536}, **buf).ok());
  EXPECT_EQ((*c)->Write({"nope", 0, 10}, **buf).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ((*c)->Write({"a", 64u << 20, 10}, **buf).status().code(),
            absl::StatusCode::kOutOfRange);
  EXPECT_EQ((*c)->Read({"b", 16u << 20, 1}, **buf).status().code(), absl::StatusCode::kOutOfRange);

  auto s = GetStats(**c);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->total().write_ops(), 7u);
  EXPECT_EQ(s->total().write_bytes(), 7000u);
  EXPECT_EQ(s->total().read_ops(), 3u);
  EXPECT_EQ(s->total().read_bytes(), 3u * 65536);
  EXPECT_EQ(ErrorCount(s->total(), "NOT_FOUND"), 1u);
  EXPECT_EQ(ErrorCount(s->total(), "OUT_OF_RANGE"), 2u);
  EXPECT_EQ(s->total().inflight_ops(), 0);
  EXPECT_EQ(s->total().write_latency().count(), 7u);
  EXPECT_EQ(s->total().read_latency().count(), 3u);
  for (const auto* l : {&s->total().write_latency(), &s->total().read_latency()}) {
    EXPECT_GT(l->p50_us(), 0);
    EXPECT_LE(l->p50_us(), l->p90_us());
    EXPECT_LE(l->p90_us(), l->p99_us());
    EXPECT_LE(l->p99_us(), l->max_us());
  }
  // Reads on b waited for 200 us of simulated latency plus 64 KiB at 1 GiB/s.
  EXPECT_GE(s->total().read_latency().p50_us(), 200);

  ASSERT_EQ(s->transports_size(), 4);  // tcp, rc, dc, local: counters for every kind
  const v1::TransportStats* tcp = nullptr;
  for (const auto& t : s->transports())
    if (t.transport() == v1::TRANSPORT_TCP) tcp = &t;
  ASSERT_NE(tcp, nullptr);
  EXPECT_EQ(tcp->ops().write_ops(), 7u);
  EXPECT_EQ(tcp->ops().read_ops(), 3u);
  EXPECT_EQ(tcp->pool().capacity(), 9u);
  EXPECT_GE(tcp->pool().in_use(), 1u);
  EXPECT_EQ(tcp->pool().destinations(), 1u);

  ASSERT_EQ(s->volumes_size(), 2);
  EXPECT_EQ(s->volumes(0).name(), "a");
  EXPECT_EQ(s->volumes(0).ops().write_ops(), 7u);
  EXPECT_EQ(s->volumes(0).ops().read_ops(), 0u);
  EXPECT_EQ(ErrorCount(s->volumes(0).ops(), "OUT_OF_RANGE"), 1u);
  EXPECT_EQ(s->volumes(1).name(), "b");
  EXPECT_EQ(s->volumes(1).ops().read_ops(), 3u);
  EXPECT_EQ(ErrorCount(s->volumes(1).ops(), "OUT_OF_RANGE"), 1u);
  EXPECT_EQ(s->volumes(1).media().latency_us(), 200u);
  EXPECT_EQ(s->volumes(1).media().bandwidth_bytes_per_sec(), 1u << 30);
  EXPECT_EQ(s->admission().inflight_ops(), 0u);
  EXPECT_EQ(s->admission().max_inflight_ops(), 4096u);
  EXPECT_GT(s->uptime_ns(), 0u);

  // gdrctl stats: text, JSON and --watch.
  auto dir = TempDir::Create("gdr-stats");
  ASSERT_TRUE(dir.ok());
  auto text = RunProcess({GDR_GDRCTL_BIN, "--daemon", (*d)->address(), "stats"}, (*dir)->path(),
                         "text", absl::Seconds(30));
  ASSERT_TRUE(text.ok());
  ASSERT_EQ(text->exit_code, 0) << text->Describe();
  EXPECT_TRUE(absl::StrContains(text->out, "transport tcp  (pool 1/9 in use, 1 clients)"))
      << text->out;
  EXPECT_TRUE(absl::StrContains(text->out, "errors: NOT_FOUND=1 OUT_OF_RANGE=2")) << text->out;
  EXPECT_TRUE(absl::StrContains(text->out, "volume b  (media latency 200 us, bandwidth 1.07 GB/s)"))
      << text->out;
  auto json = RunProcess({GDR_GDRCTL_BIN, "--daemon", (*d)->address(), "--json", "stats"},
                         (*dir)->path(), "json", absl::Seconds(30));
  ASSERT_TRUE(json.ok());
  ASSERT_EQ(json->exit_code, 0) << json->Describe();
  EXPECT_TRUE(absl::StrContains(json->out, "\"write_ops\":\"7\"")) << json->out;
  auto watch = RunProcess({GDR_GDRCTL_BIN, "--daemon", (*d)->address(), "stats", "--watch",
                           "--count", "3", "--interval", "0.2"},
                          (*dir)->path(), "watch", absl::Seconds(30));
  ASSERT_TRUE(watch.ok());
  ASSERT_EQ(watch->exit_code, 0) << watch->Describe();
  const std::vector<std::string> samples = absl::StrSplit(watch->out, "--\n", absl::SkipEmpty());
  EXPECT_EQ(samples.size(), 3u) << watch->out;
  EXPECT_TRUE(absl::StrContains(watch->out, "ops/s")) << watch->out;  // rates from sample 2 on

  // A daemon that is gone: a clear error and exit 1.
  ASSERT_TRUE((*d)->Terminate(absl::Seconds(30)).ok());
  auto gone = RunProcess({GDR_GDRCTL_BIN, "--daemon", (*d)->address(), "--timeout-ms", "2000",
                          "stats"},
                         (*dir)->path(), "gone", absl::Seconds(30));
  ASSERT_TRUE(gone.ok());
  EXPECT_EQ(gone->exit_code, 1) << gone->Describe();
  EXPECT_TRUE(absl::StrContains(gone->err, "UNAVAILABLE") ||
              absl::StrContains(gone->err, "DEADLINE_EXCEEDED"))
      << gone->Describe();
}

}  // namespace
}  // namespace gdr::integ
