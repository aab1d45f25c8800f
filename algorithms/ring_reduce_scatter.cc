// Ring reduce-scatter: size - 1 steps; at step s rank r forwards block (r - 1 - s) to its right
// neighbour and folds block (r - 2 - s) from its left one into its own copy. Blocks move in
// segments, and each reduced segment is forwarded at once, so reduction overlaps transfer.
// Block b is completed by rank b, which applies the last reduction: one owner, one order.
#include <algorithm>
#include <utility>
#include <vector>

#include "algorithms/algorithms.h"
#include "algorithms/reduce_kernels.h"

namespace plexus::algorithms {

absl::Status RingReduceScatter(CollectiveContext& ctx, uint8_t* data, const Partition& blocks,
                               DType dtype, ReduceOpKind op, uint32_t step_base) {
  const int n = ctx.size();
  const int r = ctx.rank();
  if (n == 1) return absl::OkStatus();
  const int right = (r + 1) % n;
  const int left = (r + n - 1) % n;
  const size_t element = DTypeSize(dtype);
  const int64_t segment = std::max<int64_t>(1, kSegmentBytes / element);
  const int64_t largest = *std::max_element(blocks.counts.begin(), blocks.counts.end());
  // Two halves, alternating by step: the next step's receives are posted before this step's
  // segments are folded, so a left neighbour running ahead lands in place instead of in the
  // transport's staging (one copy less per byte).
  const size_t half = static_cast<size_t>(largest) * element;
  uint8_t* scratch = ctx.Scratch(ScratchArena::kReduceIn, 2 * half);
  auto block_of = [&](int s) { return ((r - 2 - s) % n + 2 * n) % n; };
  auto post_receives = [&](int s) {
    const int block = block_of(s);
    uint8_t* into = scratch + (s % 2) * half;
    std::vector<WorkPtr> recvs;
    for (int64_t off = 0; off < blocks.counts[block]; off += segment) {
      const int64_t count = std::min(segment, blocks.counts[block] - off);
      recvs.push_back(ctx.Recv(left, step_base + s, into + off * element, count * element));
    }
    if (blocks.counts[block] == 0) recvs.push_back(ctx.Recv(left, step_base + s, into, 0));
    return recvs;
  };

  std::vector<WorkPtr> sends;
  auto send_block = [&](int block, uint32_t step) {
    for (int64_t off = 0; off < blocks.counts[block]; off += segment) {
      const int64_t count = std::min(segment, blocks.counts[block] - off);
      sends.push_back(
          ctx.Send(right, step, data + (blocks.offsets[block] + off) * element, count * element));
    }
    if (blocks.counts[block] == 0) sends.push_back(ctx.Send(right, step, data, 0));
  };
  std::vector<WorkPtr> recvs = post_receives(0);
  send_block((r + n - 1) % n, step_base);
  for (int s = 0; s < n - 1; ++s) {
    const int block = block_of(s);
    const uint32_t step = step_base + s;
    const uint8_t* from = scratch + (s % 2) * half;
    std::vector<WorkPtr> next = s + 1 < n - 1 ? post_receives(s + 1) : std::vector<WorkPtr>();
    int64_t off = 0;
    for (const WorkPtr& recv : recvs) {
      if (absl::Status status = ctx.Wait(recv); !status.ok()) return status;
      const int64_t count = std::min(segment, blocks.counts[block] - off);
      uint8_t* target = data + (blocks.offsets[block] + off) * element;
      if (count > 0) ReduceInto(target, from + off * element, count, dtype, op);
      if (s < n - 2) sends.push_back(ctx.Send(right, step + 1, target, count * element));
      off += segment;
    }
    recvs = std::move(next);
  }
  return ctx.WaitAll(sends);
}

}  // namespace plexus::algorithms
