// gdrstored's local-transport flags (daemon/ops/local_flags.h) through the real parser: off by
// default, every setting read from flags and from the config file, and each bad value refused
// naming its flag.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "daemon/ops/daemon_config.h"
#include "daemon/ops/reload.h"
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

void ExpectRefused(const std::vector<std::string>& args, const std::string& text) {
  absl::StatusOr<DaemonConfig> cfg = Parse(args);
  ASSERT_FALSE(cfg.ok()) << ::testing::PrintToString(args);
  EXPECT_EQ(cfg.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(cfg.status().message()), HasSubstr(text));
}

TEST(LocalFlagsTest, OffUnlessASocketIsNamed) {
  absl::StatusOr<DaemonConfig> cfg = Parse({});
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_TRUE(cfg->local.socket_path.empty());
  EXPECT_EQ(cfg->local.copy_threads, 8u);
  EXPECT_EQ(cfg->local.split_bytes, 16u << 20);
  EXPECT_EQ(cfg->local.max_bytes_per_client, 0u);
  EXPECT_EQ(cfg->local.max_regions_per_client, 4096u);
  EXPECT_EQ(cfg->local.fd_reserve, 0u);  // derived from RLIMIT_NOFILE
  EXPECT_EQ(cfg->local.socket_mode, -1);
  EXPECT_EQ(cfg->local.lock_piece_bytes, 128u << 20);
  EXPECT_EQ(cfg->local.lock_threads, 2u);
  EXPECT_EQ(cfg->local.lock_idle_ms, 100u);
  EXPECT_TRUE(cfg->local.lock_at_start);
  EXPECT_FALSE(cfg->local.lock_budget_bytes.has_value());  // auto: half of MemTotal
  // A local setting without the socket is a mistake, named.
  ExpectRefused({"--local-allow-uid", "1000"}, "--local-allow-uid configures the local transport");
  ExpectRefused({"--local-copy-threads", "8"}, "without --local-socket");
}

TEST(LocalFlagsTest, EverySettingFromFlags) {
  absl::StatusOr<DaemonConfig> cfg =
      Parse({"--local-socket", "/run/x/local.sock", "--local-allow-uid", "1000,root",
             "--local-allow-uid", "1001", "--local-allow-gid", "27,root", "--local-socket-mode",
             "0660", "--local-max-bytes-per-client", "64GiB", "--local-max-clients", "16",
             "--local-copy-threads", "8", "--local-split-size", "2MiB",
             "--local-max-regions-per-client", "64", "--local-fd-reserve", "200"});
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  const LocalOptions& o = cfg->local;
  EXPECT_EQ(o.socket_path, "/run/x/local.sock");
  EXPECT_THAT(o.allow_uids, ElementsAre(1000u, 0u, 1001u));  // "root" resolved by name
  EXPECT_THAT(o.allow_gids, ElementsAre(27u, 0u));
  EXPECT_FALSE(o.allow_any);
  EXPECT_EQ(o.socket_mode, 0660);
  EXPECT_EQ(o.max_bytes_per_client, uint64_t{64} << 30);
  EXPECT_EQ(o.max_clients, 16u);
  EXPECT_EQ(o.max_regions_per_client, 64u);
  EXPECT_EQ(o.fd_reserve, 200u);
  EXPECT_EQ(o.copy_threads, 8u);
  EXPECT_EQ(o.split_bytes, 2u << 20);
  cfg = Parse({"--local-socket", "/run/x/local.sock", "--local-lock-piece-size", "64MiB",
               "--local-lock-threads", "4", "--local-lock-idle-ms", "0", "--local-lock-at-start",
               "false", "--local-lock-budget", "10GiB"});
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(cfg->local.lock_piece_bytes, 64u << 20);
  EXPECT_EQ(cfg->local.lock_threads, 4u);
  EXPECT_EQ(cfg->local.lock_idle_ms, 0u);
  EXPECT_FALSE(cfg->local.lock_at_start);
  EXPECT_EQ(cfg->local.lock_budget_bytes, std::optional<uint64_t>(uint64_t{10} << 30));
  cfg = Parse({"--local-socket", "/run/x/local.sock", "--local-lock-budget", "0"});
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(cfg->local.lock_budget_bytes, std::optional<uint64_t>(0));  // never, not auto
  cfg = Parse({"--local-socket", "/run/x/local.sock", "--local-allow-uid", "*"});
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_TRUE(cfg->local.allow_any);
}

