// AcceptGuard: what a listening server does when accept() fails because the process (or the
// system) is out of file descriptors. The listener stays readable while connections wait in
// its backlog, so an event loop that just returns spins on it and a log line per failed accept
// floods the disk, while a legitimate client waits behind connections that will never speak.
//
// The guard gives the server two ways out, in order:
//   1. the server closes its oldest connection that has not authenticated yet (its own list),
//      which frees a descriptor for the next accept;
//   2. failing that, the guard accepts one waiting connection on a descriptor kept in reserve
//      and closes it at once: the client sees a close now rather than a hang, and the loop does
//      not spin.
// It also throttles the log: the first occurrence, then one line per 10 s with the count.
#ifndef PLEXUS_FRONTEND_STORE_ACCEPT_GUARD_H_
#define PLEXUS_FRONTEND_STORE_ACCEPT_GUARD_H_

#include <cstdint>
#include <string>

#include "absl/time/time.h"
#include "frontend/store/socket_util.h"

namespace plexus {

// Whether accept() failed for want of descriptors (or kernel memory for one).
bool OutOfDescriptors(int accept_errno);

class AcceptGuard {
 public:
  // `server`: names the server in log lines ("TCPStore server").
  explicit AcceptGuard(std::string server);

  // Accepts one waiting connection on the reserve descriptor and closes it; true if one was
  // waiting. Re-opens the reserve afterwards (best effort).
  bool TurnAwayOne(int listener);
  // Records a shortage (`shed`: connections closed to make room, `turned_away`: accepted and
  // closed at once) and logs a throttled line naming both.
  void Note(int accept_errno, int shed, int turned_away);

  uint64_t shed() const { return total_shed_; }
  uint64_t turned_away() const { return total_turned_away_; }

 private:
  const std::string server_;
  ScopedFd reserve_;
  uint64_t total_shed_ = 0;
  uint64_t total_turned_away_ = 0;
  uint64_t shortages_ = 0;
  absl::Time last_log_ = absl::InfinitePast();
};

}  // namespace plexus

#endif  // PLEXUS_FRONTEND_STORE_ACCEPT_GUARD_H_
