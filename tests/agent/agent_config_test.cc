// gdragent's flags: what it needs (a daemon), what it refuses (a relative or too long socket
// path, a mode that locks its owner out, a malformed size), and what the flags become.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "agent/agent_config.h"

namespace gdr::agent {
namespace {

using ::testing::HasSubstr;

absl::StatusOr<AgentConfig> Parse(std::vector<std::string> args) {
  args.insert(args.begin(), "gdragent");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  return ParseAgentConfig(static_cast<int>(argv.size()), argv.data());
}

// Why `args` are refused ("" when they are not).
std::string Why(std::vector<std::string> args) {
  return std::string(Parse(std::move(args)).status().message());
}

TEST(AgentConfigTest, FlagsBecomeTheSettings) {
  auto cfg = Parse({"--daemon", "10.0.0.7:50051", "--socket", "/run/x/agent.sock",
                    "--socket-mode", "0666", "--allow-uid", "1000", "--allow-uid", "1001",
                    "--allow-gid", "2000", "--max-bytes-per-client", "2GiB",
                    "--max-ops-per-client", "64", "--upstream-timeout-ms", "5000",
                    "--upstream-streams", "8", "--transport", "tcp"});
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(cfg->daemons, (std::vector<std::string>{"10.0.0.7:50051"}));
  EXPECT_EQ(cfg->socket_path, "/run/x/agent.sock");
  EXPECT_EQ(cfg->socket_mode, 0666u);
  EXPECT_EQ(cfg->allow_uids, (std::vector<uid_t>{1000, 1001}));
  EXPECT_EQ(cfg->allow_gids, (std::vector<gid_t>{2000}));
  EXPECT_EQ(cfg->max_bytes_per_client, 2ull << 30);
  EXPECT_EQ(cfg->max_ops_per_client, 64u);
  EXPECT_EQ(cfg->upstream.rpc_timeout, std::chrono::milliseconds(5000));
  EXPECT_EQ(cfg->upstream_streams, 8u);
  EXPECT_EQ(cfg->upstream.transport, gdrstore::Transport::kTcp);
}

TEST(AgentConfigTest, DefaultsAreTheDocumentedOnes) {
  auto cfg = Parse({"--daemon", "127.0.0.1:50051"});
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(cfg->socket_path, "/run/gdragent/agent.sock");
  EXPECT_EQ(cfg->socket_mode, 0660u);
  EXPECT_TRUE(cfg->allow_uids.empty());
  EXPECT_EQ(cfg->max_bytes_per_client, 0u);
  EXPECT_EQ(cfg->max_ops_per_client, 1024u);
  EXPECT_EQ(cfg->max_streams_per_client, 256u);
  EXPECT_EQ(cfg->max_channels_per_client, 0u);  // derived from RLIMIT_NOFILE
  EXPECT_EQ(cfg->fd_reserve, 0u);               // likewise
}

TEST(AgentConfigTest, DescriptorLimitsAreAutoOrACount) {
  auto cfg = Parse({"--daemon", "127.0.0.1:1", "--max-channels-per-client", "8",
                    "--fd-reserve", "100", "--max-streams-per-client", "16"});
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(cfg->max_channels_per_client, 8u);
  EXPECT_EQ(cfg->fd_reserve, 100u);
  EXPECT_EQ(cfg->max_streams_per_client, 16u);
  cfg = Parse({"--daemon", "127.0.0.1:1", "--max-channels-per-client", "auto", "--fd-reserve",
               "auto"});
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(cfg->max_channels_per_client, 0u);
  EXPECT_EQ(cfg->fd_reserve, 0u);
  for (const char* bad : {"0", "-1", "many", "5000"}) {
    EXPECT_THAT(Why({"--daemon", "127.0.0.1:1", "--max-channels-per-client", bad}),
                HasSubstr("--max-channels-per-client"));
  }
  EXPECT_THAT(Why({"--daemon", "127.0.0.1:1", "--fd-reserve", "0"}),
              HasSubstr("--fd-reserve '0' is neither auto nor a number"));
  EXPECT_FALSE(Parse({"--daemon", "127.0.0.1:1", "--max-streams-per-client", "0"}).ok());
}

TEST(AgentConfigTest, RefusesWhatCannotWork) {
  EXPECT_THAT(Why({}), HasSubstr("--daemon"));
  EXPECT_THAT(Why({"--daemon", "nohostport"}), HasSubstr("--daemon"));
  EXPECT_THAT(Why({"--daemon", "127.0.0.1:1", "--socket", "agent.sock"}), HasSubstr("absolute"));
  EXPECT_THAT(Why({"--daemon", "127.0.0.1:1", "--socket", "/" + std::string(200, 'a')}),
              HasSubstr("longer than a Unix socket path"));
  EXPECT_THAT(Why({"--daemon", "127.0.0.1:1", "--socket-mode", "0066"}), HasSubstr("owner"));
  EXPECT_THAT(Why({"--daemon", "127.0.0.1:1", "--socket-mode", "rw"}), HasSubstr("octal"));
  EXPECT_THAT(Why({"--daemon", "127.0.0.1:1", "--max-bytes-per-client", "lots"}),
              HasSubstr("--max-bytes-per-client"));
  EXPECT_FALSE(Parse({"--daemon", "127.0.0.1:1", "--transport", "carrier-pigeon"}).ok());
  EXPECT_FALSE(Parse({"--daemon", "127.0.0.1:1", "--max-ops-per-client", "0"}).ok());
  EXPECT_THAT(Why({"--daemon", "127.0.0.1:1", "--tls-cert", "/x.pem"}), HasSubstr("--tls-key"));
}

// The connection flags gdrctl takes too (gdrstore/connection_options.h) reach the upstream
// client through the library's one conversion, and no GDRSTORE_* variable stands in for one.
TEST(AgentConfigTest, ConnectionFlagsBecomeTheUpstreamOptions) {
  ::setenv("GDRSTORE_REQUIRE", "agent", 1);
  ::setenv("GDRSTORE_TLS_CA", "/from/the/environment.pem", 1);
  auto cfg = Parse({"--daemon", "127.0.0.1:1", "--transport", "local", "--local-socket",
                    "/run/gdrstored/handoff.sock", "--crc", "--fail-when-full",
                    "--rdma-device", "mlx5_1", "--rails", "rxe0, rxe1", "--rc-qps", "4",
                    "--slice-size", "4MiB"});
  ::unsetenv("GDRSTORE_REQUIRE");
  ::unsetenv("GDRSTORE_TLS_CA");
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  const gdrstore::ClientOptions& o = cfg->upstream;
  EXPECT_EQ(o.transport, gdrstore::Transport::kLocal);
  EXPECT_EQ(o.local_socket, "/run/gdrstored/handoff.sock");
  EXPECT_TRUE(o.crc32c);
  EXPECT_TRUE(o.fail_when_full);
  EXPECT_EQ(o.rdma_device, "mlx5_1");
  EXPECT_EQ(o.rails, (std::vector<std::string>{"rxe0", "rxe1"}));
  EXPECT_EQ(o.rc_qps, 4u);
  EXPECT_EQ(o.slice_bytes, 4u << 20);
  EXPECT_EQ(o.require, "");
  EXPECT_EQ(o.tls_ca, "");
  auto required = Parse({"--daemon", "127.0.0.1:1", "--require", "rc,dma-buf"});
  ASSERT_TRUE(required.ok()) << required.status();
  EXPECT_EQ(required->upstream.require, "rc,dma-buf");
  EXPECT_THAT(Why({"--daemon", "127.0.0.1:1", "--rails", " , "}), HasSubstr("--rails"));
  EXPECT_THAT(Why({"--daemon", "127.0.0.1:1", "--slice-size", "0"}), HasSubstr("--slice-size"));
  EXPECT_THAT(Why({"--daemon", "127.0.0.1:1", "--slice-size", "lots"}),
              HasSubstr("--slice-size 'lots'"));
  EXPECT_THAT(Why({"--daemon", "127.0.0.1:1", "--token-file", "/nonexistent/tokens"}),
              HasSubstr("--token-file: "));
}

TEST(AgentConfigTest, DaemonsAreNamedOneByOneOrAsACluster) {
  auto cfg = Parse({"--daemon", "10.0.0.7:50051", "--daemon", "10.0.0.8:50051"});
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(cfg->daemons, (std::vector<std::string>{"10.0.0.7:50051", "10.0.0.8:50051"}));
  cfg = Parse({"--cluster", "etcd://127.0.0.1:2379/gdr", "--cluster-workers", "4"});
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_TRUE(cfg->daemons.empty());
  EXPECT_EQ(cfg->cluster_url, "etcd://127.0.0.1:2379/gdr");
  EXPECT_EQ(cfg->cluster_workers, 4u);
  cfg = Parse({"--cluster-file", "/etc/gdr/members.json"});
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(cfg->cluster_file, "/etc/gdr/members.json");

  EXPECT_THAT(Why({"--daemon", "10.0.0.7:1", "--daemon", "10.0.0.7:1"}), HasSubstr("named twice"));
  EXPECT_THAT(Why({"--daemon", "10.0.0.7:1", "--cluster", "etcd://127.0.0.1:2379/gdr"}),
              HasSubstr("give one"));
  EXPECT_THAT(Why({"--cluster", "127.0.0.1:2379"}), HasSubstr("etcd://"));
  EXPECT_THAT(Why({"--cluster-file", "/m.json", "--transport", "local"}),
              HasSubstr("--transport local"));
  EXPECT_THAT(Why({"--cluster-file", "/m.json", "--cluster-workers", "0"}),
              HasSubstr("--cluster-workers"));
}

TEST(AgentConfigTest, ADaemonServiceIsANameAndAPort) {
  auto cfg = Parse({"--daemon-service", "gdrstored.storage.svc:50051",
                    "--resolve-interval-ms", "2500"});
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(cfg->daemon_service, "gdrstored.storage.svc:50051");
  EXPECT_EQ(cfg->resolve_interval, absl::Milliseconds(2500));
  EXPECT_TRUE(cfg->daemons.empty());
  EXPECT_EQ(Parse({"--daemon-service", "s:1"})->resolve_interval, absl::Seconds(10));

  EXPECT_THAT(Why({"--daemon-service", "gdrstored.storage.svc"}),
              HasSubstr("--daemon-service 'gdrstored.storage.svc'"));
  EXPECT_THAT(Why({"--daemon-service", "s:1", "--daemon", "10.0.0.7:1"}), HasSubstr("give one"));
  EXPECT_THAT(Why({"--daemon-service", "s:1", "--transport", "local"}),
              HasSubstr("--transport local"));
  EXPECT_THAT(Why({"--daemon-service", "s:1", "--resolve-interval-ms", "0"}),
              HasSubstr("--resolve-interval-ms"));
}

TEST(AgentConfigTest, AClusterInEtcdMayBeReachedOverTls) {
  auto cfg = Parse({"--cluster", "etcd://etcd:2379/gdr", "--cluster-tls-ca", "/t/ca.crt",
                    "--cluster-tls-cert", "/t/tls.crt", "--cluster-tls-key", "/t/tls.key"});
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(cfg->cluster_tls_ca, "/t/ca.crt");
  EXPECT_EQ(cfg->cluster_tls_cert, "/t/tls.crt");
  EXPECT_EQ(cfg->cluster_tls_key, "/t/tls.key");
  EXPECT_THAT(Why({"--daemon", "10.0.0.7:1", "--cluster-tls-ca", "/t/ca.crt"}),
              HasSubstr("need --cluster etcd://"));
  EXPECT_THAT(Why({"--cluster", "etcd://etcd:2379/gdr", "--cluster-tls-key", "/t/tls.key"}),
              HasSubstr("go together"));
}

TEST(AgentConfigTest, ThePackagedConfigParses) {
  auto cfg = Parse({"--config", GDR_SOURCE_DIR "/deploy/systemd/gdragent.conf"});
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(cfg->socket_path, "/run/gdragent/agent.sock");
  EXPECT_EQ(cfg->socket_mode, 0666u);
  EXPECT_EQ(cfg->daemons, (std::vector<std::string>{"127.0.0.1:50051"}));
  EXPECT_EQ(cfg->max_ops_per_client, 1024u);
  EXPECT_EQ(cfg->max_channels_per_client, 0u);
  EXPECT_EQ(cfg->fd_reserve, 0u);
  // A flag wins over the file.
  cfg = Parse({"--config", GDR_SOURCE_DIR "/deploy/systemd/gdragent.conf", "--daemon",
               "10.1.1.1:7000"});
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(cfg->daemons, (std::vector<std::string>{"10.1.1.1:7000"}));
}

TEST(AgentConfigTest, HelpIsNotAnError) {
  auto cfg = Parse({"--help"});
  EXPECT_TRUE(absl::IsCancelled(cfg.status()));
  EXPECT_THAT(std::string(cfg.status().message()), HasSubstr("--allow-uid"));
}

}  // namespace
}  // namespace gdr::agent
