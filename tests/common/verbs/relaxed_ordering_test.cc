// Relaxed ordering is asked for on every registration, dropped only when the kernel refuses
// the flag itself, and the outcome says which happened. The registration call is replaced;
// verbs_core_test registers with it on a real device (SoftRoCE).
#include "common/verbs/relaxed_ordering.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cerrno>
#include <vector>

namespace gdr::verbs {
namespace {

using ::testing::HasSubstr;

ibv_mr* FakeMr() {
  static ibv_mr mr{};
  return &mr;
}

// Fails an attempt carrying the flag with `refuse_errno` (0: accepts everything) and any
// attempt without it with `plain_errno`.
struct FakeReg {
  int refuse_errno = 0;
  int plain_errno = 0;
  std::vector<int> attempts;
  ibv_mr* operator()(int access) {
    attempts.push_back(access);
    const int err = (access & IBV_ACCESS_RELAXED_ORDERING) ? refuse_errno : plain_errno;
    if (err != 0) {
      errno = err;
      return nullptr;
    }
    return FakeMr();
  }
};

constexpr int kAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;

TEST(RelaxedOrderingTest, AskedForAndAccepted) {
  FakeReg reg;
  RelaxedOrdering out;
  EXPECT_EQ(RegisterPreferringRelaxedOrdering(std::ref(reg), kAccess, true, &out), FakeMr());
  EXPECT_EQ(reg.attempts, std::vector<int>{kAccess | IBV_ACCESS_RELAXED_ORDERING});
  EXPECT_TRUE(out.requested);
  EXPECT_TRUE(out.accepted);
  EXPECT_THAT(out.detail, HasSubstr("on"));
}

TEST(RelaxedOrderingTest, RefusedFlagIsDroppedAndSaidSo) {
  for (int err : {EINVAL, EOPNOTSUPP, EPROTONOSUPPORT}) {
    FakeReg reg;
    reg.refuse_errno = err;
    RelaxedOrdering out;
    EXPECT_EQ(RegisterPreferringRelaxedOrdering(std::ref(reg), kAccess, true, &out), FakeMr());
    EXPECT_EQ(reg.attempts,
              (std::vector<int>{kAccess | IBV_ACCESS_RELAXED_ORDERING, kAccess}));
    EXPECT_TRUE(out.requested);
    EXPECT_FALSE(out.accepted);
    EXPECT_THAT(out.detail, HasSubstr("refused"));
  }
}

TEST(RelaxedOrderingTest, OtherErrorsAreNotRetried) {
  FakeReg reg;
  reg.refuse_errno = ENOMEM;  // the memlock limit: dropping the flag would not help
  RelaxedOrdering out;
  EXPECT_EQ(RegisterPreferringRelaxedOrdering(std::ref(reg), kAccess, true, &out), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  EXPECT_EQ(reg.attempts.size(), 1u);
}

TEST(RelaxedOrderingTest, RetryFailureKeepsItsErrno) {
  FakeReg reg;
  reg.refuse_errno = EINVAL;
  reg.plain_errno = EFAULT;
  RelaxedOrdering out;
  EXPECT_EQ(RegisterPreferringRelaxedOrdering(std::ref(reg), kAccess, true, &out), nullptr);
  EXPECT_EQ(errno, EFAULT);
}

TEST(RelaxedOrderingTest, TurnedOffAsksOnceWithout) {
  FakeReg reg;
  RelaxedOrdering out;
  EXPECT_EQ(RegisterPreferringRelaxedOrdering(std::ref(reg), kAccess, false, &out), FakeMr());
  EXPECT_EQ(reg.attempts, std::vector<int>{kAccess});
  EXPECT_FALSE(out.requested);
  EXPECT_THAT(out.detail, HasSubstr("GDRSTORE_RELAXED_ORDERING=0"));
}

}  // namespace
}  // namespace gdr::verbs
