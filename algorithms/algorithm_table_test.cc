#include "algorithms/algorithm_table.h"

#include <set>
#include <string>

#include "algorithms/algorithm_catalog.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace plexus::algorithms {
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
  EXPECT_THAT(table.Override("all_reduce:1X-:ring").message(), HasSubstr("bad byte count '1X'"));
  EXPECT_EQ(table.Choose("all_reduce", 10), "rd");  // Unchanged by failed overrides.
}

// What selection relies on: each collective's default ranges tile [0, no limit) without
// overlap, names are unique per collective, every row has a function, and only the same-host
// sets hold arena schedules.
TEST(AlgorithmCatalogTest, EveryCollectiveIsCoveredAndRunnable) {
  const AlgorithmTable table = AlgorithmTable::Default();
  for (const std::string& collective : KnownCollectives()) {
    SCOPED_TRACE(collective);
    uint64_t covered = 0;
    for (const AlgorithmRange& range : table.ranges()) {
      if (range.collective != collective) continue;
      EXPECT_EQ(range.min_bytes, covered);
      covered = range.max_bytes;
    }
    EXPECT_EQ(covered, kNoSizeLimit);
    std::set<std::string> names;
    const bool same_host = collective.find("_same_host") != std::string::npos;
    for (const Algorithm& row : AlgorithmCatalog()) {
      if (row.collective != collective) continue;
      EXPECT_TRUE(names.insert(row.name).second) << row.name;
      EXPECT_NE(row.run, nullptr) << row.name;
      EXPECT_TRUE(!row.needs_arena || same_host) << row.name;
      if (row.default_from < row.default_to) {  // Its default sizes reach it.
        EXPECT_EQ(&table.Select(collective, row.default_from), &row) << row.name;
        EXPECT_EQ(&table.Select(collective, row.default_to - 1), &row) << row.name;
      }
    }
    EXPECT_EQ(std::vector<std::string>(names.begin(), names.end()).size(),
              KnownAlgorithms(collective).size());
  }
  EXPECT_EQ(FindAlgorithm("all_reduce", "shm"), nullptr);  // Only where the arena is.
  EXPECT_TRUE(FindAlgorithm("all_reduce_same_host", "shm_rs")->needs_arena);
}

TEST(AlgorithmCatalogTest, SelectFollowsOverridesAndGaps) {
  AlgorithmTable table = AlgorithmTable::Default();
  ASSERT_TRUE(table.Override("all_reduce_same_host:0-1K:ring,2K-:hd").ok());
  EXPECT_EQ(table.Select("all_reduce_same_host", 10).name, std::string("ring"));
  EXPECT_FALSE(table.Select("all_reduce_same_host", 10).needs_arena);
  // The gap falls to the set's first row.
  EXPECT_EQ(table.Select("all_reduce_same_host", 1500).name, std::string("shm_rs"));
  EXPECT_EQ(table.Select("all_reduce_same_host", 1 << 20).name, std::string("hd"));
}

}  // namespace
}  // namespace plexus::algorithms
