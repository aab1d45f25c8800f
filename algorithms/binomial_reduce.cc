// Binomial-tree reduce: with ranks renumbered so the root is 0, rank v folds in the partial
// results of its children v + 1, v + 2, v + 4, ... (in that order) and sends its own to its
// parent. Only the root's buffer is written; the fixed tree fixes the reduction order.
#include <cstring>
#include <vector>

#include "algorithms/algorithms.h"
#include "algorithms/reduce_kernels.h"

namespace plexus::algorithms {

absl::Status BinomialReduce(CollectiveContext& ctx, void* data, int64_t count, DType dtype,
                            ReduceOpKind op, int root) {
  const int n = ctx.size();
  if (n == 1) return absl::OkStatus();
  const int v = (ctx.rank() - root + n) % n;
  const size_t bytes = static_cast<size_t>(count) * DTypeSize(dtype);
  uint8_t* accumulator = ctx.Scratch(ScratchArena::kAccumulator, bytes);
  uint8_t* incoming = ctx.Scratch(ScratchArena::kReduceIn, bytes);
  if (bytes > 0) std::memcpy(accumulator, data, bytes);
  for (int mask = 1; mask < n; mask <<= 1) {
    if (v & mask) {
      const int parent = (v - mask + root) % n;
      return ctx.Wait(ctx.Send(parent, 0, accumulator, bytes));
    }
    if (v + mask < n) {
      const int child = (v + mask + root) % n;
      if (absl::Status status = ctx.Wait(ctx.Recv(child, 0, incoming, bytes)); !status.ok()) {
        return status;
      }
      ReduceInto(accumulator, incoming, count, dtype, op);
    }
  }
  if (bytes > 0) std::memcpy(data, accumulator, bytes);  // Only the root gets here.
  return absl::OkStatus();
}

}  // namespace plexus::algorithms
