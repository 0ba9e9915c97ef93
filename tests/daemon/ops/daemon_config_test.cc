// Unit tests of gdrstored's flag and config-file parsing (daemon/daemon_config.h).
#include "daemon/ops/daemon_config.h"

#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gdr {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

absl::StatusOr<DaemonConfig> Parse(std::vector<std::string> args) {
  args.insert(args.begin(), "gdrstored");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  return ParseDaemonConfig(static_cast<int>(args.size()), argv.data());
}

// A private directory under $TMPDIR, removed with its contents.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "daemon_config_test.XXXXXX");
    EXPECT_NE(::mkdtemp(tmpl.data()), nullptr);
    path_ = tmpl;
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string Write(const std::string& name, const std::string& text) {
    const std::filesystem::path p = path_ / name;
    std::ofstream(p) << text;
    return p.string();
  }

 private:
  std::filesystem::path path_;
};

void ExpectInvalidNaming(const std::vector<std::string>& args, const std::string& flag) {
  absl::StatusOr<DaemonConfig> cfg = Parse(args);
  ASSERT_FALSE(cfg.ok()) << ::testing::PrintToString(args);
  EXPECT_EQ(cfg.status().code(), absl::StatusCode::kInvalidArgument)
      << ::testing::PrintToString(args) << ": " << cfg.status();
  EXPECT_THAT(cfg.status().message(), HasSubstr(flag)) << ::testing::PrintToString(args);
}

TEST(DaemonConfigTest, Defaults) {
  absl::StatusOr<DaemonConfig> cfg = Parse({});
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(cfg->listen, "127.0.0.1:50051");
  EXPECT_EQ(cfg->port_file, "");
  ASSERT_EQ(cfg->volumes.size(), 1u);
  EXPECT_EQ(cfg->volumes[0].name, "vol0");
  EXPECT_EQ(cfg->volumes[0].size, 256ull << 20);
  EXPECT_EQ(cfg->limits.max_op_bytes, 256ull << 20);
  EXPECT_EQ(cfg->limits.max_inflight_bytes, 4ull << 30);
  EXPECT_EQ(cfg->tcp.chunk_bytes, 1u << 20);
  EXPECT_EQ(cfg->limits.chunk_bytes, 1u << 20);
  EXPECT_EQ(cfg->limits.max_links, cfg->tcp.max_links);
  EXPECT_EQ(cfg->tcp.links_per_target, 2u);
  EXPECT_EQ(cfg->tcp.max_links_per_target, 16u);
  EXPECT_EQ(cfg->tcp.link.connect_timeout, absl::Seconds(3));
  EXPECT_EQ(cfg->tcp.op_timeout, absl::Seconds(30));
  EXPECT_EQ(cfg->tcp.idle_timeout, absl::Seconds(60));
  EXPECT_EQ(cfg->tcp.turn, absl::Milliseconds(200));
  EXPECT_EQ(cfg->tcp.handover_timeout, absl::Seconds(2));
  EXPECT_EQ(cfg->tcp.link.poll_spin, absl::ZeroDuration());
  EXPECT_EQ(cfg->tcp.inline_max, 16u << 10);
  EXPECT_EQ(cfg->drain_timeout, absl::Seconds(10));
  EXPECT_EQ(cfg->log_level, LogLevel::kInfo);
}

