// tcp's inline answers (TcpInitiator::TryInline): a small Write to a client that takes answers
// inline is done before Submit returns, its bytes in the op's InlineAnswer and no link opened;
// everything else (too large for either side's limit, a Read, an injected fault, a target the
// rule refuses, no answer to fill) goes over a link as before. A later op into the same
// memory (the corrupt-byte fault) lands in the answer only when the answer carries those bytes.
#include <cstring>

#include "tests/daemon/transport/tcp/tcp_initiator_fixture.h"

namespace gdr::tcp_initiator_test {
namespace {

// The endpoint a client that takes answers of up to `offer` bytes inline describes.
std::shared_ptr<const TcpDestination> InlineDest(uint16_t port, uint32_t offer) {
  auto dest = std::make_shared<TcpDestination>("127.0.0.1", port, SecretOf(port));
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

TEST_F(TcpInitiatorTest, ASmallWriteIsAnsweredInlineWithoutALink) {
  TcpInitiatorOptions o;
  o.inline_max = 16 << 10;
  StartInitiator(o);
  ClientMemory client(*target_, 64 << 10, 1);
  StoreMemory store(64 << 10, 2);
  for (uint64_t len : {uint64_t{1}, uint64_t{4096}, uint64_t{16 << 10}}) {
    SCOPED_TRACE(testing::Message() << "length " << len);
    InlineAnswer answer;
    OpWaiter w;
    ASSERT_TRUE(initiator_
                    ->Submit(InlineOp(Direction::kStoreToClient, store.at(5), len,
                                      client.address(0), client.rkey(), target_->port(),
                                      64 << 10, &answer),
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

TEST_F(TcpInitiatorTest, WhatIsNotInlineGoesOverALinkAsBefore) {
  TcpInitiatorOptions o;
  o.inline_max = 16 << 10;
  StartInitiator(o);
  ClientMemory client(*target_, 256 << 10, 3);
  StoreMemory store(256 << 10, 4);
  struct Case {
    const char* what;
    Direction d;
    uint64_t length;
    uint32_t offer;
    InjectedFault inject;
  };
  const Case cases[] = {
      {"past the daemon's limit", Direction::kStoreToClient, (16 << 10) + 1, 64 << 10,
       InjectedFault::kNone},
      {"past the client's offer", Direction::kStoreToClient, 4097, 4096, InjectedFault::kNone},
      {"a client that offers none", Direction::kStoreToClient, 100, 0, InjectedFault::kNone},
      {"a Read", Direction::kClientToStore, 100, 64 << 10, InjectedFault::kNone},
  };
  uint64_t at = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    InlineAnswer answer;
    TransferOp op = InlineOp(c.d, store.at(at), c.length, client.address(at), client.rkey(),
                             target_->port(), c.offer, &answer);
    op.inject = c.inject;
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
                           client.rkey(), target_->port(), 64 << 10, &answer);
  op.inject = InjectedFault::kBreakPath;
  EXPECT_EQ(Run(op).code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(answer.bytes.empty());
  // With the daemon's limit at 0 nothing is inline.
  o.inline_max = 0;
  StartInitiator(o);
  InlineAnswer none;
  ASSERT_TRUE(Run(InlineOp(Direction::kStoreToClient, store.at(0), 100, client.address(0),
                           client.rkey(), target_->port(), 64 << 10, &none))
                  .ok());
  EXPECT_TRUE(none.bytes.empty());
}

// The corrupt-byte fault's second op (one byte into the op's memory) follows the op: into the
// answer when the op went inline, over a link when it did not; never an answer of its own.
TEST_F(TcpInitiatorTest, ALaterOpIntoTheSameMemoryFollowsTheOpsPath) {
  TcpInitiatorOptions o;
  o.inline_max = 16 << 10;
  StartInitiator(o);
  ClientMemory client(*target_, 64 << 10, 5);
  StoreMemory store(64 << 10, 6);
  InlineAnswer answer;
  ASSERT_TRUE(Run(InlineOp(Direction::kStoreToClient, store.at(0), 4096, client.address(100),
                           client.rkey(), target_->port(), 64 << 10, &answer))
                  .ok());
  ASSERT_EQ(answer.bytes.size(), 4096u);
  const std::byte flipped = ~static_cast<std::byte>(answer.bytes[17]);
  std::byte one[1] = {flipped};
  TransferOp byte_op = MakeOp(Direction::kStoreToClient, one, 1, client.address(117),
                              client.rkey(), target_->port());
  byte_op.destination = InlineDest(target_->port(), 64 << 10);
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
