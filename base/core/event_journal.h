// A process-wide journal of the rare events a timeline shows beside the collectives: a peer
// lost to its heartbeat, a process group aborted, an operation that timed out. Kept to the
// latest kJournalCapacity events; the flight recorder's dumps carry them (tools/hang_report
// --timeline). Thread-safe; costs a lock and a string per event, so only rare events go in.
#ifndef PLEXUS_BASE_CORE_EVENT_JOURNAL_H_
#define PLEXUS_BASE_CORE_EVENT_JOURNAL_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace plexus {

inline constexpr size_t kJournalCapacity = 256;

struct JournalEvent {
  int64_t unix_ns = 0;
  std::string kind;    // "peer_lost", "abort", "timeout", ...
  std::string detail;  // One line for people.
};

// The wall clock, in nanoseconds since the Unix epoch (CLOCK_REALTIME).
int64_t UnixNanos();

// Records an event now.
void NoteEvent(absl::string_view kind, absl::string_view detail);
// The kept events, oldest first.
std::vector<JournalEvent> JournalEvents();

}  // namespace plexus

#endif  // PLEXUS_BASE_CORE_EVENT_JOURNAL_H_
