// The example config shipped in deploy/systemd (and installed as /etc/gdrstored/gdrstored.conf)
// must parse, and say what its comments say.
#include <string>
#include <vector>

#include "daemon/ops/daemon_config.h"
#include "gtest/gtest.h"

namespace gdr {
namespace {

TEST(ExampleConfigTest, ShippedConfigParses) {
  std::vector<std::string> args = {"gdrstored", "--config",
                                   GDR_SOURCE_DIR "/deploy/systemd/gdrstored.conf"};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  absl::StatusOr<DaemonConfig> cfg = ParseDaemonConfig(static_cast<int>(argv.size()), argv.data());
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(cfg->listen, "127.0.0.1:50051");
  ASSERT_EQ(cfg->volumes.size(), 2u);
  EXPECT_EQ(cfg->volumes[0].name, "vol0");
  EXPECT_EQ(cfg->volumes[0].file, "");
  EXPECT_EQ(cfg->volumes[1].name, "nvme0");
  EXPECT_EQ(cfg->volumes[1].file, "/var/lib/gdrstored/nvme0.img");
  EXPECT_EQ(cfg->volumes[1].media.latency_us, 80u);
  EXPECT_EQ(cfg->volumes[1].media.bandwidth, 3ull << 30);
  EXPECT_EQ(cfg->tcp.links_per_target, 2u);
  EXPECT_EQ(cfg->tcp.max_links_per_target, 16u);
  EXPECT_EQ(cfg->drain_timeout, absl::Seconds(10));
  EXPECT_EQ(cfg->log_level, LogLevel::kInfo);
}

}  // namespace
}  // namespace gdr