TEST(DaemonConfigTest, EveryFlagParses) {
  absl::StatusOr<DaemonConfig> cfg = Parse({
      "--listen", "127.0.0.1:0", "--port-file", "/run/gdr.port", "--volume", "a=4k",
      "--volume", "b=1MiB", "--max-op-size", "64MiB", "--chunk-size", "256KiB",
      "--max-inflight-per-stream", "17", "--max-inflight-ops", "99", "--max-inflight-bytes",
      "1GiB", "--tcp-max-links", "5", "--tcp-links-per-target", "3",
      "--tcp-max-links-per-target", "4", "--tcp-connect-timeout-ms", "1500", "--op-timeout-ms", "2500", "--tcp-idle-timeout-s",
      "7", "--tcp-link-turn-ms", "40", "--tcp-handover-timeout-ms", "900",
      "--tcp-poll-spin-us", "25", "--tcp-inline-max", "4KiB", "--drain-timeout-ms", "0",
      "--log-level", "debug"});
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(cfg->listen, "127.0.0.1:0");
  EXPECT_EQ(cfg->port_file, "/run/gdr.port");
  ASSERT_EQ(cfg->volumes.size(), 2u);
  EXPECT_EQ(cfg->volumes[0].name, "a");
  EXPECT_EQ(cfg->volumes[0].size, 4096u);
  EXPECT_EQ(cfg->volumes[1].name, "b");
  EXPECT_EQ(cfg->volumes[1].size, 1u << 20);
  EXPECT_EQ(cfg->limits.max_op_bytes, 64ull << 20);
  EXPECT_EQ(cfg->tcp.chunk_bytes, 256u << 10);
  EXPECT_EQ(cfg->limits.chunk_bytes, 256u << 10);
  EXPECT_EQ(cfg->limits.max_inflight_per_stream, 17u);
  EXPECT_EQ(cfg->limits.max_inflight_ops, 99u);
  EXPECT_EQ(cfg->limits.max_inflight_bytes, 1ull << 30);
  EXPECT_EQ(cfg->tcp.max_links, 5u);
  EXPECT_EQ(cfg->limits.max_links, 5u);
  EXPECT_EQ(cfg->tcp.links_per_target, 3u);
  EXPECT_EQ(cfg->tcp.max_links_per_target, 4u);
  EXPECT_EQ(cfg->tcp.link.connect_timeout, absl::Milliseconds(1500));
  EXPECT_EQ(cfg->tcp.op_timeout, absl::Milliseconds(2500));
  EXPECT_EQ(cfg->tcp.idle_timeout, absl::Seconds(7));
  EXPECT_EQ(cfg->tcp.turn, absl::Milliseconds(40));
  EXPECT_EQ(cfg->tcp.handover_timeout, absl::Milliseconds(900));
  EXPECT_EQ(cfg->tcp.link.poll_spin, absl::Microseconds(25));
  EXPECT_EQ(cfg->tcp.inline_max, 4096u);
  EXPECT_EQ(cfg->drain_timeout, absl::ZeroDuration());
  EXPECT_EQ(cfg->log_level, LogLevel::kDebug);
}

TEST(DaemonConfigTest, ConfigFile) {
  TempDir dir;
  const std::string path = dir.Write("gdrstored.conf",
                                     "# gdrstored test config\n"
                                     "listen = \"127.0.0.1:7001\"\n"
                                     "volume = [\"cfgvol=8KiB\", \"other=2MiB\"]\n"
                                     "max-op-size = \"8MiB\"\n"
                                     "chunk-size = \"64KiB\"\n"
                                     "max-inflight-ops = 33\n"
                                     "tcp-max-links = 9\n"
                                     "op-timeout-ms = 1234\n"
                                     "log-level = \"warning\"\n");
  absl::StatusOr<DaemonConfig> cfg = Parse({"--config", path});
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(cfg->listen, "127.0.0.1:7001");
  ASSERT_EQ(cfg->volumes.size(), 2u);
  EXPECT_EQ(cfg->volumes[0].name, "cfgvol");
  EXPECT_EQ(cfg->volumes[0].size, 8192u);
  EXPECT_EQ(cfg->volumes[1].name, "other");
  EXPECT_EQ(cfg->volumes[1].size, 2u << 20);
  EXPECT_EQ(cfg->limits.max_op_bytes, 8u << 20);
  EXPECT_EQ(cfg->tcp.chunk_bytes, 64u << 10);
  EXPECT_EQ(cfg->limits.max_inflight_ops, 33u);
  EXPECT_EQ(cfg->tcp.max_links, 9u);
  EXPECT_EQ(cfg->tcp.op_timeout, absl::Milliseconds(1234));
  EXPECT_EQ(cfg->log_level, LogLevel::kWarning);
  // Untouched keys keep their defaults.
  EXPECT_EQ(cfg->limits.max_inflight_bytes, 4ull << 30);
}

