// The C ABI end to end: tests/client/c/c_abi_demo (C, linked against libgdrclient.so only)
// against a real gdrstored on loopback. The program checks every step itself, the hostile ones
// of c_abi_hostile.c included (NULL pointers with sizes, wrapping ranges, released and made-up
// handles, SIZE_MAX allocations, 8 threads failing on one client that must each read their own
// op's message); this test runs it and requires each step to pass (a crash fails it).
#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "tests/integration/daemon_process.h"

namespace gdr::integ {
namespace {

TEST(CAbiTest, CProgramMovesBytesThroughTheCAbi) {
  auto d = DaemonProcess::Start({"--volume", "vol0=64MiB"});
  ASSERT_TRUE(d.ok()) << d.status();
  auto r = RunProcess({GDR_C_ABI_DEMO_BIN, (*d)->address(), "vol0"}, (*d)->dir(), "c_abi",
                      absl::Seconds(120));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_code, 0) << r->out << r->err;
  EXPECT_FALSE(absl::StrContains(r->out, "FAIL")) << r->out;
  EXPECT_TRUE(absl::StrContains(r->out, "C ABI demo PASSED")) << r->out;
  auto st = (*d)->Terminate(absl::Seconds(30));
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(DescribeWaitStatus(*st), "exited 0") << (*d)->Stderr();
}

}  // namespace
}  // namespace gdr::integ
