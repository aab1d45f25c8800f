// shared_memory_barrier.cc: for a group on one host (ctx.shared_arena()). Every rank publishes
// its step in the arena and waits until every peer has published it: one round however many
// ranks, and a waiter wakes on a futex in the shared page instead of a message on a socket, so
// ranks leave the barrier within a wake-up of the last arrival.
#include "algorithms/algorithm_table.h"
#include "algorithms/algorithms.h"
#include "algorithms/arena_slots.h"

namespace plexus::algorithms {

absl::Status SharedMemoryBarrier(CollectiveContext& ctx, SharedArena& arena) {
  ArenaSlots slots(ctx, arena);
  // Both steps at once keep the count even, as after any arena collective.
  slots.PublishInputAndResult(0, 0);
  // Also checks that every peer runs this barrier, not another collective.
  return slots.WaitForInputs(0);
}

}  // namespace plexus::algorithms
