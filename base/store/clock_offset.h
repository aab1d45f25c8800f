// How far this machine's wall clock is from the store server's, estimated as NTP does: ask the
// server for its time a few times, keep the answer with the shortest round trip, and take the
// server's time as read half-way through it. The flight recorder stamps its dumps with the
// result, so tools/hang_report can put every rank's operations on one clock.
#ifndef PLEXUS_BASE_STORE_CLOCK_OFFSET_H_
#define PLEXUS_BASE_STORE_CLOCK_OFFSET_H_

#include <cstdint>
#include <functional>

#include "absl/status/statusor.h"
#include "base/store/store.h"

namespace plexus {

struct ClockOffset {
  int64_t offset_ns = 0;  // This clock minus the server's.
  int64_t error_ns = 0;   // At most this far off: half the shortest round trip.
};

// Unimplemented when the store has no server (FileStore, HashStore, torch's TCPStore).
// `local_clock` returns Unix nanoseconds; null means the real wall clock.
absl::StatusOr<ClockOffset> EstimateClockOffset(Store& store, int samples = 8,
                                                std::function<int64_t()> local_clock = nullptr);

}  // namespace plexus

#endif  // PLEXUS_BASE_STORE_CLOCK_OFFSET_H_