TEST(LocalFlagsTest, FromTheConfigFileAndAReloadSaysRestart) {
  char tmpl[] = "/tmp/local_flags_test.XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string file = std::string(tmpl) + "/gdrstored.conf";
  std::ofstream(file) << "local-socket = \"/run/gdrstored/local.sock\"\n"
                         "local-allow-gid = [\"0\", \"44\"]\n"
                         "local-copy-threads = 2\n"
                         "local-max-regions-per-client = 32\n"
                         "local-fd-reserve = \"64\"\n"
                         "local-lock-threads = 3\n"
                         "local-lock-at-start = false\n"
                         "local-lock-budget = \"1GiB\"\n";
  absl::StatusOr<DaemonConfig> cfg = Parse({"--config", file});
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(cfg->local.socket_path, "/run/gdrstored/local.sock");
  EXPECT_THAT(cfg->local.allow_gids, ElementsAre(0u, 44u));
  EXPECT_EQ(cfg->local.copy_threads, 2u);
  EXPECT_EQ(cfg->local.max_regions_per_client, 32u);
  EXPECT_EQ(cfg->local.fd_reserve, 64u);
  EXPECT_EQ(cfg->local.lock_threads, 3u);
  EXPECT_FALSE(cfg->local.lock_at_start);
  EXPECT_EQ(cfg->local.lock_budget_bytes, std::optional<uint64_t>(uint64_t{1} << 30));
  absl::StatusOr<DaemonConfig> off = Parse({});
  ASSERT_TRUE(off.ok());
  const ReloadPlan plan = PlanReload(*cfg, *off);
  EXPECT_THAT(plan.needs_restart,
              ::testing::Contains(HasSubstr("local-socket: /run/gdrstored/local.sock -> ")));
  EXPECT_THAT(plan.needs_restart, ::testing::Contains(HasSubstr("local-allow-gid: 0,44 -> ")));
  EXPECT_THAT(plan.needs_restart,
              ::testing::Contains(HasSubstr("local-max-regions-per-client: 32 -> 4096")));
  EXPECT_THAT(plan.needs_restart, ::testing::Contains(HasSubstr("local-fd-reserve: 64 -> auto")));
  EXPECT_THAT(plan.needs_restart,
              ::testing::Contains(HasSubstr("local-lock-budget: 1 GiB -> auto")));
  EXPECT_THAT(plan.needs_restart,
              ::testing::Contains(HasSubstr("local-lock-at-start: false -> true")));
  EXPECT_THAT(plan.needs_restart, ::testing::Contains(HasSubstr("local-lock-threads: 3 -> 2")));
  EXPECT_TRUE(plan.applied.empty());
  std::filesystem::remove_all(tmpl);
}

TEST(LocalFlagsTest, BadValuesNameTheirFlag) {
  const std::string s = "/run/x/local.sock";
  ExpectRefused({"--local-socket", "/" + std::string(120, 'a')},
                "a Unix socket's may be 107 at most");
  ExpectRefused({"--local-socket", s, "--local-socket-mode", "0899"},
                "--local-socket-mode '0899' is not an octal mode");
  ExpectRefused({"--local-socket", s, "--local-socket-mode", "17777"}, "--local-socket-mode");
  ExpectRefused({"--local-socket", s, "--local-allow-uid", "no-such-user-gdr"},
                "--local-allow-uid: 'no-such-user-gdr' is not a user of this host");
  ExpectRefused({"--local-socket", s, "--local-allow-gid", "no-such-group-gdr"},
                "is not a group of this host");
  ExpectRefused({"--local-socket", s, "--local-max-bytes-per-client", "lots"},
                "--local-max-bytes-per-client");
  ExpectRefused({"--local-socket", s, "--local-split-size", "1KiB"},
                "--local-split-size must be a size between 4KiB and 1GiB");
  ExpectRefused({"--local-socket", s, "--local-copy-threads", "0"}, "--local-copy-threads");
  ExpectRefused({"--local-socket", s, "--local-max-regions-per-client", "0"},
                "--local-max-regions-per-client");
  ExpectRefused({"--local-socket", s, "--local-fd-reserve", "lots"},
                "--local-fd-reserve 'lots' is neither auto nor a number");
  ExpectRefused({"--local-fd-reserve", "64"}, "--local-fd-reserve configures the local transport");
  ExpectRefused({"--local-socket", s, "--local-lock-piece-size", "1001KiB"},
                "--local-lock-piece-size must be a multiple of 4KiB");
  ExpectRefused({"--local-socket", s, "--local-lock-piece-size", "2KiB"},
                "--local-lock-piece-size");
  ExpectRefused({"--local-socket", s, "--local-lock-threads", "0"}, "--local-lock-threads");
  ExpectRefused({"--local-socket", s, "--local-lock-budget", "most"},
                "--local-lock-budget 'most' is neither auto nor a size");
  ExpectRefused({"--local-lock-budget", "1GiB"}, "--local-lock-budget configures the local");
}

}  // namespace
}  // namespace gdr
