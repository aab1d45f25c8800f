// The listening half every plexus event-loop server shares (the TCPStore server, the elastic
// master, a forming tcp mesh): it accepts on the loop's EventPoller, starts each connection's
// admission (ServerConnection: TLS, then the secret), keeps the connections not yet through
// their server's hello ("strangers") oldest first, closes those that take too long, sheds the
// oldest when the process runs out of descriptors (AcceptGuard), and takes the listener off the
// poller while it must wait (a pause, or too many strangers at once). The server keeps only its
// protocol: what a connection says, and when it counts as through.
#ifndef PLEXUS_BASE_AUTH_SERVER_LISTENER_H_
#define PLEXUS_BASE_AUTH_SERVER_LISTENER_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <string>

#include "absl/time/time.h"
#include "base/auth/server_connection.h"
#include "base/net/accept_guard.h"
#include "base/net/event_poller.h"
#include "base/net/socket_util.h"

namespace plexus::auth {

class ServerListener {
 public:
  struct Options {
    std::string server;  // Names the server in log lines ("TCPStore server").
    AcceptGuard::OnShortage on_shortage = AcceptGuard::OnShortage::kTurnAway;
    const TlsContext* tls = nullptr;  // Null: in the clear.
    std::string secret;               // "": none.
    Purpose purpose = Purpose::kStore;
    // A stranger still not through its server's hello after this long is closed.
    absl::Duration admission_timeout = absl::Seconds(10);
    // Strangers at once; past it the listener waits, and new connections wait in its backlog.
    size_t most_strangers = std::numeric_limits<size_t>::max();
  };
  // The listener's poller tag; connections get ids (their tags) from 1 up.
  static constexpr uint64_t kTag = 0;

  // The server takes a connection the listener accepted; it watches the socket under `id`.
  using Adopt = std::function<void(uint64_t id, std::unique_ptr<ServerConnection> stream)>;
  // The server closes a stranger (and calls Settle): out of descriptors, or too slow.
  using Close = std::function<void(uint64_t id, const std::string& reason)>;

  // Watches `listener` on `poller`, which must outlive this.
  ServerListener(ScopedFd listener, EventPoller& poller, Options options, Adopt adopt, Close close);
  ~ServerListener();
  ServerListener(const ServerListener&) = delete;
  ServerListener& operator=(const ServerListener&) = delete;

  // When the poller reports kTag: accepts the connections waiting (while there is room) and
  // hands each to Adopt.
  void AcceptAll();
  // Once per turn of the server's loop: closes the strangers past their admission timeout, and
  // watches the listener again once a pause is over and there is room.
  void Tick();
  // When Tick next has something to do (a stranger's timeout, the end of a pause).
  absl::Time NextDeadline() const;

  // Connection `id` is through its server's hello, or is being closed: no longer a stranger.
  void Settle(uint64_t id);
  // Before the server closes every connection at once.
  void SettleAll();

  size_t strangers() const { return strangers_.size(); }
  // Out-of-descriptor rounds met so far and the last accept error, for timeout messages.
  const AcceptGuard& guard() const { return guard_; }

 private:
  struct Stranger {
    int fd;
    absl::Time deadline;
  };
  // Closes the oldest stranger to free a descriptor; false if there is none.
  bool ShedOldest();
  void WatchListener(bool watch);

  const ScopedFd listener_;
  EventPoller& poller_;
  const Options options_;
  const Adopt adopt_;
  const Close close_;
  AcceptGuard guard_;
  bool watching_ = true;
  uint64_t next_id_ = kTag + 1;
  std::map<uint64_t, Stranger> strangers_;  // By id: the oldest first.
};

}  // namespace plexus::auth

#endif  // PLEXUS_BASE_AUTH_SERVER_LISTENER_H_
