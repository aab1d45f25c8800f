#include "base/store/clock_offset.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "base/core/event_journal.h"
#include "base/core/status_macros.h"

namespace plexus {

absl::StatusOr<ClockOffset> EstimateClockOffset(Store& store, int samples,
                                                std::function<int64_t()> local_clock) {
  if (local_clock == nullptr) local_clock = UnixNanos;
  ClockOffset best;
  int64_t shortest = std::numeric_limits<int64_t>::max();
  for (int i = 0; i < std::max(samples, 1); ++i) {
    const int64_t sent = local_clock();
    ASSIGN_OR_RETURN(int64_t server, store.ServerUnixNanos());
    const int64_t received = local_clock();
    const int64_t round_trip = std::max<int64_t>(received - sent, 0);
    if (round_trip < shortest) {
      shortest = round_trip;
      best.offset_ns = sent + round_trip / 2 - server;
      best.error_ns = (round_trip + 1) / 2;
    }
  }
  return best;
}

}  // namespace plexus
