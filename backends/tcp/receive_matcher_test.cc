// The tcp loop's receive matching and frame header, without sockets: waiting receives taken in
// order (from a peer before from anyone, finished ones skipped), early messages staged in
// arrival order within the cap, drops by operation and by peer, buffers recycled.
#include "backends/tcp/receive_matcher.h"

#include <cstring>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace plexus::tcp {
namespace {

using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;

OpPtr Receive(int peer, uint64_t tag) {
  auto op = std::make_shared<Op>();
  op->kind = peer < 0 ? Op::Kind::kRecvAny : Op::Kind::kRecv;
  op->peer = peer;
  op->tag.tag = tag;
  return op;
}

TEST(FrameHeaderTest, RoundTripsEveryField) {
  char header[kFrameHeaderBytes];
  EncodeHeader(header, FrameType::kAbort, MakeTag(7, 3), 0xfeedfacecafebeefull, 1ull << 40);
  const FrameHeader decoded = DecodeHeader(header);
  EXPECT_EQ(decoded.type, static_cast<uint32_t>(FrameType::kAbort));
  EXPECT_EQ(decoded.tag, MakeTag(7, 3));
  EXPECT_EQ(decoded.signature, 0xfeedfacecafebeefull);
  EXPECT_EQ(decoded.size, 1ull << 40);
  EXPECT_EQ(header[0], 2);  // Little endian on the wire, whatever the host.
  EXPECT_EQ(header[4], 0);
}

TEST(ReceiveMatcherTest, WaitingReceivesAreTakenInOrderFromThePeerBeforeFromAnyone) {
  ReceiveMatcher matcher(1 << 20);
  OpPtr any = Receive(-1, 5);
  OpPtr first = Receive(1, 5);
  OpPtr second = Receive(1, 5);
  OpPtr finished = Receive(2, 5);
  finished->done = true;
  for (const OpPtr& op : {any, first, second, finished}) matcher.Wait(op);
  EXPECT_EQ(matcher.TakeWaiting(1, 5), first);
  EXPECT_EQ(matcher.TakeWaiting(1, 5), second);
  EXPECT_EQ(matcher.TakeWaiting(1, 6), nullptr);  // Another tag.
  EXPECT_EQ(matcher.TakeWaiting(2, 5), any);      // The finished one is skipped.
  EXPECT_EQ(any->peer, 2);
  EXPECT_EQ(matcher.TakeWaiting(2, 5), nullptr);
}

TEST(ReceiveMatcherTest, EarlyMessagesAreStagedInArrivalOrderWithinTheCap) {
  ReceiveMatcher matcher(100);
  auto a = matcher.Stage(1, 9, 0, 40);
  auto b = matcher.Stage(2, 9, 0, 40);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(matcher.staged_bytes(), 80u);
  auto over = matcher.Stage(3, 9, 0, 30);
  EXPECT_EQ(over.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(over.status().message(), HasSubstr("110 bytes nobody has asked for (cap 100)"));
  // A receive from peer 2 takes peer 2's; a receive from anyone the first that can be taken.
  EXPECT_EQ(matcher.FindStaged(*Receive(2, 9)), *b);
  EXPECT_EQ(matcher.FindStaged(*Receive(-1, 9)), *a);
  (*a)->waiter = Receive(-1, 9);  // Still arriving, and already claimed.
  EXPECT_EQ(matcher.FindStaged(*Receive(-1, 9)), *b);
  EXPECT_EQ(matcher.FindStaged(*Receive(1, 8)), nullptr);
  matcher.Unstage(*b);
  EXPECT_EQ(matcher.staged_bytes(), 40u);
  EXPECT_EQ(matcher.FindStaged(*Receive(2, 9)), nullptr);
}

TEST(ReceiveMatcherTest, DisagreeingSignaturesAreFoundPerOperation) {
  ReceiveMatcher matcher(1 << 20);
  ASSERT_TRUE(matcher.Stage(1, MakeTag(4, 0), 77, 8).ok());
  ASSERT_TRUE(matcher.Stage(2, MakeTag(4, 1), 0, 8).ok());  // Unsigned: never disagrees.
  EXPECT_EQ(matcher.Disagreeing(4, 77), nullptr);
  const StagedMessage* theirs = matcher.Disagreeing(4, 78);
  ASSERT_NE(theirs, nullptr);
  EXPECT_EQ(theirs->peer, 1);
  EXPECT_EQ(matcher.Disagreeing(5, 78), nullptr);
}

TEST(ReceiveMatcherTest, DropsReturnTheReceivesThatWaited) {
  ReceiveMatcher matcher(1 << 20);
  OpPtr op4_peer1 = Receive(1, MakeTag(4, 0));
  OpPtr op4_any = Receive(-1, MakeTag(4, 1));
  OpPtr op5_peer1 = Receive(1, MakeTag(5, 0));
  OpPtr op5_peer2 = Receive(2, MakeTag(5, 0));
  OpPtr op5_any = Receive(-1, MakeTag(5, 2));
  for (const OpPtr& op : {op4_peer1, op4_any, op5_peer1, op5_peer2, op5_any}) matcher.Wait(op);
  auto early = matcher.Stage(3, MakeTag(4, 2), 0, 16);
  ASSERT_TRUE(early.ok());
  OpPtr on_early = Receive(3, MakeTag(4, 2));
  (*early)->waiter = on_early;
  EXPECT_THAT(matcher.DropOperation(4), UnorderedElementsAre(op4_peer1, op4_any, on_early));
  EXPECT_EQ(matcher.staged_bytes(), 0u);
  EXPECT_THAT(matcher.DropWaitingFor(1, /*any_too=*/false), UnorderedElementsAre(op5_peer1));
  EXPECT_THAT(matcher.DropWaitingFor(3, /*any_too=*/true), UnorderedElementsAre(op5_any));
  ASSERT_TRUE(matcher.Stage(1, 1, 0, 16).ok());
  EXPECT_THAT(matcher.DropAll(), UnorderedElementsAre(op5_peer2));
  EXPECT_EQ(matcher.staged_bytes(), 0u);
  EXPECT_EQ(matcher.TakeWaiting(2, MakeTag(5, 0)), nullptr);
}

TEST(StagingPoolTest, BuffersAreReusedForMessagesThatFillThemAboutHalf) {
  StagingPool pool;
  StagedMessage big;
  pool.Take(big, 1 << 20);
  uint8_t* bytes = big.bytes.get();
  pool.Return(big);
  EXPECT_EQ(pool.pooled_bytes(), 1u << 20);
  StagedMessage tiny;  // Far smaller: gets its own buffer, the big one stays pooled.
  pool.Take(tiny, 1000);
  EXPECT_NE(tiny.bytes.get(), bytes);
  EXPECT_EQ(pool.pooled_bytes(), 1u << 20);
  StagedMessage half;
  pool.Take(half, (1 << 19) + 1);
  EXPECT_EQ(half.bytes.get(), bytes);
  EXPECT_EQ(half.capacity, 1u << 20);
  EXPECT_EQ(pool.pooled_bytes(), 0u);
  pool.Return(tiny);  // Under 4 KiB: not kept.
  EXPECT_EQ(pool.pooled_bytes(), 0u);
}

}  // namespace
}  // namespace plexus::tcp
