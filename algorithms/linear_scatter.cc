// Linear scatter: the root sends inputs[i] straight to rank i, which receives it directly
// into its output.
#include <cstring>
#include <vector>

#include "algorithms/algorithms.h"

namespace plexus::algorithms {

absl::Status LinearScatter(CollectiveContext& ctx, void* output, size_t bytes,
                           const std::vector<const void*>& inputs, int root) {
  if (ctx.rank() != root) return ctx.Wait(ctx.Recv(root, 0, output, bytes));
  std::vector<WorkPtr> sends;
  for (int peer = 0; peer < ctx.size(); ++peer) {
    if (peer == root) continue;
    sends.push_back(ctx.Send(peer, 0, inputs[peer], bytes));
  }
  if (bytes > 0 && inputs[root] != output) std::memcpy(output, inputs[root], bytes);
  return ctx.WaitAll(sends);
}

}  // namespace plexus::algorithms
