#include "algorithms/arena_slots.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "base/core/status_macros.h"

namespace plexus::algorithms {
namespace {

constexpr size_t kHeaderBytes = 64;  // Header, padded so payloads stay cache-line aligned.
// Small collectives' payload places per slot, and their size.
constexpr size_t kRotatingPlaces = 4;
constexpr size_t kRotatingPlaceBytes = 4096;

}  // namespace

ArenaSlots::ArenaSlots(CollectiveContext& ctx, SharedArena& arena, size_t largest_piece_bytes)
    : ctx_(ctx),
      arena_(arena),
      base_(arena.Published(arena.rank()) & ~(kArenaFailed | kArenaCodeBits)) {
  static_assert(sizeof(Header) <= kHeaderBytes);
  slot_bytes_ = (arena.region_bytes() / 2) & ~size_t{63};
  payload_bytes_ = slot_bytes_ - kHeaderBytes;
  if (largest_piece_bytes <= kRotatingPlaceBytes &&
      payload_bytes_ >= kRotatingPlaces * kRotatingPlaceBytes) {
    rotating_ = true;
    payload_bytes_ = kRotatingPlaceBytes;
  }
}

bool ArenaSlots::Usable(const SharedArena& arena, uint64_t sequence) {
  // Not the published values: peers write theirs all the time, so reading them would wait
  // for their lines to come over before every collective.
  for (int r = 0; r < arena.size(); ++r) {
    const uint64_t failed = arena.FailedSequence(r);
    if (failed != 0 && failed != sequence) return false;
  }
  return true;
}

SharedArena* ArenaSlots::UsableArena(const CollectiveContext& ctx) {
  SharedArena* arena = ctx.shared_arena();
  return arena != nullptr && Usable(*arena, ctx.sequence()) ? arena : nullptr;
}

ArenaSlots::Header* ArenaSlots::header(int rank, uint64_t piece) const {
  const uint64_t slot = (base_ / 2 + piece) % 2;
  return reinterpret_cast<Header*>(arena_.region(rank) + slot * slot_bytes_);
}

uint8_t* ArenaSlots::payload(int rank, uint64_t piece) const {
  uint8_t* first = reinterpret_cast<uint8_t*>(header(rank, piece)) + kHeaderBytes;
  if (!rotating_) return first;
  // Every other piece uses this slot: the places take turns among those.
  return first + ((base_ / 2 + piece) / 2 % kRotatingPlaces) * kRotatingPlaceBytes;
}

void ArenaSlots::PublishInput(uint64_t piece, uint64_t bytes) {
  PublishHeaderAndStep(piece, bytes, InputStep(piece));
}

void ArenaSlots::PublishResult(uint64_t piece) { arena_.Publish(InputStep(piece) + 1); }

void ArenaSlots::PublishInputAndResult(uint64_t piece, uint64_t bytes) {
  // Waits for the input step are waits for "at least": the result step satisfies them.
  PublishHeaderAndStep(piece, bytes, InputStep(piece) + 1);
}

void ArenaSlots::PublishHeaderAndStep(uint64_t piece, uint64_t bytes, uint64_t step) {
  *header(arena_.rank(), piece) = {ctx_.signature(), piece, bytes, hint_};
  arena_.Publish(step);
}

absl::Status ArenaSlots::Fail(absl::Status status) {
  arena_.PublishFailure(status.code(), ctx_.sequence());
  return status;
}

absl::Status ArenaSlots::WaitForInputs(uint64_t piece) {
  return WaitForAll(InputStep(piece), piece, /*check=*/true);
}

absl::Status ArenaSlots::WaitForResults(uint64_t piece) {
  return WaitForAll(InputStep(piece) + 1, piece, /*check=*/false);
}

absl::Status ArenaSlots::WaitForInputsOf(uint64_t piece, absl::Span<const int> ranks) {
  for (int peer : ranks) {
    if (peer == arena_.rank()) continue;
    RETURN_IF_ERROR(WaitForPeer(peer, InputStep(piece), piece, /*check=*/true));
  }
  return absl::OkStatus();
}

absl::Status ArenaSlots::WaitForResultsOf(uint64_t piece, absl::Span<const int> ranks) {
  for (int peer : ranks) {
    if (peer == arena_.rank()) continue;
    RETURN_IF_ERROR(WaitForPeer(peer, InputStep(piece) + 1, piece, /*check=*/true));
  }
  return absl::OkStatus();
}

absl::Status ArenaSlots::WaitForAll(uint64_t step, uint64_t piece, bool check) {
  for (int peer = 0; peer < arena_.size(); ++peer) {
    if (peer == arena_.rank()) continue;
    RETURN_IF_ERROR(WaitForPeer(peer, step, piece, check));
  }
  return absl::OkStatus();
}

absl::Status ArenaSlots::WaitForPeer(int peer, uint64_t step, uint64_t piece, bool check) {
  const uint64_t ours = ctx_.signature();
  // A peer that announced another collective under this sequence number went another way
  // (skipped this one, or runs a different one): it will never publish this step.
  // (0 is no announcement yet: the peer has not begun.)
  auto elsewhere = [ours](uint64_t announced) {
    return announced != 0 && announced != ours && SameSequence(announced, ours);
  };
  absl::StatusOr<uint64_t> seen = arena_.WaitFor(peer, step, ctx_.deadline(), elsewhere);
  if (!seen.ok()) return Fail(seen.status());
  const bool reached = (*seen & ~(kArenaFailed | kArenaCodeBits)) >= step;
  uint64_t theirs = 0;
  uint64_t their_piece = piece;
  if (!reached) {
    // Also for a peer that failed or left: if it ran another collective under this
    // sequence number, that disagreement is the cause to report.
    theirs = arena_.Announced(peer);
    if (!SameSequence(theirs, ours)) theirs = 0;
  } else if (check && reached) {
    const Header header_seen = *header(peer, piece);
    theirs = header_seen.signature;
    their_piece = header_seen.piece;
  }
  if (theirs != 0 && (theirs != ours || their_piece != piece)) {
    return Fail(absl::FailedPreconditionError(absl::StrCat(
        "ranks disagree on the collective: rank ", arena_.rank(), " is running ",
        DescribeSignature(ours), " but rank ", peer, " is running ", DescribeSignature(theirs),
        their_piece != piece
            ? absl::StrCat(" (shared memory, piece ", their_piece, " against ", piece, ")")
            : std::string())));
  }
  // A peer that failed or left after reaching the step (e.g. it finished this collective,
  // which needs nothing more from this rank, and shut down) left its data in place.
  if (!reached && (*seen & kArenaFailed) != 0) {
    absl::StatusCode code = ArenaFailureCode(*seen);
    if (code == absl::StatusCode::kOk) code = absl::StatusCode::kAborted;
    if (code == absl::StatusCode::kUnavailable) {
      // The peer lost a rank; this rank's transport sees the same process go within moments
      // and can say which (bounded: the plain report below otherwise).
      absl::StatusOr<uint64_t> own =
          arena_.WaitFor(arena_.rank(), ~uint64_t{0} >> 1,
                         std::min(ctx_.deadline(), absl::Now() + absl::Seconds(1)),
                         [](uint64_t) { return false; });
      if (!own.ok() && own.status().code() == absl::StatusCode::kUnavailable) {
        return Fail(own.status());
      }
    }
    return Fail(absl::Status(
        code,
        absl::StrCat(CollectiveName(ctx_.kind()), " #", ctx_.sequence(), " on rank ", arena_.rank(),
                     ": rank ", peer, " failed it (", absl::StatusCodeToString(code), ")")));
  }
  return absl::OkStatus();
}

}  // namespace plexus::algorithms
