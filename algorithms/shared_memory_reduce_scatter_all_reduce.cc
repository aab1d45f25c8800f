// shared_memory_reduce_scatter_all_reduce.cc: for a group on one host (ctx.shared_arena()), the
// ring's division of labour without its p - 1 hops. Piece by piece, every rank publishes the
// blocks of its input that others own; rank i reduces block i of the piece from all ranks'
// inputs (in rank order; its own straight from its buffer) into the result area of its slot
// and publishes that; then every rank copies each block's result into its buffer. Each element
// is reduced once, by its block's owner, and copied everywhere. The copy-out is the only write
// to the buffer, so it keeps the input where the context asks (keeps_originals in the catalog).
//
// Pieces are at most kQuietSlotBytes' worth while the cores are free: larger ones ran slower
// (4 ranks, 16 MiB on the 2-core VM: 7.0 ms with 2 MiB slots, 10.0 ms with 16 MiB ones). When
// other work crowds the cores, each piece's two steps wait for a descheduled rank's next time
// slice, so the pieces grow to the whole slot (the same run beside two busy loops: 48 ms with
// 2 MiB slots, 16 ms with 16 MiB ones). Every rank sends, in its first piece's header, how
// crowded its recent large all-reduces found the cores (crowded_cores.h); where the group's
// average says crowded, all use the whole slot from the second piece on.
#include <algorithm>
#include <cstring>
#include <optional>
#include <vector>

#include "algorithms/algorithms.h"
#include "algorithms/arena_slots.h"
#include "algorithms/crowded_cores.h"
#include "algorithms/keep_originals.h"
#include "algorithms/reduce_kernels.h"

namespace plexus::algorithms {
namespace {

// A slot's payload while the cores are free (that of the 4 MiB regions measured above).
constexpr size_t kQuietSlotBytes = (size_t{2} << 20) - 64;

// Where a piece's result starts in its slot: after room for `per_piece` elements of input.
size_t ResultOffset(int64_t per_piece, size_t element) {
  return (static_cast<size_t>(per_piece) * element + 63) & ~size_t{63};
}

// Elements per piece for `payload_bytes` of slot: the input, then room for the largest block
// of its result, cache-line aligned.
int64_t ElementsPerPiece(size_t payload_bytes, size_t element, int n) {
  int64_t per_piece = static_cast<int64_t>(payload_bytes / element) * n / (n + 1);
  while (per_piece > 0 &&
         ResultOffset(per_piece, element) + static_cast<size_t>((per_piece + n - 1) / n) * element >
             payload_bytes) {
    --per_piece;
  }
  return per_piece;
}

// Every block's result from its owner's slot into the caller's buffer. The copy-out is the only
// write to the buffer: with originals wanted, each block's input is kept on the way
// (keep_originals.h).
void CopyOut(CollectiveContext& ctx, ArenaSlots& slots, uint64_t piece, const Partition& blocks,
             size_t result_at, uint8_t* out, size_t piece_at, size_t piece_bytes, size_t element) {
  const bool keep = ctx.originals() != nullptr && ctx.originals_kept() < piece_at + piece_bytes;
  for (int r = 0; r < ctx.size(); ++r) {
    const size_t at = static_cast<size_t>(blocks.offsets[r]) * element;
    const size_t block_bytes = static_cast<size_t>(blocks.counts[r]) * element;
    const uint8_t* block_result = slots.payload(r, piece) + result_at;
    if (keep) {
      SaveThenOverwrite(out + at, block_result, ctx.originals() + piece_at + at, block_bytes);
    } else {
      std::memcpy(out + at, block_result, block_bytes);
    }
  }
  if (keep) ctx.OriginalsKeptUpTo(piece_at + piece_bytes);
}

}  // namespace

absl::Status SharedMemoryReduceScatterAllReduce(CollectiveContext& ctx, SharedArena& arena,
                                                void* data, int64_t count, DType dtype,
                                                ReduceOpKind op) {
  ArenaSlots slots(ctx, arena);
  const size_t element = DTypeSize(dtype);
  const int n = ctx.size();
  const int me = ctx.rank();
  int64_t per_piece =
      ElementsPerPiece(std::min(slots.payload_bytes(), kQuietSlotBytes), element, n);
  const int64_t largest_piece = ElementsPerPiece(slots.payload_bytes(), element, n);
  // Only an all-reduce of several pieces may grow them, and only such ones judge the cores.
  std::optional<CrowdingProbe> probe;
  if (largest_piece > per_piece && count > per_piece) {
    probe.emplace(n);
    slots.set_hint(RecentShortfallWord());
  }
  auto* bytes = static_cast<uint8_t*>(data);
  uint64_t piece = 0;
  for (int64_t offset = 0, elements = 0; offset < count; offset += elements, ++piece) {
    const size_t result_at = ResultOffset(per_piece, element);  // Before a growth below.
    elements = std::min(per_piece, count - offset);
    const size_t piece_bytes = static_cast<size_t>(elements) * element;
    uint8_t* out = bytes + offset * element;
    const Partition blocks = BalancedPartition(elements, n);
    // Only the blocks others reduce are published; this rank reads its own from its buffer.
    for (int r = 0; r < n; ++r) {
      if (r == me) continue;
      const size_t at = static_cast<size_t>(blocks.offsets[r]) * element;
      std::memcpy(slots.payload(me, piece) + at, out + at,
                  static_cast<size_t>(blocks.counts[r]) * element);
    }
    slots.PublishInput(piece, piece_bytes);
    if (absl::Status status = slots.WaitForInputs(piece); !status.ok()) return status;
    if (probe.has_value() && piece == 0) {
      std::vector<uint64_t> words(n);
      for (int r = 0; r < n; ++r) words[r] = slots.HintOf(r, 0);
      if (WordsShowCrowding(words)) per_piece = largest_piece;  // From the next piece on.
    }
    const size_t mine = static_cast<size_t>(blocks.offsets[me]) * element;
    auto input = [&](int r) -> const uint8_t* {
      return (r == me ? out : slots.payload(r, piece)) + mine;
    };
    uint8_t* result = slots.payload(me, piece) + result_at;
    if (blocks.counts[me] > 0) {
      ReduceCombine(result, input(0), input(1), blocks.counts[me], dtype, op);
      for (int r = 2; r < n; ++r) ReduceInto(result, input(r), blocks.counts[me], dtype, op);
    }
    slots.PublishResult(piece);
    if (absl::Status status = slots.WaitForResults(piece); !status.ok()) return status;
    CopyOut(ctx, slots, piece, blocks, result_at, out, static_cast<size_t>(offset) * element,
            piece_bytes, element);
    const int64_t moved = static_cast<int64_t>(piece_bytes) * 2 * (n - 1) / n;
    ctx.CountBytes(moved, moved);
  }
  if (probe.has_value()) probe->Finish();
  return absl::OkStatus();
}

}  // namespace plexus::algorithms
