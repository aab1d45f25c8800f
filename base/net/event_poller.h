// EventPoller: the epoll set a server's loop thread sleeps on, with a wake-up other threads can
// ring. Sockets are watched under a tag the server chooses (a connection id, its listener);
// Wait() sleeps until one is ready, the timeout passes or Wake() is called, and hands the
// ready tags to the server. The store server and the elastic master run on it.
#ifndef PLEXUS_BASE_NET_EVENT_POLLER_H_
#define PLEXUS_BASE_NET_EVENT_POLLER_H_

#include <cstdint>
#include <functional>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/net/socket_util.h"

namespace plexus {

class EventPoller {
 public:
  // The tag Wait() keeps for its wake-up; servers choose any other.
  static constexpr uint64_t kReservedTag = ~uint64_t{0};

  // Internal (naming errno) when the kernel refuses an epoll set or an eventfd.
  static absl::StatusOr<std::unique_ptr<EventPoller>> Create();

  // Starts watching `fd` for `events` (EPOLLIN, EPOLLOUT, ...; 0: none for now) under `tag`.
  void Watch(int fd, uint64_t tag, uint32_t events);
  // Changes what `fd` is watched for.
  void Change(int fd, uint64_t tag, uint32_t events);
  // Stops watching `fd` (before it is closed).
  void Forget(int fd);

  // Ends the current or next Wait() early. Safe from any thread.
  void Wake();

  // Sleeps until `deadline` at most (absl::InfiniteFuture(): until something happens; rounded
  // as PollTimeoutMs does), then calls `on_ready(tag, events)` for each ready socket. A wake-up
  // is consumed here and calls nothing. Internal (naming errno) if epoll_wait fails other than
  // by a signal.
  absl::Status Wait(absl::Time deadline,
                    const std::function<void(uint64_t tag, uint32_t events)>& on_ready);

 private:
  EventPoller(ScopedFd epoll, ScopedFd wakeup);
  void Control(int operation, int fd, uint64_t tag, uint32_t events);

  const ScopedFd epoll_;
  const ScopedFd wakeup_;  // An eventfd, watched under kReservedTag.
};

}  // namespace plexus

#endif  // PLEXUS_BASE_NET_EVENT_POLLER_H_
