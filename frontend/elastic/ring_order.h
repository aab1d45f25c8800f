// The ring order optimize_topology picks: the algorithms send from ring position i to i + 1, so a
// ring is as fast as its slowest directed link. BestRing maximises that bottleneck (ties: the
// larger total), exhaustively up to kExhaustiveRingSize members and greedily beyond.
#ifndef PLEXUS_FRONTEND_ELASTIC_RING_ORDER_H_
#define PLEXUS_FRONTEND_ELASTIC_RING_ORDER_H_

#include <vector>

namespace plexus::elastic {

inline constexpr int kExhaustiveRingSize = 9;

// bandwidth[i][j]: measured bytes/s from member i to member j.
using BandwidthMatrix = std::vector<std::vector<double>>;

// The slowest link of the ring `order` (member indices).
double Bottleneck(const std::vector<int>& order, const BandwidthMatrix& bandwidth);

// The best ring found, as member indices starting with member 0.
std::vector<int> BestRing(const BandwidthMatrix& bandwidth);

}  // namespace plexus::elastic

#endif  // PLEXUS_FRONTEND_ELASTIC_RING_ORDER_H_
