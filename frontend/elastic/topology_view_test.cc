// TopologyView: what the caller reads moves to the master's announcement only when adopted;
// attributes of both; a fresh connection forgets everything.
#include "frontend/elastic/topology_view.h"

#include "gtest/gtest.h"

namespace plexus::elastic {
namespace {

Topology Epoch(int64_t epoch, std::vector<int64_t> ring, int64_t world) {
  Topology t;
  t.group = 0;
  t.epoch = epoch;
  t.ring = std::move(ring);
  t.global_world_size = world;
  t.num_groups = 1;
  t.largest_group = static_cast<int64_t>(t.ring.size());
  return t;
}

TEST(TopologyViewTest, TheCallersViewMovesOnlyWhenAdopted) {
  TopologyView view;
  EXPECT_FALSE(view.announced());
  EXPECT_EQ(ResultOf(view.Attribute(Attribute::kGlobalWorldSize).status()),
            Result::kNotInitialized);
  EXPECT_TRUE(view.Ring().empty());
  view.Adopt();  // Nothing announced: nothing to adopt.
  EXPECT_FALSE(view.Attribute(Attribute::kGlobalWorldSize).ok());

  view.Announce(Epoch(1, {4, 7}, 2));
  EXPECT_TRUE(view.announced());
  EXPECT_TRUE(view.Includes(7));
  EXPECT_FALSE(view.Includes(5));
  EXPECT_EQ(*view.AnnouncedAttribute(Attribute::kLocalWorldSize), 2);
  EXPECT_FALSE(view.Attribute(Attribute::kLocalWorldSize).ok());  // Not adopted yet.
  view.Adopt();
  EXPECT_EQ(*view.Attribute(Attribute::kGlobalWorldSize), 2);
  EXPECT_EQ(view.Ring(), (std::vector<int64_t>{4, 7}));

  // A newcomer is accepted: operations move to epoch 2 at once, the caller's view does not.
  view.Announce(Epoch(2, {4, 7, 9}, 3));
  EXPECT_EQ(view.epoch(), 2);
  EXPECT_EQ(view.latest().ring.size(), 3u);
  EXPECT_EQ(*view.AnnouncedAttribute(Attribute::kGlobalWorldSize), 3);
  EXPECT_EQ(*view.Attribute(Attribute::kGlobalWorldSize), 2);
  EXPECT_EQ(view.Ring(), (std::vector<int64_t>{4, 7}));
  view.Adopt();
  EXPECT_EQ(*view.Attribute(Attribute::kGlobalWorldSize), 3);
  EXPECT_EQ(*view.Attribute(Attribute::kLargestPeerGroupWorldSize), 3);
  EXPECT_EQ(*view.Attribute(Attribute::kNumDistinctPeerGroups), 1);
}

TEST(TopologyViewTest, ClearForgetsTheOldConnection) {
  TopologyView view;
  view.Announce(Epoch(5, {1}, 1));
  view.Adopt();
  view.Clear();
  EXPECT_FALSE(view.announced());
  EXPECT_FALSE(view.Includes(1));
  EXPECT_FALSE(view.Attribute(Attribute::kGlobalWorldSize).ok());
  EXPECT_FALSE(view.AnnouncedAttribute(Attribute::kGlobalWorldSize).ok());
  EXPECT_TRUE(view.Ring().empty());
  EXPECT_EQ(view.Attribute(static_cast<Attribute>(99)).status().code(),
            absl::StatusCode::kFailedPrecondition);  // Not connected comes first.
  view.Announce(Epoch(1, {1}, 1));
  view.Adopt();
  EXPECT_EQ(view.Attribute(static_cast<Attribute>(99)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace plexus::elastic
