// Linear gather: every rank sends its input straight to the root, which has posted one
// receive per rank directly into the output tensors (no staging). size - 1 messages into one
// port: simple and optimal while the root's link, not latency, is the limit.
#include <cstring>
#include <vector>

#include "algorithms/algorithms.h"

namespace plexus::algorithms {

absl::Status LinearGather(CollectiveContext& ctx, const void* input, size_t bytes,
                          const std::vector<void*>& outputs, int root) {
  if (ctx.rank() != root) return ctx.Wait(ctx.Send(root, 0, input, bytes));
  std::vector<WorkPtr> recvs;
  for (int peer = 0; peer < ctx.size(); ++peer) {
    if (peer == root) continue;
    recvs.push_back(ctx.Recv(peer, 0, outputs[peer], bytes));
  }
  if (bytes > 0 && outputs[root] != input) std::memcpy(outputs[root], input, bytes);
  return ctx.WaitAll(recvs);
}

}  // namespace plexus::algorithms
