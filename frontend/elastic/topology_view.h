// What a peer knows of its group: the topology the master announced last, which operations run
// in, and the view its caller reads (GetAttribute, Ring), which moves to the announcement only
// when the caller's own elastic calls adopt it - never under the caller's feet, as in PCCL.
// Not thread-safe: the communicator guards it with its lock.
#ifndef PLEXUS_FRONTEND_ELASTIC_TOPOLOGY_VIEW_H_
#define PLEXUS_FRONTEND_ELASTIC_TOPOLOGY_VIEW_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "frontend/elastic/elastic_types.h"
#include "frontend/elastic/master_protocol.h"

namespace plexus::elastic {

class TopologyView {
 public:
  // The master announced `topology` (the group's new epoch).
  void Announce(const Topology& topology);
  // The caller's view becomes the latest announcement, if there is one.
  void Adopt();
  // Forgets both: a new connection to the master starts over.
  void Clear();

  // Whether the master announced a topology (this peer was accepted).
  bool announced() const { return has_announced_; }
  // The latest announcement; meaningful once announced().
  const Topology& latest() const { return latest_; }
  int64_t epoch() const { return latest_.epoch; }
  // Whether `peer` is in the latest announcement's ring.
  bool Includes(int64_t peer) const;

  // An attribute of the caller's view (kNotInitialized before anything was adopted).
  absl::StatusOr<int64_t> Attribute(elastic::Attribute attribute) const;
  // The same attribute of the latest announcement.
  absl::StatusOr<int64_t> AnnouncedAttribute(elastic::Attribute attribute) const;
  // The caller's view of the ring (empty before anything was adopted).
  std::vector<int64_t> Ring() const;

 private:
  bool has_announced_ = false;
  Topology latest_;
  bool has_view_ = false;
  Topology view_;
};

}  // namespace plexus::elastic

#endif  // PLEXUS_FRONTEND_ELASTIC_TOPOLOGY_VIEW_H_
