// The op pipeline (daemon/service/op_pipeline.h, op_stages.h) with stages of the test's own:
// each stage's per-op state is its own, made when first asked for and gone with the op, and the
// daemon's named order puts any set of stages in place; and the daemon's grant stage (refusing a
// request before validation) and CRC stage (the answer's checksum of the moved bytes).
#include "daemon/service/op_pipeline.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/base/crc32c.h"
#include "daemon/service/op_stages.h"
#include "daemon/store/store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gdr {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A stage's per-op state that says when it goes.
struct Tracked {
  std::string* log = nullptr;
  std::string mark;
  ~Tracked() {
    if (log != nullptr) *log += "~" + mark + " ";
  }
};

// Marks its state at start, checks at the end that nothing else wrote it, refuses on request.
class MarkingStage final : public OpStageOf<std::string, Tracked> {
 public:
  MarkingStage(std::string* log, const char* name, bool refuse = false)
      : OpStageOf(log), name_(name), refuse_(refuse) {}
  const char* name() const override { return name_; }
  absl::Status OnStart(OpContext& ctx, TransferOp& op) override {
    Tracked& t = state(ctx);
    t.log = part_;
    t.mark = name_;
    return refuse_ ? absl::ResourceExhaustedError(name_) : absl::OkStatus();
  }
  void OnFinish(OpContext& ctx, uint64_t service_ns) override { Seen(ctx, "finish"); }
  void OnRefused(OpContext& ctx, const absl::Status& why) override { Seen(ctx, "refused"); }
  absl::Status OnRequest(const OpRequest& request) override {
    *part_ += std::string(name_) + ":request ";
    return absl::OkStatus();
  }

 private:
  void Seen(OpContext& ctx, const char* end) {
    // A stage that never started the op finds its state empty, not another stage's.
    *part_ += std::string(name_) + ":" + end + "(" + state(ctx).mark + ") ";
  }
  const char* name_;
  bool refuse_;
};

std::unique_ptr<OpContext> NewOp(const OpPipeline& p, bool* answered) {
  return std::make_unique<OpContext>(&p, Direction::kStoreToClient, nullptr, nullptr, false,
                                     false, "peer", "client",
                                     [answered](OpAnswer) { *answered = true; });
}

TEST(OpPipelineTest, EachStageKeepsItsOwnStateUntilTheOpIsAnswered) {
  std::string log;
  MarkingStage a(&log, "msync"), b(&log, "faults");
  OpPipeline p({&a, &b});
  bool answered = false;
  std::unique_ptr<OpContext> ctx = NewOp(p, &answered);
  TransferOp op;
  ASSERT_TRUE(p.Start(ctx, op).ok());
  p.Transferred(ctx.release(), absl::OkStatus());
  EXPECT_TRUE(answered);
  // The states go with the op, after every stage's end, the last slot first.
  EXPECT_EQ(log, "msync:finish(msync) faults:finish(faults) ~faults ~msync ");
}

TEST(OpPipelineTest, AStageAfterARefusalSeesNoStateOfItsOwn) {
  std::string log;
  MarkingStage a(&log, "msync", /*refuse=*/true), b(&log, "faults");
  OpPipeline p({&a, &b});
  bool answered = false;
  std::unique_ptr<OpContext> ctx = NewOp(p, &answered);
  TransferOp op;
  EXPECT_TRUE(absl::IsResourceExhausted(p.Start(ctx, op)));
  EXPECT_EQ(ctx, nullptr);
  EXPECT_FALSE(answered);
  // faults never started: its state was made empty when asked for (no mark, no log to write
  // its going to) and went with the op.
  EXPECT_EQ(log, "msync:refused(msync) faults:refused() ~msync ");
}

TEST(OpPipelineTest, TheDaemonsOrderPlacesTheStagesItRunsByName) {
  std::string log;
  MarkingStage trace(&log, "trace"), admission(&log, "admission"), msync(&log, "msync");
  absl::StatusOr<std::vector<OpStage*>> ordered = InStageOrder({&trace, &admission, &msync});
  ASSERT_TRUE(ordered.ok()) << ordered.status();
  std::vector<std::string> names;
  for (OpStage* s : *ordered) names.push_back(s->name());
  EXPECT_THAT(names, ElementsAre("msync", "admission", "trace"));
}

TEST(OpPipelineTest, TheOrderRefusesAnUnknownOrRepeatedStageNamingIt) {
  std::string log;
  MarkingStage odd(&log, "odd"), media(&log, "media"), again(&log, "media");
  absl::StatusOr<std::vector<OpStage*>> unknown = InStageOrder({&media, &odd});
  EXPECT_TRUE(absl::IsInvalidArgument(unknown.status()));
  EXPECT_THAT(unknown.status().message(), HasSubstr("'odd'"));
  absl::StatusOr<std::vector<OpStage*>> twice = InStageOrder({&media, &again});
  EXPECT_TRUE(absl::IsInvalidArgument(twice.status()));
  EXPECT_THAT(twice.status().message(), HasSubstr("'media' given twice"));
}

