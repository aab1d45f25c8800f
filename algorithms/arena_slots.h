// The layout and handshake the shared-memory algorithms share. Each rank's arena region holds
// two slots, used by alternate pieces, so a rank can fill the next piece while its peers still
// read the current one. Every piece is two steps of the published value (its input is ready,
// then its result is; published at once where nobody waits for the result), so after a whole
// collective a rank's value is even again.
//
// Safety of reuse: a rank writes a slot for piece k + 2 only after every peer published the
// input of piece k + 1, which each does only after it finished reading piece k. A collective of
// one small piece (up to 4 KiB) puts its payload in one of four places in its slot, in turn
// (the header stays at the slot's start), so the same payload lines are rewritten every eighth
// small collective instead of every second.
#ifndef PLEXUS_ALGORITHMS_ARENA_SLOTS_H_
#define PLEXUS_ALGORITHMS_ARENA_SLOTS_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "algorithms/collective_context.h"
#include "base/transport/shared_arena.h"

namespace plexus::algorithms {

class ArenaSlots {
 public:
  // Written by a slot's owner before it publishes the piece's input step.
  struct Header {
    uint64_t signature;
    uint64_t piece;
    uint64_t bytes;
    uint64_t hint;  // What the schedule tells its peers with this piece (set_hint).
  };

  // `largest_piece_bytes`: the most any piece of this collective holds, when the caller knows
  // (small collectives then take turns over several places in the slot, see payload()).
  ArenaSlots(CollectiveContext& ctx, SharedArena& arena, size_t largest_piece_bytes = SIZE_MAX);

  // Whether collective `sequence` may run in the arena: no rank failed there in an earlier
  // collective (after a failure the group stops using it). A failure in this very collective
  // does not count, so every rank decides alike and meets the failure where it happened.
  static bool Usable(const SharedArena& arena, uint64_t sequence);
  // The context's arena when this collective may run there (see Usable), else nullptr.
  static SharedArena* UsableArena(const CollectiveContext& ctx);

  // Bytes each slot holds after its header (for this collective).
  size_t payload_bytes() const { return payload_bytes_; }
  // Where `rank` puts the payload of `piece`. A small collective's takes turns among places in
  // the slot, so it rarely overwrites lines a peer has just read (measured faster).
  uint8_t* payload(int rank, uint64_t piece) const;
  // A word every later header of this rank carries to its peers, who read it with HintOf
  // once they waited for the piece's inputs (0 unless set).
  void set_hint(uint64_t hint) { hint_ = hint; }
  uint64_t HintOf(int rank, uint64_t piece) const { return header(rank, piece)->hint; }
  // This rank's header for `piece`: fills it, then publishes the piece's input step.
  void PublishInput(uint64_t piece, uint64_t bytes);
  void PublishResult(uint64_t piece);
  // For a piece whose result step nobody waits for (shm all-reduce, barrier): fills the header
  // and publishes the input and result steps as one store. Each store to the published value
  // takes the cache line away from peers watching it, so one per piece, not two.
  void PublishInputAndResult(uint64_t piece, uint64_t bytes);
  // Waits for every peer's input step of `piece` and checks it runs the same collective and
  // piece; then for result steps (no check). Failures publish kArenaFailed (ending the peers'
  // waits) and return the error: FailedPrecondition naming both sides on disagreement,
  // Aborted when a peer failed, the arena's error when a peer was lost or time ran out.
  absl::Status WaitForInputs(uint64_t piece);
  absl::Status WaitForResults(uint64_t piece);
  // The same for the ranks in `ranks` only (this rank's own entry is skipped), and checking
  // each one's collective and piece for results too.
  absl::Status WaitForInputsOf(uint64_t piece, absl::Span<const int> ranks);
  absl::Status WaitForResultsOf(uint64_t piece, absl::Span<const int> ranks);
  // Publishes kArenaFailed and returns `status`.
  absl::Status Fail(absl::Status status);

 private:
  Header* header(int rank, uint64_t piece) const;
  uint64_t InputStep(uint64_t piece) const { return base_ + 2 * piece + 1; }
  void PublishHeaderAndStep(uint64_t piece, uint64_t bytes, uint64_t step);
  absl::Status WaitForAll(uint64_t step, uint64_t piece, bool check);
  absl::Status WaitForPeer(int peer, uint64_t step, uint64_t piece, bool check);

  CollectiveContext& ctx_;
  SharedArena& arena_;
  const uint64_t base_;  // This rank's published value when the collective began.
  size_t slot_bytes_;
  size_t payload_bytes_;
  bool rotating_ = false;  // Small: the payload moves among kRotatingPlaces places.
  uint64_t hint_ = 0;
};

}  // namespace plexus::algorithms

#endif  // PLEXUS_ALGORITHMS_ARENA_SLOTS_H_
