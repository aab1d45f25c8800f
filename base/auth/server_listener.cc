#include "base/auth/server_listener.h"

#include <sys/epoll.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace plexus::auth {

ServerListener::ServerListener(ScopedFd listener, EventPoller& poller, Options options, Adopt adopt,
                               Close close)
    : listener_(std::move(listener)),
      poller_(poller),
      options_(std::move(options)),
      adopt_(std::move(adopt)),
      close_(std::move(close)),
      guard_(options_.server, options_.on_shortage) {
  poller_.Watch(listener_.get(), kTag, EPOLLIN);
}

ServerListener::~ServerListener() {
  SettleAll();
  poller_.Forget(listener_.get());
}

void ServerListener::AcceptAll() {
  while (strangers_.size() < options_.most_strangers) {
    ScopedFd fd(guard_.Accept(listener_.get(), [this] { return ShedOldest(); }));
    if (!fd.valid()) break;
    SetNoDelay(fd.get());
    const int raw_fd = fd.get();
    std::unique_ptr<ServerConnection> stream =
        ServerConnection::Accept(std::move(fd), options_.tls, options_.secret, options_.purpose);
    if (stream == nullptr) {  // Out of memory for its TLS session: dropped (and closed).
      guard_.Forget(raw_fd);
      continue;
    }
    const uint64_t id = next_id_++;
    strangers_[id] = {raw_fd, absl::Now() + options_.admission_timeout};
    adopt_(id, std::move(stream));
  }
  guard_.EndRound();
  Tick();  // Off the poller at once when full or paused.
}

void ServerListener::Tick() {
  const absl::Time now = absl::Now();
  std::vector<uint64_t> late;
  for (const auto& [id, stranger] : strangers_) {
    if (stranger.deadline <= now) late.push_back(id);
  }
  for (uint64_t id : late) {
    close_(id,
           absl::StrCat("no handshake within ", absl::FormatDuration(options_.admission_timeout)));
    Settle(id);
  }
  WatchListener(strangers_.size() < options_.most_strangers && now >= guard_.paused_until());
}

absl::Time ServerListener::NextDeadline() const {
  // Full, it waits for a stranger to go (an event, or its deadline below); else for the pause.
  const bool paused = !watching_ && strangers_.size() < options_.most_strangers;
  absl::Time next = paused ? guard_.paused_until() : absl::InfiniteFuture();
  for (const auto& [id, stranger] : strangers_) next = std::min(next, stranger.deadline);
  return next;
}

void ServerListener::Settle(uint64_t id) {
  auto it = strangers_.find(id);
  if (it == strangers_.end()) return;
  guard_.Forget(it->second.fd);
  strangers_.erase(it);
}

void ServerListener::SettleAll() {
  guard_.ForgetAll();
  strangers_.clear();
}

bool ServerListener::ShedOldest() {
  if (strangers_.empty()) return false;
  const uint64_t oldest = strangers_.begin()->first;
  close_(oldest, "closed to make room (out of file descriptors) before its handshake");
  Settle(oldest);
  return true;
}

void ServerListener::WatchListener(bool watch) {
  if (watch == watching_) return;
  watching_ = watch;
  poller_.Change(listener_.get(), kTag, watch ? uint32_t{EPOLLIN} : 0u);
}

}  // namespace plexus::auth
