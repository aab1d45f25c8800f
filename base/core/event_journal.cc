#include "base/core/event_journal.h"

#include <ctime>
#include <deque>

#include "base/core/mutex.h"

namespace plexus {
namespace {

struct Journal {
  Mutex mu;
  std::deque<JournalEvent> events ABSL_GUARDED_BY(mu);
};

Journal& GlobalJournal() {
  static Journal* journal = new Journal();  // Never destroyed: noted from any thread.
  return *journal;
}

}  // namespace

int64_t UnixNanos() {
  timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  return int64_t{now.tv_sec} * 1000000000 + now.tv_nsec;
}

void NoteEvent(absl::string_view kind, absl::string_view detail) {
  JournalEvent event{UnixNanos(), std::string(kind), std::string(detail)};
  Journal& journal = GlobalJournal();
  MutexLock lock(journal.mu);
  if (journal.events.size() == kJournalCapacity) journal.events.pop_front();
  journal.events.push_back(std::move(event));
}

std::vector<JournalEvent> JournalEvents() {
  Journal& journal = GlobalJournal();
  MutexLock lock(journal.mu);
  return {journal.events.begin(), journal.events.end()};
}

}  // namespace plexus
