// AcceptGuard: what a listening server does when accept() fails because the process (or the
// system) is out of file descriptors. The listener stays readable while connections wait in
// its backlog, so an event loop that just returns spins on it and a log line per failed accept
// floods the disk, while a legitimate client waits behind connections that will never speak.
//
// A server that can turn strangers away (kTurnAway: the store, the elastic master) gets two ways
// out, in order:
//   1. the server closes its oldest connection that has not authenticated yet (its own list),
//      which frees a descriptor for the next accept;
//   2. failing that, the guard accepts one waiting connection on a descriptor kept in reserve
//      and closes it at once: the client sees a close now rather than a hang, and the loop does
//      not spin.
// A forming mesh (kPause) must not turn a waiting peer away, since the peer would not try
// again: it asks the server to end its oldest handshake (which frees a descriptor soon, not at
// once) and leaves the listener alone for a moment; the peers wait in the backlog meanwhile.
// It also throttles the log: the first occurrence, then one line per 10 s with the count.
#ifndef PLEXUS_BASE_NET_ACCEPT_GUARD_H_
#define PLEXUS_BASE_NET_ACCEPT_GUARD_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/time/time.h"
#include "base/net/socket_util.h"

namespace plexus {

class AcceptGuard {
 public:
  enum class OnShortage { kTurnAway, kPause };

  // `server`: names the server in log lines ("TCPStore server").
  explicit AcceptGuard(std::string server, OnShortage on_shortage = OnShortage::kTurnAway);

  // Accepts the next waiting connection (non-blocking, close-on-exec) and returns it, or -1
  // once this round of accepts should end: nothing waits, a bounded number of connections was
  // already shed or turned away this round, or nothing could be freed (then the listener should
  // be left alone until paused_until()). Out of descriptors it calls `shed_one` first (close the
  // server's oldest connection that has not authenticated; false if there is none), else turns
  // one waiting connection away (kTurnAway) or pauses (kPause). Other accept errors are logged.
  int Accept(int listener, const std::function<bool()>& shed_one);
  // Ends a round of Accept calls: a shortage met in it is logged (throttled).
  void EndRound();
  absl::Time paused_until() const { return paused_until_; }
  // Rounds that met a shortage so far, and the last one's accept error (for timeout messages).
  uint64_t shortages() const { return shortages_; }
  int last_shortage_errno() const { return last_errno_; }

 private:
  // Accepts one waiting connection on the reserve descriptor and closes it; true if one was
  // waiting. Re-opens the reserve afterwards (best effort).
  bool TurnAwayOne(int listener);

  const std::string server_;
  const OnShortage on_shortage_;
  ScopedFd reserve_;
  absl::Time paused_until_ = absl::InfinitePast();
  // This round's shortage (its errno, 0: none) and what was done about it.
  int round_errno_ = 0;
  int round_shed_ = 0;
  int round_turned_away_ = 0;
  uint64_t total_shed_ = 0;
  uint64_t total_turned_away_ = 0;
  uint64_t total_pauses_ = 0;
  uint64_t shortages_ = 0;
  int last_errno_ = 0;
  absl::Time last_log_ = absl::InfinitePast();
};

}  // namespace plexus

#endif  // PLEXUS_BASE_NET_ACCEPT_GUARD_H_
