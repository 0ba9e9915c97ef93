// dc on a verbs device that is not mlx5 (SoftRoCE rxe0 in the test guest): the daemon asked for
// dc fails fast naming the missing capability, transport auto leaves dc out and rc carries the
// traffic, and a client asking for a DCT is refused with the same reason. Skips without a verbs
// device. DC itself cannot run here: rxe has no DC.
#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/verbs/dc_qp.h"
#include "common/verbs/verbs_device.h"
#include "gdrstore/client.h"
#include "tests/integration/daemon_process.h"

namespace gdr::integ {
namespace {

std::string DeviceName() {
  auto names = verbs::ListDeviceNames();
  return names.empty() ? "" : names.front();
}

#define SKIP_WITHOUT_DEVICE() \
  if (DeviceName().empty()) GTEST_SKIP() << "no verbs device (run inside tests/rxe/run-in-guest.sh)";

// What a non-mlx5 device is refused with (or, in a build without mlx5dv, the build's reason).
bool NamesMissingCapability(const std::string& text) {
  return absl::StrContains(text, "mlx5dv_is_supported") ||
         absl::StrContains(text, "no mlx5dv support");
}

// What the daemon offers, asked over a tcp client.
absl::StatusOr<gdrstore::v1::GetInfoResponse> InfoOf(const DaemonProcess& d) {
  gdrstore::ClientOptions o;
  o.daemon_address = d.address();
  auto c = gdrstore::Client::Connect(o);
  if (!c.ok()) return c.status();
  return (*c)->GetInfo();
}

TEST(DcRxeTest, DaemonWithDcOnFailsFastNamingTheCapability) {
  SKIP_WITHOUT_DEVICE();
  auto dir = TempDir::Create("dc_rxe");
  ASSERT_TRUE(dir.ok());
  auto r = RunProcess({GDR_GDRSTORED_BIN, "--listen", "127.0.0.1:0", "--volume", "v=4MiB",
                       "--rdma-device", DeviceName(), "--dc", "on"},
                      (*dir)->path(), "dc_on", absl::Seconds(120));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_code, 1) << r->Describe();
  EXPECT_TRUE(NamesMissingCapability(r->err)) << r->err;
  EXPECT_TRUE(absl::StrContains(r->err, DeviceName())) << r->err;
}

// dc runs on the daemon's verbs core, not on rc: with rc off the device is still opened and
// probed for dc, which is refused for the device's own reason (not as a usage error).
TEST(DcRxeTest, DcIsProbedOnTheDeviceWithRcOff) {
  SKIP_WITHOUT_DEVICE();
  auto dir = TempDir::Create("dc_rxe");
  ASSERT_TRUE(dir.ok());
  auto r = RunProcess({GDR_GDRSTORED_BIN, "--listen", "127.0.0.1:0", "--volume", "v=4MiB",
                       "--rdma-device", DeviceName(), "--rc", "off", "--dc", "on"},
                      (*dir)->path(), "dc_no_rc", absl::Seconds(120));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_code, 1) << r->Describe();
  EXPECT_TRUE(NamesMissingCapability(r->err)) << r->err;
  EXPECT_FALSE(absl::StrContains(r->err, "--rc off")) << r->err;

  auto d = DaemonProcess::Start(
      {"--rdma-device", DeviceName(), "--rc", "off", "--volume", "vol0=8MiB"}, absl::Seconds(120));
  ASSERT_TRUE(d.ok()) << d.status();
  auto info = InfoOf(**d);
  ASSERT_TRUE(info.ok()) << info.status();
  for (const auto& t : info->transports()) {
    if (t.transport() == gdrstore::v1::TRANSPORT_RC) {
      EXPECT_FALSE(t.available());
      EXPECT_EQ(t.detail(), "disabled by configuration (--rc off)");
    }
    if (t.transport() == gdrstore::v1::TRANSPORT_DC) {
      EXPECT_FALSE(t.available());
      EXPECT_TRUE(NamesMissingCapability(t.detail())) << t.detail();
    }
  }
  EXPECT_FALSE(info->has_rdma()) << "no transport runs on the device, so it was closed again";
  auto st = (*d)->Terminate(absl::Seconds(60));
  ASSERT_TRUE(st.ok());
  EXPECT_TRUE(absl::StrContains((*d)->Stderr(), "transports: tcp\n")) << (*d)->Stderr();
}

TEST(DcRxeTest, AutoOffersRcAndSaysWhyNotDc) {
  SKIP_WITHOUT_DEVICE();
  auto d = DaemonProcess::Start({"--rdma-device", DeviceName(), "--volume", "vol0=32MiB"},
                                absl::Seconds(120));
  ASSERT_TRUE(d.ok()) << d.status();
  auto info = InfoOf(**d);
  ASSERT_TRUE(info.ok()) << info.status();
  for (const auto& t : info->transports()) {
    if (t.transport() == gdrstore::v1::TRANSPORT_DC) {
      EXPECT_FALSE(t.available());
      EXPECT_TRUE(NamesMissingCapability(t.detail())) << t.detail();
    }
    if (t.transport() == gdrstore::v1::TRANSPORT_RC) {
      EXPECT_TRUE(t.available()) << t.detail();
    }
  }
  // gdrctl --transport auto: dc is skipped with the daemon's reason, rc moves verified data.
  auto r = RunProcess({GDR_GDRCTL_BIN, "--daemon", (*d)->address(), "--rdma-device", DeviceName(),
                       "--transport", "auto", "selftest", "--sizes", "1,65537,4MiB"},
                      (*d)->dir(), "auto", absl::Seconds(300));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_code, 0) << r->out << r->err;
  EXPECT_TRUE(absl::StrContains(r->out, "PASS local auto: rc")) << r->out;
  EXPECT_TRUE(absl::StrContains(r->out, "PASS bad rkey: refused as expected")) << r->out;
  EXPECT_TRUE(absl::StrContains(r->out, "selftest PASSED")) << r->out;
  auto st = (*d)->Terminate(absl::Seconds(60));
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(DescribeWaitStatus(*st), "exited 0") << (*d)->Stderr();
  // The start-up log names every transport: what runs, and why dc does not.
  EXPECT_TRUE(absl::StrContains((*d)->Stderr(), "transports: tcp, rc")) << (*d)->Stderr();
  EXPECT_TRUE(absl::StrContains((*d)->Stderr(), "dc not offered: ")) << (*d)->Stderr();
}

TEST(DcRxeTest, ClientDctOnANonMlx5DeviceIsRefusedNamingTheCapability) {
  SKIP_WITHOUT_DEVICE();
  auto d = DaemonProcess::Start({"--rdma-device", DeviceName(), "--volume", "vol0=4MiB"},
                                absl::Seconds(120));
  ASSERT_TRUE(d.ok()) << d.status();
  gdrstore::ClientOptions o;
  o.daemon_address = (*d)->address();
  o.transport = gdrstore::Transport::kDc;
  o.rdma_device = DeviceName();
  auto c = gdrstore::Client::Connect(o);
  ASSERT_FALSE(c.ok());
  EXPECT_TRUE(NamesMissingCapability(std::string(c.status().message()))) << c.status();
}

}  // namespace
}  // namespace gdr::integ
