// AcceptGuard: what a listening server does when accept() fails because the process (or the
// system) is out of file descriptors. The listener stays readable while connections wait in
// its backlog, so an event loop that just returns spins on it and a log line per failed accept
// floods the disk, while a legitimate client waits behind connections that will never speak.
//
// A server that can turn strangers away (kTurnAway: the store, the elastic master) gets three
// ways out, in order:
//   1. the server closes its oldest connection that has not authenticated yet (its own list),
//      which frees a descriptor for the next accept;
//   2. the listeners of one process share its descriptor limit: the guard shuts down the oldest
//      stranger of another listener in this process, whose server closes it on its next event,
//      and that listener leaves the freed descriptor to this one (its accepts wait up to 200 ms);
//   3. failing both, the guard accepts one waiting connection on a descriptor kept in reserve
//      and closes it at once: the client sees a close now rather than a hang, and the loop does
//      not spin.
// A forming mesh (kPause) must not turn a waiting peer away, since the peer would not try
// again: it asks the server to end its oldest handshake and leaves the listener alone for a
// moment; the peers wait in the backlog meanwhile.
// It also throttles the log: the first occurrence, then one line per 10 s with the count.
#ifndef PLEXUS_BASE_NET_ACCEPT_GUARD_H_
#define PLEXUS_BASE_NET_ACCEPT_GUARD_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "base/core/logging.h"
#include "base/net/socket_util.h"

namespace plexus {

class AcceptGuard {
 public:
  enum class OnShortage { kTurnAway, kPause };

  // `server`: names the server in log lines ("TCPStore server").
  explicit AcceptGuard(std::string server, OnShortage on_shortage = OnShortage::kTurnAway);
  ~AcceptGuard();
  AcceptGuard(const AcceptGuard&) = delete;
  AcceptGuard& operator=(const AcceptGuard&) = delete;

  // Accepts the next waiting connection (non-blocking, close-on-exec) and returns it, or -1
  // once this round of accepts should end: nothing waits, a bounded number of connections was
  // already shed or turned away this round, or nothing could be freed (then the listener should
  // be left alone until paused_until()). Out of descriptors it calls `shed_one` first (close the
  // server's oldest connection that has not authenticated; false if there is none), else turns
  // one waiting connection away (kTurnAway) or pauses (kPause). Other accept errors are logged.
  // With kTurnAway, the connection it returns counts as a stranger (one another listener may
  // shut down) until Forget.
  int Accept(int listener, const std::function<bool()>& shed_one);
  // `fd` is no longer a stranger: it authenticated, or its server is about to close it. Call it
  // before closing a descriptor Accept returned, or ForgetAll before closing them all.
  void Forget(int fd);
  void ForgetAll();
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
  int round_shed_elsewhere_ = 0;
  uint64_t total_shed_ = 0;
  uint64_t total_shed_elsewhere_ = 0;
  uint64_t total_turned_away_ = 0;
  uint64_t total_pauses_ = 0;
  uint64_t shortages_ = 0;
  int last_errno_ = 0;
  absl::Time last_log_ = absl::InfinitePast();
};

// RefusalLog: logs refused connections (a failed TLS handshake, a wrong secret, garbage) with
// the server's name: the first ten each, then every thousandth with the count, so a flood of
// bad connections cannot flood the log.
class RefusalLog {
 public:
  explicit RefusalLog(std::string server) : server_(std::move(server)) {}
  void Refused(absl::string_view detail, LogLevel level = LogLevel::kWarning);
  uint64_t count() const { return refused_; }

 private:
  const std::string server_;
  uint64_t refused_ = 0;
};

}  // namespace plexus

#endif  // PLEXUS_BASE_NET_ACCEPT_GUARD_H_
