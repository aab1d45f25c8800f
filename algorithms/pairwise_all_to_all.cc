// Pairwise all-to-all: every receive is posted first (straight into place), then at step s
// rank r sends to r + s, so each step pairs distinct senders and receivers and no link carries
// two messages at once. Block sizes may differ per peer.
#include <cstring>
#include <vector>

#include "algorithms/algorithms.h"

namespace plexus::algorithms {

absl::Status PairwiseAllToAll(CollectiveContext& ctx, const std::vector<ByteBlock>& send_blocks,
                              const std::vector<ByteBlock>& recv_blocks) {
  const int n = ctx.size();
  const int r = ctx.rank();
  std::vector<WorkPtr> works;
  for (int s = 1; s < n; ++s) {
    const int source = (r - s + n) % n;
    works.push_back(ctx.Recv(source, 0, recv_blocks[source].data, recv_blocks[source].bytes));
  }
  if (recv_blocks[r].bytes > 0 && recv_blocks[r].data != send_blocks[r].data) {
    std::memmove(recv_blocks[r].data, send_blocks[r].data, recv_blocks[r].bytes);
  }
  for (int s = 1; s < n; ++s) {
    const int dest = (r + s) % n;
    works.push_back(ctx.Send(dest, 0, send_blocks[dest].data, send_blocks[dest].bytes));
  }
  return ctx.WaitAll(works);
}

}  // namespace plexus::algorithms