TEST(DaemonConfigTest, FlagsOverrideTheConfigFile) {
  TempDir dir;
  const std::string path = dir.Write("c.conf",
                                     "listen = \"127.0.0.1:7001\"\n"
                                     "max-op-size = \"8MiB\"\n");
  absl::StatusOr<DaemonConfig> cfg = Parse({"--config", path, "--max-op-size", "16MiB"});
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(cfg->listen, "127.0.0.1:7001");
  EXPECT_EQ(cfg->limits.max_op_bytes, 16u << 20);
}

TEST(DaemonConfigTest, BadValueInConfigFileNamesTheKey) {
  TempDir dir;
  const std::string path = dir.Write("bad.conf", "chunk-size = \"12parsecs\"\n");
  absl::StatusOr<DaemonConfig> cfg = Parse({"--config", path});
  EXPECT_EQ(cfg.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(cfg.status().message(), HasSubstr("chunk-size"));
}

TEST(DaemonConfigTest, MissingConfigFileIsInvalidArgument) {
  TempDir dir;
  absl::StatusOr<DaemonConfig> cfg = Parse({"--config", "/nonexistent/dir/gdrstored.conf"});
  EXPECT_EQ(cfg.status().code(), absl::StatusCode::kInvalidArgument);
}

// Found by tests/fuzz/daemon_config_fuzz (the exact file is its corpus entry
// regression_volume_given_twice): a repeated volume name passed the parse and only
// Store::Create refused it, so a SIGHUP reload planned (and applied the media timing of) a
// configuration the daemon cannot start with.
TEST(DaemonConfigTest, RepeatedVolumeNameInConfigFileIsRefused) {
  TempDir dir;
  const std::string path = dir.Write("dup.conf", "volume=v=1 v=1");
  absl::StatusOr<DaemonConfig> cfg = Parse({"--config", path});
  EXPECT_EQ(cfg.status().code(), absl::StatusCode::kInvalidArgument) << cfg.status();
  EXPECT_THAT(cfg.status().message(), HasSubstr("--volume: volume 'v' given twice"));
}

TEST(DaemonConfigTest, RepeatedVolumeFlagIsRefusedWhateverItsOptions) {
  ExpectInvalidNaming({"--volume", "a=1MiB", "--volume", "b=1MiB", "--volume",
                       "a=1MiB,latency_us=5"},
                      "volume 'a' given twice");
}

TEST(DaemonConfigTest, BadSizesNameTheFlag) {
  ExpectInvalidNaming({"--max-op-size", "12parsecs"}, "--max-op-size");
  ExpectInvalidNaming({"--max-op-size", "0"}, "--max-op-size");
  ExpectInvalidNaming({"--max-inflight-bytes", "lots"}, "--max-inflight-bytes");
  ExpectInvalidNaming({"--max-inflight-bytes", "0"}, "--max-inflight-bytes");
  ExpectInvalidNaming({"--chunk-size", "x"}, "--chunk-size");
  ExpectInvalidNaming({"--chunk-size", "4095"}, "--chunk-size");
  ExpectInvalidNaming({"--chunk-size", "65MiB"}, "--chunk-size");
  ExpectInvalidNaming({"--volume", "bad name=4k"}, "--volume");
  ExpectInvalidNaming({"--volume", "vol0=0"}, "--volume");
  ExpectInvalidNaming({"--log-level", "loud"}, "--log-level");
}

TEST(DaemonConfigTest, ChunkSizeBoundsAreInclusive) {
  EXPECT_TRUE(Parse({"--chunk-size", "4KiB"}).ok());
  EXPECT_TRUE(Parse({"--chunk-size", "64MiB"}).ok());
}

TEST(DaemonConfigTest, OutOfRangeNumbersNameTheFlag) {
  ExpectInvalidNaming({"--max-inflight-ops", "0"}, "--max-inflight-ops");
  ExpectInvalidNaming({"--max-inflight-per-stream", "0"}, "--max-inflight-per-stream");
  ExpectInvalidNaming({"--tcp-max-links", "0"}, "--tcp-max-links");
  ExpectInvalidNaming({"--tcp-max-links", "4097"}, "--tcp-max-links");
  ExpectInvalidNaming({"--tcp-links-per-target", "65"}, "--tcp-links-per-target");
  ExpectInvalidNaming({"--tcp-max-links-per-target", "0"}, "--tcp-max-links-per-target");
  ExpectInvalidNaming({"--tcp-connect-timeout-ms", "0"}, "--tcp-connect-timeout-ms");
  ExpectInvalidNaming({"--op-timeout-ms", "0"}, "--op-timeout-ms");
  ExpectInvalidNaming({"--tcp-idle-timeout-s", "0"}, "--tcp-idle-timeout-s");
  ExpectInvalidNaming({"--tcp-link-turn-ms", "0"}, "--tcp-link-turn-ms");
  ExpectInvalidNaming({"--tcp-handover-timeout-ms", "0"}, "--tcp-handover-timeout-ms");
  ExpectInvalidNaming({"--tcp-poll-spin-us", "10001"}, "--tcp-poll-spin-us");
  ExpectInvalidNaming({"--tcp-inline-max", "65537"}, "--tcp-inline-max");
  ExpectInvalidNaming({"--tcp-inline-max", "some"}, "--tcp-inline-max");
  ExpectInvalidNaming({"--drain-timeout-ms", "-1"}, "--drain-timeout-ms");
  ExpectInvalidNaming({"--max-inflight-ops", "many"}, "--max-inflight-ops");
}

// --tcp-max-links-per-target: given, it must lie between the share and the pool; not given,
// it is 16, or the pool when smaller, never below the share.
TEST(DaemonConfigTest, MaxLinksPerTargetIsCheckedOrDerived) {
  ExpectInvalidNaming({"--tcp-max-links-per-target", "1"}, "--tcp-max-links-per-target");
  ExpectInvalidNaming({"--tcp-links-per-target", "4", "--tcp-max-links-per-target", "3"},
                      "--tcp-links-per-target");
  ExpectInvalidNaming({"--tcp-max-links-per-target", "65"}, "--tcp-max-links-per-target");
  ExpectInvalidNaming({"--tcp-max-links", "8", "--tcp-max-links-per-target", "9"},
                      "--tcp-max-links (8)");
  absl::StatusOr<DaemonConfig> cfg = Parse({"--tcp-max-links-per-target", "64"});
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(cfg->tcp.max_links_per_target, 64u);
  cfg = Parse({"--tcp-max-links", "4"});
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(cfg->tcp.max_links_per_target, 4u);
  cfg = Parse({"--tcp-max-links", "1"});
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(cfg->tcp.max_links_per_target, 2u) << "never below the share";
  cfg = Parse({"--tcp-links-per-target", "32"});
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(cfg->tcp.max_links_per_target, 32u);
  TempDir dir;
  cfg = Parse({"--config", dir.Write("gdrstored.conf", "tcp-max-links-per-target = 8\n")});
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(cfg->tcp.max_links_per_target, 8u);
}

// --trace: off by default; a path and a cap by flag or by the config file's keys.
TEST(DaemonConfigTest, TraceFlagsAndKeys) {
  absl::StatusOr<DaemonConfig> cfg = Parse({});
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(cfg->trace, "");
  EXPECT_EQ(cfg->trace_max_bytes, uint64_t{256} << 20);
  cfg = Parse({"--trace", "/var/lib/gdrstored/ops.trace", "--trace-max-bytes", "1GiB"});
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(cfg->trace, "/var/lib/gdrstored/ops.trace");
  EXPECT_EQ(cfg->trace_max_bytes, uint64_t{1} << 30);
  TempDir dir;
  const std::string path =
      dir.Write("t.conf", "trace = \"/tmp/x.trace\"\ntrace-max-bytes = \"64KiB\"\n");
  cfg = Parse({"--config", path});
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(cfg->trace, "/tmp/x.trace");
  EXPECT_EQ(cfg->trace_max_bytes, 64u << 10);
  ExpectInvalidNaming({"--trace-max-bytes", "4095"}, "--trace-max-bytes");
  ExpectInvalidNaming({"--trace-max-bytes", "lots"}, "--trace-max-bytes");
}

// --tcp-target-allow: repeatable, a config-file list too, each CIDR validated at start.
TEST(DaemonConfigTest, TcpTargetAllowTakesCidrs) {
  absl::StatusOr<DaemonConfig> cfg = Parse({});
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_TRUE(cfg->tcp.target_allow.empty());
  cfg = Parse({"--tcp-target-allow", "10.0.0.0/8", "--tcp-target-allow", "fd00::/8"});
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  ASSERT_EQ(cfg->tcp.target_allow.size(), 2u);
  EXPECT_EQ(cfg->tcp.target_allow[0].ToString(), "10.0.0.0/8");
  EXPECT_EQ(cfg->tcp.target_allow[1].ToString(), "fd00::/8");
  TempDir dir;
  const std::string path =
      dir.Write("c.conf", "tcp-target-allow = [\"192.168.0.0/16\", \"127.0.0.2\"]\n");
  cfg = Parse({"--config", path});
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  ASSERT_EQ(cfg->tcp.target_allow.size(), 2u);
  EXPECT_EQ(cfg->tcp.target_allow[1].ToString(), "127.0.0.2/32");
  ExpectInvalidNaming({"--tcp-target-allow", "10.0.0.1/8"}, "--tcp-target-allow");
  ExpectInvalidNaming({"--tcp-target-allow", "10.0.0.0/40"}, "--tcp-target-allow");
  ExpectInvalidNaming({"--tcp-target-allow", "example.com/8"}, "--tcp-target-allow");
}

TEST(DaemonConfigTest, UnknownFlagIsInvalidArgument) {
  ExpectInvalidNaming({"--no-such-flag", "1"}, "--no-such-flag");
}

TEST(DaemonConfigTest, HelpIsCancelledWithTheHelpText) {
  absl::StatusOr<DaemonConfig> cfg = Parse({"--help"});
  ASSERT_FALSE(cfg.ok());
  EXPECT_TRUE(absl::IsCancelled(cfg.status())) << cfg.status();
  EXPECT_THAT(cfg.status().message(), HasSubstr("--volume"));
  EXPECT_THAT(cfg.status().message(), HasSubstr("--config"));
}

}  // namespace
}  // namespace gdr

