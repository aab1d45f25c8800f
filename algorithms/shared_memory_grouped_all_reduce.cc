// shared_memory_grouped_all_reduce.cc: the arena's small all-reduce for many ranks on one host.
// The ranks form groups of about sqrt(p) consecutive ranks; the first of each group leads it.
// Piece by piece every rank publishes its input; each leader reduces its group's inputs, in
// rank order, into the result area of its slot and publishes that; then every rank reduces
// the leaders' results, in group order, into its buffer. The operands and their order are the
// same on every rank, so results are bit-identical. A rank waits for about sqrt(p) peers
// where the flat schedule (shared_memory_all_reduce.cc) waits for p - 1: with many more ranks
// than cores, every wait for a peer that has not run yet is a turn of the scheduler or a
// futex sleep, and those, not the bytes, make the time.
//
// Safety of slot reuse: only its leader reads a member's input, and the member writes piece
// k + 2 only after every leader (its own too) published piece k + 1's result. Everyone reads a
// leader's result; a leader writes piece k + 2 only after every leader published piece k + 1's
// result, which each does after its whole group published piece k + 1's input - and a rank
// publishes that only once it has read piece k.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "algorithms/algorithms.h"
#include "algorithms/arena_slots.h"
#include "algorithms/reduce_kernels.h"
#include "base/core/status_macros.h"

namespace plexus::algorithms {

int GroupSizeForGroupedAllReduce(int ranks) {
  return std::max(1, static_cast<int>(std::lround(std::sqrt(static_cast<double>(ranks)))));
}

absl::Status SharedMemoryGroupedAllReduce(CollectiveContext& ctx, SharedArena& arena, void* data,
                                          int64_t count, DType dtype, ReduceOpKind op) {
  const size_t element = DTypeSize(dtype);
  const int n = ctx.size();
  const int me = ctx.rank();
  const int group_size = GroupSizeForGroupedAllReduce(n);
  const int my_leader = me / group_size * group_size;
  const bool leading = me == my_leader;
  std::vector<int> leaders;
  for (int r = 0; r < n; r += group_size) leaders.push_back(r);
  std::vector<int> members;
  for (int r = my_leader; r < std::min(n, my_leader + group_size); ++r) members.push_back(r);
  // A slot holds a piece's input, then (leaders) room for its group's result.
  const size_t bytes = static_cast<size_t>(count) * element;
  ArenaSlots slots(ctx, arena, 2 * bytes + 64);
  const int64_t per_piece = static_cast<int64_t>((slots.payload_bytes() - 64) / (2 * element));
  const size_t result_at = (static_cast<size_t>(per_piece) * element + 63) & ~size_t{63};
  auto* out_bytes = static_cast<uint8_t*>(data);
  uint64_t piece = 0;
  for (int64_t offset = 0; offset < count; offset += per_piece, ++piece) {
    const int64_t elements = std::min(per_piece, count - offset);
    const size_t piece_bytes = static_cast<size_t>(elements) * element;
    uint8_t* out = out_bytes + offset * element;
    std::memcpy(slots.payload(me, piece), out, piece_bytes);
    if (leading) {
      slots.PublishInput(piece, piece_bytes);
      RETURN_IF_ERROR(slots.WaitForInputsOf(piece, members));
      uint8_t* result = slots.payload(me, piece) + result_at;
      if (members.size() == 1) {
        std::memcpy(result, slots.payload(me, piece), piece_bytes);
      } else {
        ReduceCombine(result, slots.payload(members[0], piece), slots.payload(members[1], piece),
                      elements, dtype, op);
        for (size_t i = 2; i < members.size(); ++i) {
          ReduceInto(result, slots.payload(members[i], piece), elements, dtype, op);
        }
      }
      slots.PublishResult(piece);
    } else {
      // Nobody waits for a member's result step.
      slots.PublishInputAndResult(piece, piece_bytes);
    }
    RETURN_IF_ERROR(slots.WaitForResultsOf(piece, leaders));
    auto group_result = [&](size_t g) { return slots.payload(leaders[g], piece) + result_at; };
    if (leaders.size() == 1) {
      std::memcpy(out, group_result(0), piece_bytes);
    } else {
      ReduceCombine(out, group_result(0), group_result(1), elements, dtype, op);
      for (size_t g = 2; g < leaders.size(); ++g) {
        ReduceInto(out, group_result(g), elements, dtype, op);
      }
    }
    const int64_t moved =
        static_cast<int64_t>(piece_bytes) *
        static_cast<int64_t>(leading ? members.size() - 1 + leaders.size() - 1 : leaders.size());
    ctx.CountBytes(moved, moved);
  }
  return absl::OkStatus();
}

}  // namespace plexus::algorithms
