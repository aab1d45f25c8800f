#include "base/net/accept_guard.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/core/logging.h"

namespace plexus {

namespace {

constexpr absl::Duration kLogEvery = absl::Seconds(10);
// Connections shed or turned away per round, so other work is served between rounds while a
// flood drains from the backlog.
constexpr int kMostMadeRoomPerRound = 256;
// How long the listener is left alone when no descriptor could be freed.
constexpr absl::Duration kPause = absl::Milliseconds(100);

int OpenReserve() { return open("/dev/null", O_RDONLY | O_CLOEXEC); }

// Whether accept() failed for want of descriptors (or kernel memory for one).
bool OutOfDescriptors(int accept_errno) {
  return accept_errno == EMFILE || accept_errno == ENFILE || accept_errno == ENOBUFS ||
         accept_errno == ENOMEM;
}

}  // namespace

AcceptGuard::AcceptGuard(std::string server, OnShortage on_shortage)
    : server_(std::move(server)), on_shortage_(on_shortage) {
  if (on_shortage_ == OnShortage::kTurnAway) reserve_.Reset(OpenReserve());
}

bool AcceptGuard::TurnAwayOne(int listener) {
  if (!reserve_.valid()) reserve_.Reset(OpenReserve());
  reserve_.Reset(-1);  // Frees exactly one descriptor for the accept below.
  const int fd = accept4(listener, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (fd >= 0) close(fd);
  reserve_.Reset(OpenReserve());
  return fd >= 0;
}

int AcceptGuard::Accept(int listener, const std::function<bool()>& shed_one) {
  while (true) {
    const int fd = accept4(listener, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) return fd;
    if (errno == EINTR || errno == ECONNABORTED) continue;
    if (!OutOfDescriptors(errno)) {
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        Log(LogLevel::kWarning, absl::StrCat(server_, ": accept: ", strerror(errno)));
      }
      return -1;
    }
    round_errno_ = errno;
    if (on_shortage_ == OnShortage::kPause) {
      if (shed_one()) ++round_shed_;
      ++total_pauses_;
      paused_until_ = absl::Now() + kPause;
      return -1;
    }
    if (round_shed_ + round_turned_away_ >= kMostMadeRoomPerRound) return -1;
    if (shed_one()) {
      ++round_shed_;
    } else if (TurnAwayOne(listener)) {
      ++round_turned_away_;
    } else {
      // Nothing could be freed (the system, not this process, is out): no spinning on it.
      paused_until_ = absl::Now() + kPause;
      return -1;
    }
  }
}

void AcceptGuard::EndRound() {
  const int accept_errno = std::exchange(round_errno_, 0);
  total_shed_ += std::exchange(round_shed_, 0);
  total_turned_away_ += std::exchange(round_turned_away_, 0);
  if (accept_errno == 0) return;
  ++shortages_;
  last_errno_ = accept_errno;
  const absl::Time now = absl::Now();
  if (now - last_log_ < kLogEvery) return;
  last_log_ = now;
  Log(LogLevel::kWarning,
      absl::StrCat(server_, ": out of file descriptors (accept: ", strerror(accept_errno),
                   "): too many open connections; closed ", total_shed_,
                   " connection(s) that had not authenticated to make room, ",
                   on_shortage_ == OnShortage::kPause
                       ? absl::StrCat("paused accepting ", total_pauses_, " time(s)")
                       : absl::StrCat("turned ", total_turned_away_, " new one(s) away at once"),
                   "; ", shortages_,
                   " shortage(s) so far. Raise the limit (ulimit -n) if this is legitimate load"));
}

}  // namespace plexus
