// A get into memory with a write fence is reported done only after the fence ran, and fails
// when the fence fails; puts and memory without a fence pass straight through.
#include "client/src/write_fence.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace gdr {
namespace {

using ::testing::HasSubstr;

TEST(WriteFenceTest, FenceRunsBeforeTheCallerHearsOfASuccessfulOp) {
  std::vector<std::string> events;
  gdrstore::OpCallback cb = AfterWriteFence(
      [&] {
        events.push_back("fence");
        return absl::OkStatus();
      },
      [&](absl::StatusOr<gdrstore::OpResult> r) {
        ASSERT_TRUE(r.ok()) << r.status();
        EXPECT_EQ(r->bytes, 4096u);
        events.push_back("done");
      });
  gdrstore::OpResult result;
  result.bytes = 4096;
  cb(result);
  EXPECT_EQ(events, (std::vector<std::string>{"fence", "done"}));
}

TEST(WriteFenceTest, FailedOpSkipsTheFence) {
  int fences = 0;
  absl::Status seen;
  gdrstore::OpCallback cb = AfterWriteFence(
      [&] {
        ++fences;
        return absl::OkStatus();
      },
      [&](absl::StatusOr<gdrstore::OpResult> r) { seen = r.status(); });
  cb(absl::UnavailableError("daemon gone"));
  EXPECT_EQ(fences, 0);
  EXPECT_EQ(seen.code(), absl::StatusCode::kUnavailable);
}

TEST(WriteFenceTest, FailedFenceFailsTheOp) {
  absl::Status seen;
  gdrstore::OpCallback cb = AfterWriteFence(
      [] { return absl::InternalError("cuFlushGPUDirectRDMAWrites: CUDA_ERROR_UNKNOWN"); },
      [&](absl::StatusOr<gdrstore::OpResult> r) { seen = r.status(); });
  cb(gdrstore::OpResult{});
  EXPECT_EQ(seen.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(seen.message(), HasSubstr("cuFlushGPUDirectRDMAWrites"));
  EXPECT_THAT(seen.message(), HasSubstr("GPU work may not see them"));
}

TEST(WriteFenceTest, NoFenceIsTheCallbackItself) {
  int calls = 0;
  gdrstore::OpCallback cb =
      AfterWriteFence({}, [&](absl::StatusOr<gdrstore::OpResult>) { ++calls; });
  cb(gdrstore::OpResult{});
  EXPECT_EQ(calls, 1);
}

}  // namespace
}  // namespace gdr
