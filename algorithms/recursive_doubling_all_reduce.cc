// Recursive doubling all-reduce: with p the largest power of two <= size, the first
// 2 (size - p) ranks pair up and the odd one folds in its even partner's buffer; the p
// remaining ranks then exchange whole buffers with partners at distance 1, 2, 4, ... and
// combine; finally the folded-out ranks receive the result. log2(p) + 2 latency terms: the
// choice for small messages. Partners combine commutatively, so both hold identical bits.
#include <vector>

#include "algorithms/algorithms.h"
#include "algorithms/reduce_kernels.h"

namespace plexus::algorithms {

absl::Status RecursiveDoublingAllReduce(CollectiveContext& ctx, void* data, int64_t count,
                                        DType dtype, ReduceOpKind op) {
  const int n = ctx.size();
  const int r = ctx.rank();
  if (n == 1) return absl::OkStatus();
  auto* bytes = static_cast<uint8_t*>(data);
  const size_t total = static_cast<size_t>(count) * DTypeSize(dtype);
  const PowerOfTwoFold fold(n);
  if (absl::Status status = fold.FoldIn(ctx, bytes, count, dtype, op); !status.ok()) {
    return status;
  }
  const int vrank = fold.VirtualRank(r);
  if (vrank >= 0) {
    uint8_t* scratch = ctx.Scratch(ScratchArena::kReduceIn, total);
    uint32_t step = 1;
    for (int mask = 1; mask < fold.p; mask <<= 1, ++step) {
      const int partner = fold.RealRank(vrank ^ mask);
      WorkPtr recv = ctx.Recv(partner, step, scratch, total);
      WorkPtr send = ctx.Send(partner, step, bytes, total);
      if (absl::Status status = ctx.WaitAll({recv, send}); !status.ok()) return status;
      ReduceInto(bytes, scratch, count, dtype, op);
    }
  }
  return fold.HandBack(ctx, bytes, total);
}

}  // namespace plexus::algorithms
