// Recursive doubling all-reduce: with p the largest power of two <= size, the first
// 2 (size - p) ranks pair up and the odd one folds in its even partner's buffer; the p
// remaining ranks then exchange whole buffers with partners at distance 1, 2, 4, ... and
// combine; finally the folded-out ranks receive the result. log2(p) + 2 latency terms: the
// choice for small messages. Partners combine commutatively, so both hold identical bits.
#include <vector>

#include "algorithms/algorithms.h"
#include "algorithms/reduce_kernels.h"

namespace plexus {

absl::Status RecursiveDoublingAllReduce(CollectiveContext& ctx, void* data, int64_t count,
                                        DType dtype, ReduceOpKind op) {
  const int n = ctx.size();
  const int r = ctx.rank();
  if (n == 1) return absl::OkStatus();
  const size_t bytes = static_cast<size_t>(count) * DTypeSize(dtype);
  uint8_t* scratch = ctx.Scratch(ScratchArena::kReduceIn, bytes);
  int p = 1;
  while (p * 2 <= n) p *= 2;
  const int extra = n - p;
  int vrank;  // Rank among the p that exchange; -1 for the folded-out ranks.
  if (r < 2 * extra) {
    if (r % 2 == 0) {
      if (absl::Status status = ctx.Wait(ctx.Send(r + 1, 0, data, bytes)); !status.ok()) {
        return status;
      }
      vrank = -1;
    } else {
      if (absl::Status status = ctx.Wait(ctx.Recv(r - 1, 0, scratch, bytes));
          !status.ok()) {
        return status;
      }
      ReduceInto(data, scratch, count, dtype, op);
      vrank = r / 2;
    }
  } else {
    vrank = r - extra;
  }
  auto real_rank = [extra](int v) { return v < extra ? 2 * v + 1 : v + extra; };
  if (vrank >= 0) {
    uint32_t step = 1;
    for (int mask = 1; mask < p; mask <<= 1, ++step) {
      const int partner = real_rank(vrank ^ mask);
      WorkPtr recv = ctx.Recv(partner, step, scratch, bytes);
      WorkPtr send = ctx.Send(partner, step, data, bytes);
      if (absl::Status status = ctx.WaitAll({recv, send}); !status.ok()) return status;
      ReduceInto(data, scratch, count, dtype, op);
    }
  }
  constexpr uint32_t kResultStep = 64;
  if (r < 2 * extra) {
    WorkPtr last = r % 2 == 1 ? ctx.Send(r - 1, kResultStep, data, bytes)
                              : ctx.Recv(r + 1, kResultStep, data, bytes);
    return ctx.Wait(last);
  }
  return absl::OkStatus();
}

}  // namespace plexus
