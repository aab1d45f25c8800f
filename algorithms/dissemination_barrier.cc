// Dissemination barrier: in round k every rank signals rank + 2^k and waits for rank - 2^k;
// after ceil(log2(size)) rounds each rank has transitively heard from all others.
#include "algorithms/algorithms.h"

namespace plexus::algorithms {

absl::Status DisseminationBarrier(CollectiveContext& ctx) {
  const int n = ctx.size();
  const int r = ctx.rank();
  uint32_t round = 0;
  for (int distance = 1; distance < n; distance <<= 1, ++round) {
    WorkPtr send = ctx.Send((r + distance) % n, round, nullptr, 0);
    WorkPtr recv = ctx.Recv((r - distance + n) % n, round, nullptr, 0);
    if (absl::Status status = ctx.WaitAll({send, recv}); !status.ok()) return status;
  }
  return absl::OkStatus();
}

}  // namespace plexus::algorithms
