// tcp's inline answers (TcpInitiator::TryInline): a small Write to a client that takes answers
// inline is done before Submit returns, its bytes in the op's InlineAnswer and no link opened;
// everything else (too large for either side's limit, a Read, an injected fault, a target the
// rule refuses, no answer to fill) goes over a link as before. A later op into the same
// memory (the corrupt-byte fault) lands in the answer only when the answer carries those bytes.
#include <cstring>

#include "tests/daemon/transport/tcp/tcp_initiator_fixture.h"

namespace gdr::tcp_initiator_test {
namespace {

constexpr uint32_t kDaemonLimit = 16 << 10;  // the daemon's --tcp-inline-max in these tests
constexpr uint32_t kOffer = 64 << 10;        // what the client library asks for

// The endpoint a client that takes answers of up to `offer` bytes inline describes.
std::shared_ptr<const TcpDestination> InlineDest(uint16_t port, uint32_t offer,
                                                 const std::string& host = "127.0.0.1") {
  auto dest = std::make_shared<TcpDestination>(host, port, SecretOf(port));
  dest->inline_max = offer;
  return dest;
}

// MakeOp to that endpoint, with `answer` (made for this op's memory) to fill.
TransferOp InlineOp(Direction d, std::byte* local, uint64_t length, uint64_t remote,
                    uint32_t rkey, uint16_t port, uint32_t offer, InlineAnswer* answer) {
  TransferOp op = MakeOp(d, local, length, remote, rkey, port);
  op.destination = InlineDest(port, offer);
  answer->address = remote;
  answer->length = length;
  op.inline_answer = answer;
  return op;
}

class TcpInlineTest : public TcpInitiatorTest {
 protected:
  void StartInline(uint32_t limit = kDaemonLimit) {
    TcpInitiatorOptions o;
    o.inline_max = limit;
    StartInitiator(o);
  }
};

TEST_F(TcpInlineTest, ASmallWriteIsAnsweredInlineWithoutALink) {
  StartInline();
  ClientMemory client(*target_, 64 << 10, 1);
  StoreMemory store(64 << 10, 2);
  for (uint64_t len : {uint64_t{1}, uint64_t{4096}, uint64_t{kDaemonLimit}}) {
    SCOPED_TRACE(testing::Message() << "length " << len);
    InlineAnswer answer;
    OpWaiter w;
    ASSERT_TRUE(initiator_
                    ->Submit(InlineOp(Direction::kStoreToClient, store.at(5), len,
                                      client.address(0), client.rkey(), target_->port(),
                                      kOffer, &answer),
                             w.Callback())
                    .ok());
    EXPECT_EQ(w.calls(), 1) << "an inline answer is done before Submit returns";
    ASSERT_TRUE(w.Wait().ok());
    ASSERT_EQ(answer.bytes.size(), len);
    EXPECT_EQ(PatternMismatch(store.seed(), 5,
                              std::span<const std::byte>(
                                  reinterpret_cast<const std::byte*>(answer.bytes.data()), len)),
              std::nullopt);
  }
  // Nothing went to the client's memory over a link, and no link was opened.
  EXPECT_EQ(client.FirstChangedOutside(0, 0), -1);
  EXPECT_EQ(initiator_->stats().in_use, 0u);
  EXPECT_EQ(target_->stats().accepted, 0u);
}

TEST_F(TcpInlineTest, WhatIsNotInlineGoesOverALinkAsBefore) {
  StartInline();
  ClientMemory client(*target_, 256 << 10, 3);
  StoreMemory store(256 << 10, 4);
  struct Case {
    const char* what;
    Direction d;
    uint64_t length;
    uint32_t offer;
  };
  const Case cases[] = {
      {"past the daemon's limit", Direction::kStoreToClient, kDaemonLimit + 1, kOffer},
      {"past the client's offer", Direction::kStoreToClient, 4097, 4096},
      {"a client that offers none", Direction::kStoreToClient, 100, 0},
      {"a Read", Direction::kClientToStore, 100, kOffer},
  };
  uint64_t at = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    InlineAnswer answer;
    TransferOp op = InlineOp(c.d, store.at(at), c.length, client.address(at), client.rkey(),
                             target_->port(), c.offer, &answer);
    ASSERT_TRUE(Run(op).ok());
    EXPECT_TRUE(answer.bytes.empty());
    if (c.d == Direction::kStoreToClient) {
      EXPECT_EQ(PatternMismatch(store.seed(), at, client.span(at, c.length)), std::nullopt);
    }
    at += 64 << 10;
  }
  EXPECT_GE(initiator_->stats().in_use, 1u);
  // An injected fault breaks the link the op went on, as it always has: it is never inline.
  InlineAnswer answer;
  TransferOp op = InlineOp(Direction::kStoreToClient, store.at(0), 100, client.address(0),
                           client.rkey(), target_->port(), kOffer, &answer);
  op.inject = InjectedFault::kBreakPath;
  EXPECT_EQ(Run(op).code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(answer.bytes.empty());
  // A target the rule refuses (not the caller's address) is refused as ever, bytes or not.
  InlineAnswer refused;
  op = InlineOp(Direction::kStoreToClient, store.at(0), 100, client.address(0), client.rkey(),
                target_->port(), kOffer, &refused);
  op.destination = InlineDest(target_->port(), kOffer, "127.0.0.2");
  EXPECT_EQ(Run(op).code(), absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(refused.bytes.empty());
  // An op with no answer to fill goes over a link.
  InlineAnswer unused;
  op = InlineOp(Direction::kStoreToClient, store.at(64 << 10), 100, client.address(64 << 10),
                client.rkey(), target_->port(), kOffer, &unused);
  op.inline_answer = nullptr;
  ASSERT_TRUE(Run(op).ok());
  EXPECT_TRUE(unused.bytes.empty());
  EXPECT_EQ(PatternMismatch(store.seed(), 64 << 10, client.span(64 << 10, 100)), std::nullopt);
  // With the daemon's limit at 0 nothing is inline.
  StartInline(0);
  InlineAnswer none;
  ASSERT_TRUE(Run(InlineOp(Direction::kStoreToClient, store.at(0), 100, client.address(0),
                           client.rkey(), target_->port(), kOffer, &none))
                  .ok());
  EXPECT_TRUE(none.bytes.empty());
}

// The corrupt-byte fault's second op (one byte into the op's memory) follows the op: into the
// answer when the op went inline, over a link when it did not; never an answer of its own.
TEST_F(TcpInlineTest, ALaterOpIntoTheSameMemoryFollowsTheOpsPath) {
  StartInline();
  ClientMemory client(*target_, 64 << 10, 5);
  StoreMemory store(64 << 10, 6);
  InlineAnswer answer;
  ASSERT_TRUE(Run(InlineOp(Direction::kStoreToClient, store.at(0), 4096, client.address(100),
                           client.rkey(), target_->port(), kOffer, &answer))
                  .ok());
  ASSERT_EQ(answer.bytes.size(), 4096u);
  const std::byte flipped = ~static_cast<std::byte>(answer.bytes[17]);
  std::byte one[1] = {flipped};
  TransferOp byte_op = MakeOp(Direction::kStoreToClient, one, 1, client.address(117),
                              client.rkey(), target_->port());
  byte_op.destination = InlineDest(target_->port(), kOffer);
  byte_op.inline_answer = &answer;
  ASSERT_TRUE(Run(byte_op).ok());
  EXPECT_EQ(static_cast<std::byte>(answer.bytes[17]), flipped);
  EXPECT_EQ(answer.bytes.size(), 4096u);
  EXPECT_EQ(initiator_->stats().in_use, 0u);

  // The same byte op while the answer is empty (the op itself went over a link): a link too,
  // and the answer stays empty (an answer of one byte for a 4096-byte op would be a lie).
  InlineAnswer empty;
  empty.address = client.address(100);
  empty.length = 4096;
  byte_op.inline_answer = &empty;
  byte_op.remote_address = client.address(100);
  ASSERT_TRUE(Run(byte_op).ok());
  EXPECT_TRUE(empty.bytes.empty());
  EXPECT_EQ(*client.span(100, 1).data(), flipped);
}

}  // namespace
}  // namespace gdr::tcp_initiator_test
