#include "algorithms/algorithm_table.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace plexus {
namespace {

using ::testing::HasSubstr;

TEST(AlgorithmTableTest, DefaultsSplitAllReduceBySize) {
  AlgorithmTable table = AlgorithmTable::Default();
  EXPECT_EQ(table.Choose("all_reduce", 1024), "rd");
  EXPECT_EQ(table.Choose("all_reduce", (128 << 10) - 1), "rd");
  EXPECT_EQ(table.Choose("all_reduce", 128 << 10), "hd");
  EXPECT_EQ(table.Choose("all_reduce", (8 << 20) - 1), "hd");
  EXPECT_EQ(table.Choose("all_reduce", 8 << 20), "ring");
  EXPECT_EQ(table.Choose("all_reduce", uint64_t{1} << 40), "ring");
  EXPECT_EQ(table.Choose("broadcast", 0), "binomial");
  EXPECT_EQ(table.Choose("barrier", 0), "dissemination");
  EXPECT_EQ(table.Choose("barrier_same_host", 0), "shm");
}

TEST(AlgorithmTableTest, OverridesReplaceOneCollective) {
  AlgorithmTable table = AlgorithmTable::Default();
  ASSERT_TRUE(table.Override("all_reduce:0-1M:ring,1M-:rd").ok());
  EXPECT_EQ(table.Choose("all_reduce", 10), "ring");
  EXPECT_EQ(table.Choose("all_reduce", 2 << 20), "rd");
  EXPECT_EQ(table.Choose("broadcast", 10), "binomial");
  ASSERT_TRUE(table.Override("all_reduce:0-16:rd").ok());
  EXPECT_EQ(table.Choose("all_reduce", 100), "ring");  // Gap: the default algorithm.
}

TEST(AlgorithmTableTest, BadOverridesNameTheProblem) {
  AlgorithmTable table = AlgorithmTable::Default();
  EXPECT_THAT(table.Override("allreduce:0-:ring").message(), HasSubstr("unknown collective"));
  EXPECT_THAT(table.Override("all_reduce:0-:tree").message(),
              HasSubstr("unknown algorithm 'tree' for all_reduce; known: ring, rd, hd"));
  EXPECT_THAT(table.Override("all_reduce:ring").message(), HasSubstr("LOW-HIGH"));
  EXPECT_THAT(table.Override("all_reduce:64K-1K:ring").message(), HasSubstr("empty range"));
  EXPECT_THAT(table.Override("all_reduce:1X-:ring").message(), HasSubstr("bad size"));
  EXPECT_EQ(table.Choose("all_reduce", 10), "rd");  // Unchanged by failed overrides.
}

}  // namespace
}  // namespace plexus
