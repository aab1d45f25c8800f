// Conversions from abseil durations to std::chrono deadlines for condition-variable waits.
#ifndef PLEXUS_FRONTEND_CORE_DEADLINE_H_
#define PLEXUS_FRONTEND_CORE_DEADLINE_H_

#include <algorithm>
#include <chrono>

#include "absl/time/time.h"

namespace plexus {

// now + timeout on the steady clock. Negative timeouts mean "now"; huge ones (even
// absl::InfiniteDuration()) are capped at 100 years so the addition cannot overflow.
inline std::chrono::steady_clock::time_point SteadyDeadline(absl::Duration timeout) {
  const absl::Duration capped =
      std::clamp(timeout, absl::ZeroDuration(), absl::Hours(24 * 365 * 100));
  return std::chrono::steady_clock::now() + absl::ToChronoNanoseconds(capped);
}

}  // namespace plexus

#endif  // PLEXUS_FRONTEND_CORE_DEADLINE_H_
