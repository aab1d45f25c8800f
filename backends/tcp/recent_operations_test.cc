// RecentOperations: a value per operation for the most recent ones only; the first value stays.
#include "backends/tcp/recent_operations.h"

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace plexus::tcp {
namespace {

TEST(RecentOperationsTest, TheOldestIsForgottenPastTheCapacity) {
  RecentOperations<uint64_t> recent(2);
  EXPECT_TRUE(recent.Remember(1, 10));
  EXPECT_TRUE(recent.Remember(2, 20));
  EXPECT_TRUE(recent.Remember(3, 30));
  EXPECT_EQ(recent.size(), 2u);
  EXPECT_FALSE(recent.Contains(1));
  EXPECT_EQ(recent.Find(1), nullptr);
  ASSERT_NE(recent.Find(2), nullptr);
  EXPECT_EQ(*recent.Find(2), 20u);
  EXPECT_EQ(*recent.Find(3), 30u);
}

TEST(RecentOperationsTest, TheFirstValueAndItsPlaceStay) {
  RecentOperations<absl::Status> aborted(2);
  EXPECT_TRUE(aborted.Remember(7, absl::AbortedError("first")));
  EXPECT_FALSE(aborted.Remember(7, absl::CancelledError("second")));
  EXPECT_EQ(aborted.Find(7)->message(), "first");
  EXPECT_TRUE(aborted.Remember(8, absl::OkStatus()));
  EXPECT_TRUE(aborted.Remember(9, absl::OkStatus()));  // 7 is the oldest: it goes.
  EXPECT_FALSE(aborted.Contains(7));
  EXPECT_TRUE(aborted.Remember(7, absl::CancelledError("again")));  // Remembered anew.
  EXPECT_EQ(aborted.Find(7)->message(), "again");
  EXPECT_FALSE(aborted.Contains(8));
}

}  // namespace
}  // namespace plexus::tcp
