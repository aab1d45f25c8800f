#include "frontend/elastic/topology_view.h"

#include <algorithm>

namespace plexus::elastic {
namespace {

absl::StatusOr<int64_t> AttributeOf(const Topology& topology, Attribute attribute) {
  switch (attribute) {
    case Attribute::kGlobalWorldSize:
      return topology.global_world_size;
    case Attribute::kLocalWorldSize:
      return static_cast<int64_t>(topology.ring.size());
    case Attribute::kNumDistinctPeerGroups:
      return topology.num_groups;
    case Attribute::kLargestPeerGroupWorldSize:
      return topology.largest_group;
  }
  return absl::InvalidArgumentError("unknown attribute");
}

absl::Status NotConnected() {
  return WithResult(absl::FailedPreconditionError("not connected: call connect() first"),
                    Result::kNotInitialized);
}

}  // namespace

void TopologyView::Announce(const Topology& topology) {
  latest_ = topology;
  has_announced_ = true;
}

void TopologyView::Adopt() {
  if (!has_announced_) return;
  view_ = latest_;
  has_view_ = true;
}

void TopologyView::Clear() {
  has_announced_ = false;
  has_view_ = false;
}

bool TopologyView::Includes(int64_t peer) const {
  return has_announced_ && std::count(latest_.ring.begin(), latest_.ring.end(), peer) > 0;
}

absl::StatusOr<int64_t> TopologyView::Attribute(elastic::Attribute attribute) const {
  if (!has_view_) return NotConnected();
  return AttributeOf(view_, attribute);
}

absl::StatusOr<int64_t> TopologyView::AnnouncedAttribute(elastic::Attribute attribute) const {
  if (!has_announced_) return NotConnected();
  return AttributeOf(latest_, attribute);
}

std::vector<int64_t> TopologyView::Ring() const {
  return has_view_ ? view_.ring : std::vector<int64_t>{};
}

}  // namespace plexus::elastic
