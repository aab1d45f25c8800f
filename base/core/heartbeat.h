// How long a connection may stay silent before its peer counts as lost. Every plexus
// connection (TCP data and shared-memory links, the TCPStore while a request waits, the elastic
// master) sends a small heartbeat while otherwise idle, a fifth of this interval apart, so a
// frozen peer (SIGSTOP, a pulled cable, a machine that hangs) is found within about the
// interval instead of at an operation's timeout. A peer that is merely busy still beats: its
// library threads send them, not the caller's.
#ifndef PLEXUS_BASE_CORE_HEARTBEAT_H_
#define PLEXUS_BASE_CORE_HEARTBEAT_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace plexus {

inline constexpr absl::Duration kDefaultHeartbeat = absl::Seconds(5);
inline constexpr absl::Duration kMinHeartbeat = absl::Milliseconds(100);

// Parses a heartbeat interval: a duration ("5s", "500ms", "1m"), a plain number of seconds
// ("2.5"), or "0"/"off" for none (absl::InfiniteDuration()). InvalidArgument names the text,
// and values below kMinHeartbeat are refused.
absl::StatusOr<absl::Duration> ParseHeartbeat(absl::string_view text);

// PLEXUS_HEARTBEAT, else kDefaultHeartbeat.
absl::StatusOr<absl::Duration> HeartbeatFromEnvironment();

// How often a side beats for an interval: a fifth of it.
inline absl::Duration HeartbeatPeriod(absl::Duration interval) { return interval / 5; }

}  // namespace plexus

#endif  // PLEXUS_BASE_CORE_HEARTBEAT_H_
