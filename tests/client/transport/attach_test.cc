// AttachClientTransport, as the cluster client uses it to reach every member through one
// transport: a transport that serves any daemon as it is comes back as a view that shares its
// registrations and descriptors but leaves closing to the owner; one that connects per daemon
// (rc) returns its own, and its errors come through.
#include <gtest/gtest.h>

#include "client/src/transport/open_client_transport.h"

namespace gdr {
namespace {

class FakeTransport final : public ClientTransport {
 public:
  absl::StatusOr<std::function<void()>> Register(const std::shared_ptr<Region>& region) override {
    region->rkey = 0x77;
    ++registered;
    return std::function<void()>();
  }
  void DescribeEndpoint(gdrstore::v1::RemoteBuffer* buffer) const override {
    buffer->mutable_tcp()->set_port(4242);
  }
  void Close() override { ++closed; }
  std::string HopTo(const Region& region, int rail) const override { return "tcp/host"; }
  void FillInfo(gdrstore::TransportInfo* info) const override { info->description = "fake"; }
  absl::StatusOr<std::shared_ptr<ClientTransport>> Attach(
      gdrstore::v1::GdrStore::Stub* stub) override {
    if (!attach_error.ok()) return attach_error;
    return own;
  }
  int registered = 0, closed = 0;
  absl::Status attach_error;
  std::shared_ptr<ClientTransport> own;  // null: shared as it is
};

TEST(AttachTest, AConnectionlessTransportIsSharedAndClosedOnlyByItsOwner) {
  auto base = std::make_shared<FakeTransport>();
  absl::StatusOr<std::shared_ptr<ClientTransport>> view = AttachClientTransport(base, nullptr);
  ASSERT_TRUE(view.ok()) << view.status();
  ASSERT_NE(*view, nullptr);
  auto region = std::make_shared<Region>();
  ASSERT_TRUE((*view)->Register(region).ok());
  EXPECT_EQ(base->registered, 1);
  EXPECT_EQ(region->rkey, 0x77u);
  gdrstore::v1::RemoteBuffer rb;
  (*view)->DescribeEndpoint(*region, 0, &rb);
  EXPECT_EQ(rb.tcp().port(), 4242u);
  EXPECT_EQ(rb.rkey(), 0x77u);
  gdrstore::TransportInfo info;
  (*view)->FillInfo(&info);
  EXPECT_EQ(info.description, "fake");
  (*view)->Close();
  EXPECT_EQ(base->closed, 0) << "a member's Client must not close the shared transport";
}

TEST(AttachTest, AConnectedTransportReturnsItsOwnAndItsErrors) {
  auto base = std::make_shared<FakeTransport>();
  auto own = std::make_shared<FakeTransport>();
  base->own = own;
  absl::StatusOr<std::shared_ptr<ClientTransport>> attached = AttachClientTransport(base, nullptr);
  ASSERT_TRUE(attached.ok()) << attached.status();
  EXPECT_EQ(attached->get(), own.get());
  base->attach_error = absl::UnavailableError("rc connect: no");
  attached = AttachClientTransport(base, nullptr);
  EXPECT_TRUE(absl::IsUnavailable(attached.status())) << attached.status();
}

}  // namespace
}  // namespace gdr