// A caller whose token grants gets from "granted" only.
Caller GetsFromGranted() {
  auto set = std::make_shared<CredentialSet>();
  Credential c;
  c.value = "t";
  c.label = "reader";
  c.get.names = {"granted"};
  set->credentials.push_back(std::move(c));
  set->generation = 1;
  return Caller(set, &set->credentials[0]);
}

TEST(OpPipelineTest, TheGrantStageRefusesARequestBeforeAnythingLooksAtIt) {
  std::string log;
  GrantStage grants;
  MarkingStage stats(&log, "stats");
  absl::StatusOr<std::vector<OpStage*>> ordered = InStageOrder({&stats, &grants});
  ASSERT_TRUE(ordered.ok()) << ordered.status();
  OpPipeline p(*ordered);
  const Caller caller = GetsFromGranted();
  gdrstore::v1::Extent extent;
  // No store behind the pipeline: a volume that exists nowhere is refused as one that exists,
  // in the words Caller::Allows has, before the later stages see the request.
  extent.set_volume("nowhere");
  const absl::Status expected = caller.Allows("nowhere", Right::kGet);
  ASSERT_TRUE(absl::IsPermissionDenied(expected));
  EXPECT_EQ(p.Request({caller, Direction::kStoreToClient, &extent}), expected);
  // Counted as refused, with an op that never started.
  EXPECT_EQ(log, "stats:refused() ");
  // A put needs the put right, which a get grant does not give.
  log.clear();
  extent.set_volume("granted");
  const absl::Status put = p.Request({caller, Direction::kClientToStore, &extent});
  EXPECT_TRUE(absl::IsPermissionDenied(put)) << put;
  EXPECT_THAT(put.message(), HasSubstr("granted"));
  // A get of the granted volume goes on to the next stage's OnRequest; a request without an
  // extent is validation's to refuse.
  log.clear();
  EXPECT_TRUE(p.Request({caller, Direction::kStoreToClient, &extent}).ok());
  EXPECT_TRUE(p.Request({caller, Direction::kClientToStore, nullptr}).ok());
  EXPECT_EQ(log, "stats:request stats:request ");
}

// Runs one op over `bytes` of `volume` through `p` and returns its answer.
OpAnswer RunOp(const OpPipeline& p, std::shared_ptr<const Volume> volume, uint64_t offset,
               uint64_t length, bool crc, absl::Status transferred) {
  std::optional<OpAnswer> answer;
  auto ctx = std::make_unique<OpContext>(&p, Direction::kClientToStore, nullptr, nullptr, false,
                                         crc, "peer", "client",
                                         [&answer](OpAnswer a) { answer = std::move(a); });
  ctx->offset = offset;
  ctx->length = length;
  TransferOp op;
  op.store_volume = std::move(volume);
  EXPECT_TRUE(p.Start(ctx, op).ok());
  p.Transferred(ctx.release(), std::move(transferred));
  EXPECT_TRUE(answer.has_value());
  return answer.value_or(OpAnswer{});
}

TEST(OpPipelineTest, TheCrcStageAnswersTheChecksumOfTheOpsStoreBytes) {
  absl::StatusOr<std::unique_ptr<Volume>> made = Volume::Create({"v", 8192, "", {}});
  ASSERT_TRUE(made.ok()) << made.status();
  std::shared_ptr<const Volume> volume = *std::move(made);
  // The bytes the op "moved": distinct values, so that a wrong offset or length shows.
  for (size_t i = 0; i < volume->size(); ++i) {
    volume->data()[i] = static_cast<std::byte>(i * 7 + 3);
  }
  CrcStage crc;
  OpPipeline p({&crc});
  const OpAnswer a = RunOp(p, volume, 100, 5000, /*crc=*/true, absl::OkStatus());
  ASSERT_TRUE(a.status.ok()) << a.status;
  ASSERT_TRUE(a.crc32c.has_value());
  EXPECT_EQ(*a.crc32c, Crc32c(volume->data() + 100, 5000));
  EXPECT_NE(*a.crc32c, Crc32c(volume->data(), 5000));
  // Not asked for, or the transfer failed: no checksum in the answer.
  EXPECT_FALSE(RunOp(p, volume, 100, 5000, /*crc=*/false, absl::OkStatus()).crc32c);
  const OpAnswer failed =
      RunOp(p, volume, 100, 5000, /*crc=*/true, absl::UnavailableError("link down"));
  EXPECT_TRUE(absl::IsUnavailable(failed.status));
  EXPECT_FALSE(failed.crc32c.has_value());
}

}  // namespace
}  // namespace gdr
