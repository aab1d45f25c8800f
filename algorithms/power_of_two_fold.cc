// Folding a group onto a power of two, for the schedules that pair ranks by bit masks. With p
// the largest power of two <= size, the first 2 (size - p) ranks pair up: the even one sends
// its whole buffer to the odd one, which combines it and stands for both. The p ranks left
// run the schedule with virtual ranks 0..p-1; afterwards each odd rank of a pair sends the
// result back to its even partner.
#include "algorithms/algorithms.h"
#include "algorithms/reduce_kernels.h"

namespace plexus::algorithms {

PowerOfTwoFold::PowerOfTwoFold(int size) {
  p = 1;
  while (p * 2 <= size) p *= 2;
  extra = size - p;
}

int PowerOfTwoFold::VirtualRank(int rank) const {
  if (rank < 2 * extra) return rank % 2 == 0 ? -1 : rank / 2;
  return rank - extra;
}

int PowerOfTwoFold::RealRank(int vrank) const {
  return vrank < extra ? 2 * vrank + 1 : vrank + extra;
}

absl::Status PowerOfTwoFold::FoldIn(CollectiveContext& ctx, uint8_t* data, int64_t count,
                                    DType dtype, ReduceOpKind op) const {
  const int r = ctx.rank();
  if (r >= 2 * extra) return absl::OkStatus();
  const size_t bytes = static_cast<size_t>(count) * DTypeSize(dtype);
  if (r % 2 == 0) return ctx.Wait(ctx.Send(r + 1, kFoldStep, data, bytes));
  uint8_t* scratch = ctx.Scratch(ScratchArena::kReduceIn, bytes);
  if (absl::Status status = ctx.Wait(ctx.Recv(r - 1, kFoldStep, scratch, bytes)); !status.ok()) {
    return status;
  }
  ReduceInto(data, scratch, count, dtype, op);
  return absl::OkStatus();
}

absl::Status PowerOfTwoFold::HandBack(CollectiveContext& ctx, uint8_t* data, size_t bytes) const {
  const int r = ctx.rank();
  if (r >= 2 * extra) return absl::OkStatus();
  return ctx.Wait(r % 2 == 1 ? ctx.Send(r - 1, kResultStep, data, bytes)
                             : ctx.Recv(r + 1, kResultStep, data, bytes));
}

}  // namespace plexus::algorithms