namespace gdr {
namespace {

TEST(DaemonConfigDcTest, DefaultsAreAutoWithSixteenDcis) {
  absl::StatusOr<DaemonConfig> c = Parse({});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->dc.mode, dc::DcTransportConfig::Mode::kAuto);
  EXPECT_EQ(c->dc.options.dci_count, 16u);
  EXPECT_EQ(c->dc.options.dci.max_rd_atomic, 16);
  EXPECT_EQ(c->dc.options.ah.hop_limit, 64) << "hop limit 1 could not cross a router";
  EXPECT_TRUE(c->dc.options.use_streams);
}

TEST(DaemonConfigDcTest, EveryDcFlagParses) {
  absl::StatusOr<DaemonConfig> c =
      Parse({"--dc", "on", "--dci-count", "32", "--dc-sq-depth", "256", "--dc-max-rd-atomic", "8",
             "--dc-timeout", "18", "--dc-retry-cnt", "5", "--dc-rnr-retry", "6",
             "--dc-log-streams", "0", "--dc-hop-limit", "8", "--dc-traffic-class", "106",
             "--dc-sl", "3", "--dc-flow-label", "77", "--dc-ah-cache", "99", "--dc-spread", "2",
             "--dc-mtu", "1024"});
  ASSERT_TRUE(c.ok()) << c.status();
  const dc::DcInitiatorOptions& o = c->dc.options;
  EXPECT_EQ(c->dc.mode, dc::DcTransportConfig::Mode::kOn);
  EXPECT_EQ(o.dci_count, 32u);
  EXPECT_EQ(o.dci.sq_depth, 256u);
  EXPECT_EQ(o.dci.max_rd_atomic, 8);
  EXPECT_EQ(o.dci.timeout, 18);
  EXPECT_EQ(o.dci.retry_cnt, 5);
  EXPECT_EQ(o.dci.rnr_retry, 6);
  EXPECT_FALSE(o.use_streams);
  EXPECT_EQ(o.ah.hop_limit, 8);
  EXPECT_EQ(o.ah.traffic_class, 106);
  EXPECT_EQ(o.ah.service_level, 3);
  EXPECT_EQ(o.ah.flow_label, 77u);
  EXPECT_EQ(o.ah_cache_size, 99u);
  EXPECT_EQ(o.max_spread, 2u);
  EXPECT_EQ(o.mtu, 1024u);
}

TEST(DaemonConfigDcTest, BadDcValuesNameTheFlag) {
  struct Case {
    std::vector<std::string> args;
    const char* flag;
  } cases[] = {
      {{"--dc", "maybe"}, "--dc"},
      {{"--dci-count", "0"}, "--dci-count"},
      {{"--dci-count", "5000"}, "--dci-count"},
      {{"--dc-retry-cnt", "8"}, "--dc-retry-cnt"},
      {{"--dc-hop-limit", "0"}, "--dc-hop-limit"},
      {{"--dc-sl", "16"}, "--dc-sl"},
      {{"--dc-flow-label", "1048576"}, "--dc-flow-label"},
      // A DCI work request takes two send-queue slots: no mlx5 device holds 32768 of them.
      {{"--dc-sq-depth", "32768"}, "--dc-sq-depth"},
      {{"--dc-mtu", "1500"}, "--dc-mtu"},
      {{"--rdma-device", "mlx5_0", "--rc", "off", "--dc", "off"}, "--rdma-device"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<DaemonConfig> r = Parse(c.args);
    ASSERT_FALSE(r.ok()) << c.flag;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(r.status().message()), HasSubstr(c.flag));
  }
}

// dc runs on the verbs core, not on rc: it may run alone, and a named device is then dc's.
TEST(DaemonConfigDcTest, DcRunsWithoutRc) {
  absl::StatusOr<DaemonConfig> r = Parse({"--dc", "on", "--rc", "off"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->rc_mode, DaemonConfig::RcMode::kOff);
  EXPECT_TRUE(r->WantsRdmaDevice());
  EXPECT_TRUE(r->NeedsRdmaDevice());
  r = Parse({"--rdma-device", "mlx5_0", "--rc", "off"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(r->verbs.rails, ElementsAre("mlx5_0"));
  EXPECT_EQ(r->rc_mode, DaemonConfig::RcMode::kOff);
  EXPECT_TRUE(r->NeedsRdmaDevice()) << "a named device that does not open is fatal";
  r = Parse({"--rc", "off", "--dc", "off"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->WantsRdmaDevice());
  r = Parse({});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->WantsRdmaDevice());
  EXPECT_FALSE(r->NeedsRdmaDevice()) << "auto runs without a device";
}

// Rails: --rdma-device names one RDMA device per rail, in order, repeated or as a comma list.
TEST(DaemonConfigRailsTest, NoDeviceNamedIsOneAutomaticRail) {
  absl::StatusOr<DaemonConfig> r = Parse({});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(r->verbs.rails, ElementsAre(""));
  EXPECT_FALSE(r->verbs.NamesDevice());
  EXPECT_EQ(r->verbs.device.device, "") << "each rail's name comes from the rail list";
}

TEST(DaemonConfigRailsTest, CommaListAndRepeatsKeepTheirOrder) {
  absl::StatusOr<DaemonConfig> r = Parse({"--rdma-device", "rxe1,rxe0"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(r->verbs.rails, ElementsAre("rxe1", "rxe0"));
  EXPECT_EQ(r->rc_mode, DaemonConfig::RcMode::kOn) << "a named device turns rc on";
  EXPECT_TRUE(r->NeedsRdmaDevice());
  r = Parse({"--rdma-device", "mlx5_2", "--rdma-device", "mlx5_0,mlx5_1"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(r->verbs.rails, ElementsAre("mlx5_2", "mlx5_0", "mlx5_1"));
  r = Parse({"--rdma-device", "rxe0, rxe1"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(r->verbs.rails, ElementsAre("rxe0", "rxe1")) << "blanks around a name are dropped";
}

TEST(DaemonConfigRailsTest, ConfigFileTakesAListOrAnArray) {
  TempDir dir;
  absl::StatusOr<DaemonConfig> r =
      Parse({"--config", dir.Write("a.conf", "rdma-device = \"rxe0,rxe1\"\n")});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(r->verbs.rails, ElementsAre("rxe0", "rxe1"));
  r = Parse({"--config", dir.Write("b.conf", "rdma-device = [\"mlx5_1\", \"mlx5_0\"]\n")});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(r->verbs.rails, ElementsAre("mlx5_1", "mlx5_0"));
  r = Parse({"--config", dir.Write("c.conf", "rdma-device = \"mlx5_0\"\n")});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(r->verbs.rails, ElementsAre("mlx5_0"));
  // A flag on the command line wins over the file's list as a whole.
  r = Parse({"--config", dir.Write("d.conf", "rdma-device = \"rxe0,rxe1\"\n"), "--rdma-device",
             "rxe2"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(r->verbs.rails, ElementsAre("rxe2"));
}

TEST(DaemonConfigRailsTest, ADeviceNamedTwiceIsRefusedNamingIt) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--rdma-device", "rxe0,rxe1,rxe0"},
        std::vector<std::string>{"--rdma-device", "rxe0", "--rdma-device", "rxe0"}}) {
    absl::StatusOr<DaemonConfig> r = Parse(args);
    ASSERT_FALSE(r.ok()) << ::testing::PrintToString(args);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(r.status().message(), HasSubstr("--rdma-device"));
    EXPECT_THAT(r.status().message(), HasSubstr("'rxe0' is named twice"));
  }
}

TEST(DaemonConfigRailsTest, AnAddressWithSeveralRailsIsRefused) {
  absl::StatusOr<DaemonConfig> r =
      Parse({"--rdma-device", "rxe0,rxe1", "--rdma-addr", "10.11.0.1"});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("--rdma-addr"));
  EXPECT_THAT(r.status().message(), HasSubstr("2 rails (rxe0,rxe1)"));
  // One device with its address stays allowed, and an address alone is one named rail.
  r = Parse({"--rdma-device", "rxe0", "--rdma-addr", "10.11.0.1"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(r->verbs.rails, ElementsAre("rxe0"));
  r = Parse({"--rdma-addr", "10.11.0.1"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(r->verbs.rails, ElementsAre(""));
  EXPECT_TRUE(r->NeedsRdmaDevice());
}

TEST(DaemonConfigRailsTest, AnEmptyNameIsRefused) {
  ExpectInvalidNaming({"--rdma-device", "rxe0, "}, "--rdma-device: an empty device name");
}

}  // namespace
}  // namespace gdr

namespace gdr {
namespace {

TEST(DaemonConfigMetricsTest, OffByDefaultAndParsedFromFlagsAndFile) {
  absl::StatusOr<DaemonConfig> cfg = Parse({});
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(cfg->metrics_listen, "");
  cfg = Parse({"--metrics-listen", "127.0.0.1:0", "--metrics-port-file", "/tmp/p"});
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(cfg->metrics_listen, "127.0.0.1:0");
  EXPECT_EQ(cfg->metrics_port_file, "/tmp/p");
  cfg = Parse({"--metrics-listen", "[::1]:9100"});
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  TempDir dir;
  // The config file's key is the long flag's name, as for every other setting.
  const std::string path = dir.Write("m.conf", "metrics-listen = \"127.0.0.1:9187\"\n");
  cfg = Parse({"--config", path});
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(cfg->metrics_listen, "127.0.0.1:9187");
}

TEST(DaemonConfigMetricsTest, BadAddressesNameTheFlag) {
  for (const char* bad : {"localhost:9100", "127.0.0.1", "127.0.0.1:65536", "127.0.0.1:x",
                          "::1:9100", "[127.0.0.1]:9100", ":9100", "10.0.0.256:1"}) {
    ExpectInvalidNaming({"--metrics-listen", bad}, "--metrics-listen");
  }
  ExpectInvalidNaming({"--metrics-port-file", "/tmp/p"}, "--metrics-listen");
}

}  // namespace
}  // namespace gdr
