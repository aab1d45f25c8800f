#include "base/core/collective.h"

#include <set>
#include <string>

#include "gtest/gtest.h"

namespace plexus {
namespace {

// The order is a static_assert in collective.h; the names are checked here.
TEST(CollectiveTraitsTest, EveryKindHasItsOwnRowAndName) {
  std::set<std::string> names;
  for (size_t i = 0; i < std::size(kCollectiveTraits); ++i) {
    const CollectiveTraits& row = kCollectiveTraits[i];
    EXPECT_EQ(&TraitsOf(row.kind), &row);
    EXPECT_TRUE(names.insert(std::string(row.name)).second) << row.name << " is listed twice";
  }
  EXPECT_EQ(CollectiveName(CollectiveKind{0}), "unknown");
  EXPECT_EQ(CollectiveName(CollectiveKind{200}), "unknown");
}

TEST(CollectiveTest, InPlaceCallsReadAndWriteTheSameTensors) {
  float data[4] = {1, 2, 3, 4};
  const Tensor tensor = Tensor::Flat(data, DType::kFloat32, 4);
  Collective call = Collective::InPlace(CollectiveKind::kAllReduce, {&tensor, 1});
  call.op = ReduceOpKind::kMax;
  call.timeout = absl::Seconds(3);
  EXPECT_EQ(call.tensor().data(), data);
  EXPECT_EQ(call.input().data(), call.output().data());
  EXPECT_EQ(call.op.kind, ReduceOpKind::kMax);
  EXPECT_EQ(call.timeout, absl::Seconds(3));
  EXPECT_TRUE(call.traits().reduces());
  EXPECT_EQ(call.name(), "all_reduce");
}

}  // namespace
}  // namespace plexus
