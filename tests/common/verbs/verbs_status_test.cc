// The ibv_wc_status -> Status table, MTU and poll-mode parsing, and chunk planning: pure
// functions, no device needed.
#include "common/verbs/verbs_status.h"

#include <gtest/gtest.h>

#include "common/verbs/chunk_plan.h"
#include "common/verbs/completion_poller.h"

namespace gdr::verbs {
namespace {

TEST(WcStatusTest, SuccessIsOk) {
  EXPECT_TRUE(WcStatusToStatus(IBV_WC_SUCCESS, 0, "RDMA WRITE").ok());
}

TEST(WcStatusTest, EveryErrorIsNonOkAndNamesTheVerbsStatus) {
  for (int s = IBV_WC_LOC_LEN_ERR; s <= IBV_WC_TM_RNDV_INCOMPLETE; ++s) {
    const auto status = static_cast<ibv_wc_status>(s);
    absl::Status st = WcStatusToStatus(status, 0x42, "RDMA READ of 7 bytes");
    EXPECT_FALSE(st.ok()) << s;
    EXPECT_NE(st.message().find(WcStatusName(status)), std::string::npos) << st;
    EXPECT_NE(st.message().find("RDMA READ of 7 bytes"), std::string::npos) << st;
    EXPECT_NE(st.message().find("0x42"), std::string::npos) << st;
    EXPECT_NE(std::string(WcStatusName(status)), "IBV_WC_(unknown)") << s;
  }
}

TEST(WcStatusTest, CodesClientsActOn) {
  EXPECT_EQ(WcStatusToStatus(IBV_WC_REM_ACCESS_ERR, 0, "x").code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(WcStatusToStatus(IBV_WC_RETRY_EXC_ERR, 0, "x").code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(WcStatusToStatus(IBV_WC_WR_FLUSH_ERR, 0, "x").code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(WcStatusToStatus(IBV_WC_REM_OP_ERR, 0, "x").code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(WcStatusToStatus(IBV_WC_LOC_PROT_ERR, 0, "x").code(), absl::StatusCode::kInternal);
  EXPECT_EQ(WcStatusToStatus(IBV_WC_REM_INV_REQ_ERR, 0, "x").code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(VerbsErrorTest, CarriesErrnoCodeAndCall) {
  absl::Status s = VerbsError(ENOMEM, "ibv_create_qp_ex", "(RC)");
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(s.message().find("ibv_create_qp_ex (RC)"), std::string::npos) << s;
}

TEST(MtuTest, BytesRoundTripAndRejectsOthers) {
  for (uint32_t b : {256u, 512u, 1024u, 2048u, 4096u}) {
    ibv_mtu m{};
    ASSERT_TRUE(MtuFromBytes(b, &m).ok());
    EXPECT_EQ(MtuBytes(m), b);
  }
  ibv_mtu m{};
  EXPECT_FALSE(MtuFromBytes(1500, &m).ok());
  EXPECT_FALSE(MtuFromBytes(0, &m).ok());
}

TEST(PollModeTest, Parses) {
  EXPECT_EQ(*ParsePollMode("busy"), PollMode::kBusy);
  EXPECT_EQ(*ParsePollMode("event"), PollMode::kEvent);
  EXPECT_EQ(*ParsePollMode("adaptive"), PollMode::kAdaptive);
  EXPECT_FALSE(ParsePollMode("spin").ok());
}

TEST(ChunkPlanTest, EffectiveSizeIsTheSmallestLimit) {
  EXPECT_EQ(EffectiveChunkBytes(1 << 20, 8 << 20), 1u << 20);
  EXPECT_EQ(EffectiveChunkBytes(64 << 20, 8 << 20), 8u << 20);
  EXPECT_EQ(EffectiveChunkBytes(0, 0), 0x7fffffffu);
  EXPECT_EQ(EffectiveChunkBytes(1ull << 40, 1ull << 40), 0x7fffffffu);
}

TEST(ChunkPlanTest, PiecesCoverTheRangeInOrder) {
  auto c = PlanChunks(10, 4);
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[0].offset, 0u);
  EXPECT_EQ(c[0].length, 4u);
  EXPECT_EQ(c[2].offset, 8u);
  EXPECT_EQ(c[2].length, 2u);
  EXPECT_TRUE(PlanChunks(0, 4).empty());
  auto one = PlanChunks(1, 8 << 20);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].length, 1u);
  auto big = PlanChunks((16ull << 20) + 3, 8 << 20);
  ASSERT_EQ(big.size(), 3u);
  EXPECT_EQ(big[2].length, 3u);
}

}  // namespace
}  // namespace gdr::verbs
