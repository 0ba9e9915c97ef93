// Unit tests of SIGHUP planning (daemon/reload.h): which changes apply live, which are reported
// as needing a restart, and what the effective configuration becomes.
#include "daemon/ops/reload.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gdr {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;

DaemonConfig Base() {
  DaemonConfig c;
  c.volumes = {{"a", 1 << 20, "", {}}, {"b", 2 << 20, "/srv/b.img", {}}};
  c.volumes[1].media.latency_us = 100;
  return c;
}

TEST(ReloadTest, NothingChanged) {
  ReloadPlan p = PlanReload(Base(), Base());
  EXPECT_THAT(p.applied, IsEmpty());
  EXPECT_THAT(p.needs_restart, IsEmpty());
}

TEST(ReloadTest, LiveSettingsApplyAndShowInEffective) {
  DaemonConfig next = Base();
  next.limits.max_op_bytes = 1 << 20;
  next.limits.max_inflight_ops = 7;
  next.log_level = LogLevel::kDebug;
  next.volumes[1].media.latency_us = 5000;
  next.volumes[1].media.bandwidth = 100 << 20;
  next.drain_timeout = absl::Seconds(3);
  ReloadPlan p = PlanReload(Base(), next);
  EXPECT_THAT(p.needs_restart, IsEmpty());
  EXPECT_THAT(p.applied,
              UnorderedElementsAre("max-op-size: 256 MiB -> 1 MiB", "max-inflight-ops: 4096 -> 7",
                                   "log-level: info -> debug", "drain-timeout: 10s -> 3s",
                                   "volume b media: latency_us=100 -> "
                                   "latency_us=5000,bandwidth=100MiB/s"));
  EXPECT_EQ(p.effective.limits.max_op_bytes, 1u << 20);
  EXPECT_EQ(p.effective.limits.max_inflight_ops, 7u);
  EXPECT_EQ(p.effective.log_level, LogLevel::kDebug);
  EXPECT_EQ(p.effective.volumes[1].media.latency_us, 5000u);
  EXPECT_EQ(p.effective.drain_timeout, absl::Seconds(3));
}

// A preset with an override replaces a fixed latency live, logged in the options' own syntax.
TEST(ReloadTest, MediaModelChangesApplyLive) {
  DaemonConfig next = Base();
  next.volumes[1].media = MediaSettings{};
  ASSERT_TRUE(SetMediaOption("media", "hdd", &next.volumes[1].media).ok());
  ASSERT_TRUE(SetMediaOption("queue_depth", "4", &next.volumes[1].media).ok());
  ReloadPlan p = PlanReload(Base(), next);
  EXPECT_THAT(p.needs_restart, IsEmpty());
  EXPECT_THAT(p.applied, ElementsAre("volume b media: latency_us=100 -> media=hdd,"
                                     "latency_us=8300,p99_us=25000,bandwidth=270000000/s,"
                                     "queue_depth=4"));
  EXPECT_EQ(p.effective.volumes[1].media, next.volumes[1].media);
  EXPECT_EQ(p.effective.volumes[0].media, MediaSettings{});
}

TEST(ReloadTest, RestartOnlySettingsAreReportedNotApplied) {
  DaemonConfig next = Base();
  next.listen = "0.0.0.0:1";
  next.tcp.chunk_bytes = 4096;
  next.limits.chunk_bytes = 4096;
  next.tcp.max_links = 3;
  next.tcp.max_links_per_target = 3;
  next.tcp.target_allow = {*Cidr::Parse("10.0.0.0/8"), *Cidr::Parse("fd00::/8")};
  next.volumes[0].size = 4 << 20;
  next.volumes[1].file = "/srv/other.img";
  next.volumes.push_back({"c", 1 << 20, {}, {}});
  next.volumes.erase(next.volumes.begin());  // a: removed (its size change is moot)
  ReloadPlan p = PlanReload(Base(), next);
  EXPECT_THAT(p.applied, IsEmpty());
  EXPECT_THAT(p.needs_restart,
              UnorderedElementsAre("listen: 127.0.0.1:50051 -> 0.0.0.0:1",
                                   "chunk-size: 1 MiB -> 4 KiB", "tcp-max-links: 64 -> 3",
                                   "tcp-max-links-per-target: 16 -> 3",
                                   "tcp-target-allow: (none) -> 10.0.0.0/8,fd00::/8",
                                   "volume b file: '/srv/b.img' -> '/srv/other.img'"));
  EXPECT_EQ(p.effective.listen, "127.0.0.1:50051");
  EXPECT_EQ(p.effective.tcp.chunk_bytes, 1u << 20);
  ASSERT_EQ(p.effective.volumes.size(), 2u);
  EXPECT_EQ(p.effective.volumes[1].file, "/srv/b.img");
}

// A repeating volume made again with another period would lose its bytes, as a resize would.
TEST(ReloadTest, RepeatChangeNeedsRestart) {
  DaemonConfig next = Base();
  next.volumes[0].repeat = 256 << 10;
  ReloadPlan p = PlanReload(Base(), next);
  EXPECT_THAT(p.applied, IsEmpty());
  EXPECT_THAT(p.needs_restart, ElementsAre("volume a repeat: 0 -> 262144 bytes"));
  EXPECT_EQ(p.effective.volumes[0].repeat, 0u);
}

