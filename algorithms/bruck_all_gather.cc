// Bruck's all-gather: in round k (distance d = 2^k) every rank holds the blocks of ranks
// r .. r + d - 1 (mod p); it sends the first min(d, p - d) of them to rank r - d and receives
// as many, the blocks of ranks r + d onwards, from rank r + d. After ceil(log2 p) rounds every
// rank holds all p. Each block travels as its own message, tagged by its owner's rank (a rank
// receives each block once), so nothing is packed or copied; a round's receives are waited on
// before the next round forwards them.
#include <algorithm>
#include <vector>

#include "algorithms/algorithms.h"

namespace plexus::algorithms {

absl::Status BruckAllGather(CollectiveContext& ctx, const std::vector<ByteBlock>& blocks) {
  const int n = ctx.size();
  const int r = ctx.rank();
  std::vector<WorkPtr> sends;
  for (int distance = 1; distance < n; distance *= 2) {
    const int moved = std::min(distance, n - distance);
    const int to = (r - distance + n) % n;
    const int from = (r + distance) % n;
    std::vector<WorkPtr> recvs;
    for (int i = 0; i < moved; ++i) {
      const int block = (from + i) % n;
      recvs.push_back(
          ctx.Recv(from, static_cast<uint32_t>(block), blocks[block].data, blocks[block].bytes));
    }
    for (int i = 0; i < moved; ++i) {
      const int block = (r + i) % n;
      sends.push_back(
          ctx.Send(to, static_cast<uint32_t>(block), blocks[block].data, blocks[block].bytes));
    }
    if (absl::Status status = ctx.WaitAll(recvs); !status.ok()) return status;
  }
  return ctx.WaitAll(sends);
}

}  // namespace plexus::algorithms
