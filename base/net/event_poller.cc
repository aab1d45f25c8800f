#include "base/net/event_poller.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

namespace plexus {

absl::StatusOr<std::unique_ptr<EventPoller>> EventPoller::Create() {
  ScopedFd epoll(epoll_create1(EPOLL_CLOEXEC));
  if (!epoll.valid()) {
    return absl::InternalError(absl::StrCat("epoll_create1: ", strerror(errno)));
  }
  ScopedFd wakeup(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!wakeup.valid()) return absl::InternalError(absl::StrCat("eventfd: ", strerror(errno)));
  return std::unique_ptr<EventPoller>(new EventPoller(std::move(epoll), std::move(wakeup)));
}

EventPoller::EventPoller(ScopedFd epoll, ScopedFd wakeup)
    : epoll_(std::move(epoll)), wakeup_(std::move(wakeup)) {
  Control(EPOLL_CTL_ADD, wakeup_.get(), kReservedTag, EPOLLIN);
}

void EventPoller::Control(int operation, int fd, uint64_t tag, uint32_t events) {
  epoll_event event{};
  event.events = events;
  event.data.u64 = tag;
  epoll_ctl(epoll_.get(), operation, fd, &event);
}

void EventPoller::Watch(int fd, uint64_t tag, uint32_t events) {
  Control(EPOLL_CTL_ADD, fd, tag, events);
}

void EventPoller::Change(int fd, uint64_t tag, uint32_t events) {
  Control(EPOLL_CTL_MOD, fd, tag, events);
}

void EventPoller::Forget(int fd) { epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, fd, nullptr); }

void EventPoller::Wake() {
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t n = write(wakeup_.get(), &one, sizeof(one));
}

absl::Status EventPoller::Wait(absl::Time deadline,
                               const std::function<void(uint64_t, uint32_t)>& on_ready) {
  epoll_event events[64];
  const int ready = epoll_wait(epoll_.get(), events, 64, PollTimeoutMs(deadline));
  if (ready < 0) {
    if (errno == EINTR) return absl::OkStatus();
    return absl::InternalError(absl::StrCat("epoll_wait: ", strerror(errno)));
  }
  for (int i = 0; i < ready; ++i) {
    if (events[i].data.u64 == kReservedTag) {
      uint64_t count;
      [[maybe_unused]] ssize_t n = read(wakeup_.get(), &count, sizeof(count));
      continue;
    }
    on_ready(events[i].data.u64, events[i].events);
  }
  return absl::OkStatus();
}

}  // namespace plexus
