// shared_memory_all_reduce.cc: for a group on one host (ctx.shared_arena()). Piece by piece,
// every rank copies its input into its arena slot and publishes it, then reduces all ranks'
// slots, in rank order, straight into its own buffer: one synchronisation per piece, and the
// same operands in the same order on every rank, so results are bit-identical. With many
// ranks and enough to read, the grouped schedule runs instead (algorithms.h says when).
#include <algorithm>
#include <cstring>

#include "algorithms/algorithms.h"
#include "algorithms/arena_slots.h"
#include "algorithms/reduce_kernels.h"

namespace plexus::algorithms {

absl::Status SharedMemoryAllReduce(CollectiveContext& ctx, SharedArena& arena, void* data,
                                   int64_t count, DType dtype, ReduceOpKind op) {
  const size_t read_flat = static_cast<size_t>(ctx.size()) * count * DTypeSize(dtype);
  if (ctx.size() >= kGroupedAllReduceFromRanks && read_flat >= kGroupedAllReduceFromBytesRead) {
    return SharedMemoryGroupedAllReduce(ctx, arena, data, count, dtype, op);
  }
  ArenaSlots slots(ctx, arena, static_cast<size_t>(count) * DTypeSize(dtype));
  const size_t element = DTypeSize(dtype);
  const int64_t per_piece = static_cast<int64_t>(slots.payload_bytes() / element);
  auto* bytes = static_cast<uint8_t*>(data);
  const int n = ctx.size();
  uint64_t piece = 0;
  for (int64_t offset = 0; offset < count; offset += per_piece, ++piece) {
    const int64_t elements = std::min(per_piece, count - offset);
    const size_t piece_bytes = static_cast<size_t>(elements) * element;
    uint8_t* out = bytes + offset * element;
    std::memcpy(slots.payload(ctx.rank(), piece), out, piece_bytes);
    // Nobody waits for this piece's result step: a peer reuses this slot only after this rank
    // published the next piece, which it does once it has read this one.
    slots.PublishInputAndResult(piece, piece_bytes);
    if (absl::Status status = slots.WaitForInputs(piece); !status.ok()) return status;
    ReduceCombine(out, slots.payload(0, piece), slots.payload(1, piece), elements, dtype, op);
    for (int r = 2; r < n; ++r) ReduceInto(out, slots.payload(r, piece), elements, dtype, op);
    ctx.CountBytes(static_cast<int64_t>(piece_bytes) * (n - 1),
                   static_cast<int64_t>(piece_bytes) * (n - 1));
  }
  return absl::OkStatus();
}

}  // namespace plexus::algorithms
