// A whole daemon in-process: Daemon::Start on a loopback port, Ping and GetInfo through real
// gRPC, then Stop (the drain SIGTERM runs).
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "daemon/ops/daemon.h"
#include "gdrstore/v1/gdrstore.grpc.pb.h"

namespace gdr {
namespace {

namespace v1 = gdrstore::v1;

TEST(DaemonTest, ServesPingAndGetInfoOnALoopbackPortAndStops) {
  DaemonConfig config;
  config.listen = "127.0.0.1:0";
  config.volumes = {{"vol0", 1 << 20, {}, {}}};
  config.rc_mode = DaemonConfig::RcMode::kOff;
  config.dc.mode = dc::DcTransportConfig::Mode::kOff;
  config.drain_timeout = absl::Seconds(2);
  absl::StatusOr<std::unique_ptr<Daemon>> daemon = Daemon::Start(config);
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  ASSERT_NE((*daemon)->port(), 0);

  auto channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", (*daemon)->port()),
                                     grpc::InsecureChannelCredentials());
  auto stub = v1::GdrStore::NewStub(channel);
  {
    grpc::ClientContext ctx;
    v1::PingRequest req;
    v1::PingResponse resp;
    grpc::Status s = stub->Ping(&ctx, req, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
  }
  {
    grpc::ClientContext ctx;
    v1::GetInfoRequest req;
    v1::GetInfoResponse resp;
    grpc::Status s = stub->GetInfo(&ctx, req, &resp);
    ASSERT_TRUE(s.ok()) << s.error_message();
    ASSERT_EQ(resp.volumes_size(), 1);
    EXPECT_EQ(resp.volumes(0).name(), "vol0");
    EXPECT_EQ(resp.volumes(0).size(), 1u << 20);
    EXPECT_FALSE(resp.version().empty());
  }
  EXPECT_EQ((*daemon)->Stop(), 0);
  EXPECT_EQ((*daemon)->Stop(), 0);  // idempotent
}

TEST(DaemonTest, AStartUpFailureIsReturnedNotFatal) {
  DaemonConfig config;
  config.listen = "127.0.0.1:0";
  config.volumes = {{"vol0", 1 << 20, {}, {}}, {"vol0", 1 << 20, {}, {}}};  // a repeated name
  config.rc_mode = DaemonConfig::RcMode::kOff;
  config.dc.mode = dc::DcTransportConfig::Mode::kOff;
  absl::StatusOr<std::unique_ptr<Daemon>> daemon = Daemon::Start(config);
  EXPECT_FALSE(daemon.ok());
}

}  // namespace
}  // namespace gdr
