// The op pipeline (daemon/service/op_pipeline.h, op_stages.h) with stages of the test's own:
// each stage's per-op state is its own, made when first asked for and gone with the op, and the
// daemon's named order puts any set of stages in place.
#include "daemon/service/op_pipeline.h"

#include <memory>
#include <string>
#include <vector>

#include "daemon/service/op_stages.h"
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
                                     "peer", "client",
                                     [answered](absl::Status, uint64_t) { *answered = true; });
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

}  // namespace
}  // namespace gdr
