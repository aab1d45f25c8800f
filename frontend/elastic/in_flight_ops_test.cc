// InFlightOps without a master or sockets: one op per tag, instance numbers per tag and epoch,
// reports about an earlier instance of a tag finding nothing, and rounds held under several tags.
#include "frontend/elastic/in_flight_ops.h"

#include <memory>

#include "gtest/gtest.h"

namespace plexus::elastic {
namespace {

struct FakeOp {
  OpKey key;
  bool decided = false;
};

std::shared_ptr<FakeOp> MakeOp(int64_t epoch, uint64_t tag, int64_t instance) {
  auto op = std::make_shared<FakeOp>();
  op->key.group = 1;
  op->key.epoch = epoch;
  op->key.tag = static_cast<int64_t>(tag);
  op->key.instance = instance;
  return op;
}

TEST(InFlightOpsTest, OneOpPerTagUntilItIsRemoved) {
  InFlightOps<FakeOp> ops;
  auto first = MakeOp(0, 7, ops.NextInstance(7, 0));
  EXPECT_TRUE(ops.Add(7, first));
  EXPECT_TRUE(ops.Contains(7));
  EXPECT_FALSE(ops.Add(7, MakeOp(0, 7, 1)));  // Refused: the first still runs.
  EXPECT_EQ(ops.Find(first->key), first);
  EXPECT_EQ(ops.size(), 1u);
  ops.Remove(7, first);
  EXPECT_TRUE(ops.empty());
  EXPECT_EQ(ops.Find(first->key), nullptr);
}

TEST(InFlightOpsTest, InstancesCountPerTagAndRestartInANewEpoch) {
  InFlightOps<FakeOp> ops;
  EXPECT_EQ(ops.NextInstance(1, 0), 0);
  EXPECT_EQ(ops.NextInstance(1, 0), 1);
  EXPECT_EQ(ops.NextInstance(2, 0), 0);  // Each tag counts on its own.
  EXPECT_EQ(ops.NextInstance(1, 3), 0);  // A new epoch starts again.
  EXPECT_EQ(ops.NextInstance(1, 3), 1);
  ops.ForgetInstances();  // A new connection to the master.
  EXPECT_EQ(ops.NextInstance(1, 3), 0);
}

TEST(InFlightOpsTest, ReportsAboutAnotherInstanceOrEpochFindNothing) {
  InFlightOps<FakeOp> ops;
  auto retry = MakeOp(2, 5, 1);
  ASSERT_TRUE(ops.Add(5, retry));
  EXPECT_EQ(ops.Find(MakeOp(2, 5, 0)->key), nullptr);  // The failed first attempt's outcome.
  EXPECT_EQ(ops.Find(MakeOp(1, 5, 1)->key), nullptr);  // The same instance of an older epoch.
  EXPECT_EQ(ops.Find(MakeOp(2, 6, 1)->key), nullptr);
  EXPECT_EQ(ops.Find(retry->key), retry);
  // Removing an op that is no longer the one in flight leaves the current one.
  ops.Remove(5, MakeOp(2, 5, 0));
  EXPECT_EQ(ops.Find(retry->key), retry);
}

TEST(InFlightOpsTest, ForEachVisitsEveryOpInFlight) {
  InFlightOps<FakeOp> ops;
  for (uint64_t tag = 0; tag < 4; ++tag) ASSERT_TRUE(ops.Add(tag, MakeOp(0, tag, 0)));
  int visited = 0;
  ops.ForEach([&](FakeOp& op) {
    op.decided = true;
    ++visited;
  });
  EXPECT_EQ(visited, 4);
  for (uint64_t tag = 0; tag < 4; ++tag) EXPECT_TRUE(ops.Find(MakeOp(0, tag, 0)->key)->decided);
}

TEST(InFlightOpsTest, ARoundUnderItsOwnAndItsPartsTagsCountsOnceAndFindsOnlyByItsKey) {
  InFlightOps<FakeOp> ops;
  const uint64_t round_tag = kMaxTag + 2;
  auto round = MakeOp(0, round_tag, ops.NextInstance(round_tag, 0));
  ASSERT_TRUE(ops.Add(round_tag, round));
  for (uint64_t tag : {2, 3, 5}) ASSERT_TRUE(ops.Add(tag, round));
  EXPECT_TRUE(ops.Contains(3));  // A lone all-reduce with a part's tag is refused.
  EXPECT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops.Find(round->key), round);
  EXPECT_EQ(ops.Find(MakeOp(0, 3, 0)->key), nullptr);  // A report about tag 3 is not the round's.
  int visited = 0;
  ops.ForEach([&](FakeOp&) { ++visited; });
  EXPECT_EQ(visited, 1);
  ops.Remove(round_tag, round);
  for (uint64_t tag : {2, 3, 5}) ops.Remove(tag, round);
  EXPECT_TRUE(ops.empty());
}

}  // namespace
}  // namespace plexus::elastic
