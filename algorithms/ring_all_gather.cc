// Ring all-gather: size - 1 steps; at step s rank r forwards block (r - s) to its right
// neighbour and receives block (r - s - 1), straight into its final place, from its left one.
// All receives are posted up front so every payload lands without staging; the ring
// all-reduce posts them even before its reduce-scatter starts (see ring_all_reduce.cc).
#include <vector>

#include "algorithms/algorithms.h"

namespace plexus::algorithms {

std::vector<WorkPtr> PostRingAllGatherReceives(CollectiveContext& ctx,
                                               const std::vector<uint8_t*>& blocks,
                                               const std::vector<size_t>& bytes,
                                               uint32_t step_base) {
  const int n = ctx.size();
  const int r = ctx.rank();
  std::vector<WorkPtr> recvs;
  for (int s = 0; s < n - 1; ++s) {
    const int block = ((r - s - 1) % n + n) % n;
    recvs.push_back(ctx.Recv((r + n - 1) % n, step_base + s, blocks[block], bytes[block]));
  }
  return recvs;
}

absl::Status RingAllGather(CollectiveContext& ctx, const std::vector<uint8_t*>& blocks,
                           const std::vector<size_t>& bytes, uint32_t step_base,
                           std::vector<WorkPtr> posted) {
  const int n = ctx.size();
  const int r = ctx.rank();
  if (n == 1) return absl::OkStatus();
  const int right = (r + 1) % n;
  std::vector<WorkPtr> recvs =
      posted.empty() ? PostRingAllGatherReceives(ctx, blocks, bytes, step_base) : std::move(posted);
  std::vector<WorkPtr> sends;
  for (int s = 0; s < n - 1; ++s) {
    const int block = ((r - s) % n + n) % n;
    if (s > 0) {
      if (absl::Status status = ctx.Wait(recvs[s - 1]); !status.ok()) return status;
    }
    sends.push_back(ctx.Send(right, step_base + s, blocks[block], bytes[block]));
  }
  if (absl::Status status = ctx.Wait(recvs[n - 2]); !status.ok()) return status;
  return ctx.WaitAll(sends);
}

}  // namespace plexus::algorithms
