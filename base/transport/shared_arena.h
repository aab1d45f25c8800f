// SharedArena: memory that every rank of a group maps because they all run on one host, for
// algorithms that read their peers' data in place instead of having it sent. A Transport
// offers one (Transport::shared_arena) only when every peer of the group shares this host.
//
// Each rank owns one region: it writes there, the others read. Ranks signal progress by
// publishing a monotonically increasing value; a peer waits until a rank's value reaches the
// step it needs. A rank that fails mid-algorithm publishes kArenaFailed, which ends every wait
// on it, so one rank's failure ends the collective everywhere. Used by one collective at a
// time (the backend runs them in order); Publish and WaitFor are called from that thread.
#ifndef PLEXUS_BASE_TRANSPORT_SHARED_ARENA_H_
#define PLEXUS_BASE_TRANSPORT_SHARED_ARENA_H_

#include <cstddef>
#include <cstdint>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace plexus {

// Set in a published value by a rank that failed: the arena is not used by the group for later
// collectives. Bits 56-62 then carry the failure's absl::StatusCode, so the peers fail with the
// same code.
inline constexpr uint64_t kArenaFailed = uint64_t{1} << 63;
inline constexpr uint64_t kArenaCodeBits = uint64_t{0x7f} << 56;
inline constexpr uint64_t ArenaFailure(uint64_t value, absl::StatusCode code) {
  return (value & ~kArenaCodeBits) | kArenaFailed | ((static_cast<uint64_t>(code) & 0x7f) << 56);
}
inline constexpr absl::StatusCode ArenaFailureCode(uint64_t value) {
  return static_cast<absl::StatusCode>((value & kArenaCodeBits) >> 56);
}
// The failed sequence of a rank that left the group (it failed in no particular collective).
inline constexpr uint64_t kArenaLeft = ~uint64_t{0};

class SharedArena {
 public:
  virtual ~SharedArena() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;

  // Bytes of every region; region(rank()) is this rank's to write, the others' to read.
  virtual size_t region_bytes() const = 0;
  virtual uint8_t* region(int rank) const = 0;

  // The value `rank` published last (this rank's own included).
  virtual uint64_t Published(int rank) const = 0;
  // Publishes `value` (>= the last one) after every write to this rank's region before it, and
  // wakes the peers waiting on this rank.
  virtual void Publish(uint64_t value) = 0;
  // Publishes this rank's last value with kArenaFailed and `code`, recording that it failed
  // in the collective numbered `sequence` (readable through FailedSequence once a peer sees
  // the flag): peers about to start that same collective still meet in the arena and learn
  // the cause, while later collectives keep off it on every rank alike.
  virtual void PublishFailure(absl::StatusCode code, uint64_t sequence) = 0;
  // The sequence `rank` recorded with its last failure (kArenaLeft for a rank that left), 0
  // while it has not failed (sequences start at 1); set before the failure is published.
  virtual uint64_t FailedSequence(int rank) const = 0;
  // What each rank says it is doing (the collective layer announces every collective, whichever
  // way it runs, so a peer stuck waiting here can tell a rank that went another way).
  virtual uint64_t Announced(int rank) const = 0;
  virtual void Announce(uint64_t word) = 0;

  // Waits until `peer` has published at least `value`, or kArenaFailed, or `stop(announced)`
  // holds for what the peer announced; returns the peer's published value. Unavailable once a
  // peer is lost (the transport saw its process go), DeadlineExceeded at `deadline`. Spins
  // briefly (yielding the core), then sleeps.
  virtual absl::StatusOr<uint64_t> WaitFor(int peer, uint64_t value, absl::Time deadline,
                                           absl::FunctionRef<bool(uint64_t)> stop) = 0;
};

}  // namespace plexus

#endif  // PLEXUS_BASE_TRANSPORT_SHARED_ARENA_H_