// SIGHUP reopens the trace at its path; another path or cap is not taken live.
TEST(ReloadTest, TraceChangesNeedRestart) {
  DaemonConfig next = Base();
  next.trace = "/tmp/new.trace";
  next.trace_max_bytes = 1 << 20;
  ReloadPlan p = PlanReload(Base(), next);
  EXPECT_THAT(p.applied, IsEmpty());
  EXPECT_THAT(p.needs_restart, UnorderedElementsAre("trace:  -> /tmp/new.trace",
                                                    "trace-max-bytes: 256 MiB -> 1 MiB"));
  EXPECT_EQ(p.effective.trace, "");
}

// A volume added or removed is for the supervisor to make or delete (live); the effective
// volumes stay the running ones until it has. A changed definition is not remade.
TEST(ReloadTest, VolumesAddedAndRemovedArePlannedNotApplied) {
  DaemonConfig next = Base();
  next.volumes.erase(next.volumes.begin());  // a
  next.volumes[0].size = 8 << 20;            // b: changed
  next.volumes.push_back({"d", 2 << 20, "/srv/d.img", {}});
  next.volumes.push_back({"c", 1 << 20, {}, {}});
  ReloadPlan p = PlanReload(Base(), next);
  ASSERT_EQ(p.volumes_added.size(), 2u);
  EXPECT_EQ(p.volumes_added[0].name, "c");
  EXPECT_EQ(p.volumes_added[1].name, "d");
  EXPECT_EQ(p.volumes_added[1].file, "/srv/d.img");
  EXPECT_EQ(p.volumes_added[1].size, 2u << 20);
  EXPECT_THAT(p.volumes_removed, ElementsAre("a"));
  EXPECT_THAT(p.needs_restart, ElementsAre("volume b size: 2 MiB -> 8 MiB"));
  EXPECT_THAT(p.applied, IsEmpty());
  ASSERT_EQ(p.effective.volumes.size(), 2u);
  EXPECT_EQ(p.effective.volumes[0].name, "a");
  EXPECT_EQ(p.effective.volumes[1].size, 2u << 20);
}

TEST(ReloadTest, SizeChangeOfKeptVolumeNeedsRestart) {
  DaemonConfig next = Base();
  next.volumes[0].size = 4 << 20;
  ReloadPlan p = PlanReload(Base(), next);
  EXPECT_THAT(p.needs_restart, ElementsAre("volume a size: 1 MiB -> 4 MiB"));
  EXPECT_EQ(p.effective.volumes[0].size, 1u << 20);
}

TEST(ReloadTest, TokensApplyLiveAndAreNeverPrinted) {
  DaemonConfig current = Base();
  current.token_file = "/etc/gdrstored/tokens";
  current.tokens = *ParseTokenFile("first-token-0123456789 get=a", "t");
  DaemonConfig next = current;
  next.tokens = *ParseTokenFile("second-token-0123456789\nthird-token-0123456789\nsan:x", "t");
  ReloadPlan p = PlanReload(current, next);
  EXPECT_THAT(p.needs_restart, IsEmpty());
  EXPECT_THAT(p.applied, ElementsAre("tokens: 1 token -> 2 tokens, 1 certificate identity "
                                     "accepted, grants re-read (/etc/gdrstored/tokens)"));
  EXPECT_EQ(p.effective.tokens, next.tokens);

  // Same tokens, other grants: applied too (the grants are part of what is compared).
  DaemonConfig regranted = current;
  regranted.tokens = *ParseTokenFile("first-token-0123456789 get=a,b", "t");
  p = PlanReload(current, regranted);
  EXPECT_THAT(p.applied, ElementsAre("tokens: 1 token -> 1 token accepted, grants re-read "
                                     "(/etc/gdrstored/tokens)"));
  EXPECT_EQ(p.effective.tokens, regranted.tokens);

  DaemonConfig open = current;
  open.token_file.clear();
  open.tokens.clear();
  p = PlanReload(current, open);
  EXPECT_THAT(p.applied, ElementsAre("tokens: none needed any more"));
  EXPECT_THAT(p.effective.tokens, IsEmpty());
}

TEST(ReloadTest, DcSettingsNeedARestart) {
  DaemonConfig next = Base();
  next.dc.mode = dc::DcTransportConfig::Mode::kOff;
  next.dc.options.dci_count = 4;
  next.dc.options.ah.hop_limit = 8;
  ReloadPlan p = PlanReload(Base(), next);
  EXPECT_THAT(p.applied, IsEmpty());
  EXPECT_THAT(p.needs_restart,
              UnorderedElementsAre("dc: mode changed", "dci-count: 16 -> 4", "dc-hop-limit: 64 -> 8"));
  EXPECT_EQ(p.effective.dc.options.dci_count, 16u);
}

TEST(ReloadTest, TheRailListNeedsARestart) {
  DaemonConfig rails = Base();
  rails.verbs.rails = {"rxe0", "rxe1"};
  ReloadPlan p = PlanReload(Base(), rails);
  EXPECT_THAT(p.applied, IsEmpty());
  EXPECT_THAT(p.needs_restart, ElementsAre("rdma-device: (automatic) -> rxe0,rxe1"));
  EXPECT_THAT(p.effective.verbs.rails, ElementsAre(""));
  // Order is part of the list: the first rail is dc's and the default for rc.
  DaemonConfig swapped = Base();
  swapped.verbs.rails = {"rxe1", "rxe0"};
  p = PlanReload(rails, swapped);
  EXPECT_THAT(p.needs_restart, ElementsAre("rdma-device: rxe0,rxe1 -> rxe1,rxe0"));
  EXPECT_THAT(PlanReload(rails, rails).needs_restart, IsEmpty());
}

}  // namespace
}  // namespace gdr
