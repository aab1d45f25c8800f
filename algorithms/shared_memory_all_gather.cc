// shared_memory_all_gather.cc ("shm" for all_gather_same_host): for a group on one host
// (ctx.shared_arena()). Piece by piece, every rank copies the piece of its block into its slot
// and publishes it, waits until every peer has published the same piece, and copies each
// peer's piece straight into that peer's block: one handshake per piece however many ranks,
// where the ring takes p - 1 hops, each a wake-up of the next rank.
#include <algorithm>
#include <cstring>
#include <vector>

#include "algorithms/algorithms.h"
#include "algorithms/arena_slots.h"

namespace plexus::algorithms {

absl::Status SharedMemoryAllGather(CollectiveContext& ctx, SharedArena& arena,
                                   const std::vector<ByteBlock>& blocks) {
  const int n = ctx.size();
  const int me = ctx.rank();
  size_t largest = 0;
  for (const ByteBlock& block : blocks) largest = std::max(largest, block.bytes);
  if (largest == 0) return absl::OkStatus();  // Every rank's blocks have the same sizes.
  ArenaSlots slots(ctx, arena, largest);
  const size_t per_piece = slots.payload_bytes();
  // The part of `block` that piece `offset` carries.
  auto part = [per_piece](const ByteBlock& block, size_t offset) {
    return offset < block.bytes ? std::min(per_piece, block.bytes - offset) : size_t{0};
  };
  uint64_t piece = 0;
  for (size_t offset = 0; offset < largest; offset += per_piece, ++piece) {
    const size_t mine = part(blocks[me], offset);
    if (mine > 0) std::memcpy(slots.payload(me, piece), blocks[me].data + offset, mine);
    // Nobody waits for this piece's result step: a peer reuses this slot only after this rank
    // published the next piece, which it does once it has read this one.
    slots.PublishInputAndResult(piece, mine);
    if (absl::Status status = slots.WaitForInputs(piece); !status.ok()) return status;
    int64_t received = 0;
    for (int r = 0; r < n; ++r) {
      const size_t bytes = part(blocks[r], offset);
      if (r == me || bytes == 0) continue;
      std::memcpy(blocks[r].data + offset, slots.payload(r, piece), bytes);
      received += static_cast<int64_t>(bytes);
    }
    ctx.CountBytes(static_cast<int64_t>(mine) * (n - 1), received);
  }
  return absl::OkStatus();
}

}  // namespace plexus::algorithms
