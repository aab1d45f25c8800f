#include "base/net/accept_guard.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "base/core/logging.h"
#include "base/core/mutex.h"

namespace plexus {

namespace {

constexpr absl::Duration kLogEvery = absl::Seconds(10);
// Connections shed or turned away per round, so other work is served between rounds while a
// flood drains from the backlog.
constexpr int kMostMadeRoomPerRound = 256;
// How long the listener is left alone when no descriptor could be freed.
constexpr absl::Duration kPause = absl::Milliseconds(100);

// How long a listener that shut down another's stranger waits for its owner to close it.
constexpr absl::Duration kWaitForShed = absl::Milliseconds(2);
// How long the other listeners leave a descriptor freed that way to the one that asked for it.
constexpr absl::Duration kDebtLifetime = absl::Milliseconds(200);

// The strangers of every listener in the process, so that one out of descriptors can make
// room at another's expense. Shutting a socket down is safe from any thread; closing it is its
// owner's: the entry is removed before the owner closes, under the same lock as the shutdown,
// so a descriptor number reused meanwhile is never touched.
class SharedBudget {
 public:
  static SharedBudget& Process() {
    static auto* budget = new SharedBudget();
    return *budget;
  }

  void Add(const AcceptGuard* owner, int fd) {
    MutexLock lock(mu_);
    strangers_[{owner, fd}] = absl::Now();
  }
  void Forget(const AcceptGuard* owner, int fd) {
    MutexLock lock(mu_);
    strangers_.erase({owner, fd});
  }
  void ForgetAll(const AcceptGuard* owner) {
    MutexLock lock(mu_);
    absl::erase_if(strangers_, [owner](const auto& entry) { return entry.first.first == owner; });
    if (owed_to_ == owner) owed_to_ = nullptr;
  }

  enum class Shed { kNone, kMine, kElsewhere };
  // Finds the process's oldest stranger. If it is another listener's, shuts it down and owes
  // the descriptor its owner will free to `requester`; if it is the requester's, it sheds it
  // itself.
  Shed ShedOldest(const AcceptGuard* requester) {
    MutexLock lock(mu_);
    auto oldest = strangers_.end();
    for (auto it = strangers_.begin(); it != strangers_.end(); ++it) {
      if (oldest == strangers_.end() || it->second < oldest->second) oldest = it;
    }
    if (oldest == strangers_.end()) return Shed::kNone;
    if (oldest->first.first == requester) return Shed::kMine;
    shutdown(oldest->first.second, SHUT_RDWR);
    strangers_.erase(oldest);
    owed_to_ = requester;
    owed_since_ = absl::Now();
    return Shed::kElsewhere;
  }

  // False while a descriptor freed for another listener may still be on its way to it.
  bool MayAccept(const AcceptGuard* guard) {
    MutexLock lock(mu_);
    return owed_to_ == nullptr || owed_to_ == guard || absl::Now() - owed_since_ > kDebtLifetime;
  }
  void Settle(const AcceptGuard* guard) {
    MutexLock lock(mu_);
    if (owed_to_ == guard) owed_to_ = nullptr;
  }

 private:
  Mutex mu_;
  absl::flat_hash_map<std::pair<const AcceptGuard*, int>, absl::Time> strangers_
      ABSL_GUARDED_BY(mu_);
  const AcceptGuard* owed_to_ ABSL_GUARDED_BY(mu_) = nullptr;
  absl::Time owed_since_ ABSL_GUARDED_BY(mu_);
};

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

AcceptGuard::~AcceptGuard() { ForgetAll(); }

void AcceptGuard::Forget(int fd) { SharedBudget::Process().Forget(this, fd); }

void AcceptGuard::ForgetAll() { SharedBudget::Process().ForgetAll(this); }

bool AcceptGuard::TurnAwayOne(int listener) {
  if (!reserve_.valid()) reserve_.Reset(OpenReserve());
  reserve_.Reset(-1);  // Frees exactly one descriptor for the accept below.
  const int fd = accept4(listener, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (fd >= 0) close(fd);
  reserve_.Reset(OpenReserve());
  return fd >= 0;
}

int AcceptGuard::Accept(int listener, const std::function<bool()>& shed_one) {
  SharedBudget& budget = SharedBudget::Process();
  if (!budget.MayAccept(this)) {  // Another listener's turn for the next free descriptor.
    paused_until_ = absl::Now() + kWaitForShed;
    return -1;
  }
  while (true) {
    const int fd = accept4(listener, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
      budget.Settle(this);
      // A forming mesh's connections are peers that would not try again: never shed elsewhere.
      if (on_shortage_ == OnShortage::kTurnAway) budget.Add(this, fd);
      return fd;
    }
    if (errno == EINTR || errno == ECONNABORTED) continue;
    if (!OutOfDescriptors(errno)) {
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        Log(LogLevel::kWarning, absl::StrCat(server_, ": accept: ", strerror(errno)));
      }
      return -1;
    }
    round_errno_ = errno;
    // The process's oldest stranger goes first, whichever listener holds it.
    const SharedBudget::Shed shed = budget.ShedOldest(this);
    if (shed == SharedBudget::Shed::kElsewhere) {
      ++round_shed_elsewhere_;
      paused_until_ = absl::Now() + kWaitForShed;
      return -1;
    }
    // None registered anywhere still leaves a forming mesh's own handshakes (never registered).
    const bool shed_mine = shed_one();
    if (on_shortage_ == OnShortage::kPause) {
      ++total_pauses_;
      if (shed_mine) ++round_shed_;
      paused_until_ = absl::Now() + kPause;
      return -1;
    }
    if (round_shed_ + round_turned_away_ >= kMostMadeRoomPerRound) return -1;
    if (shed_mine) {
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
  total_shed_elsewhere_ += std::exchange(round_shed_elsewhere_, 0);
  if (accept_errno == 0) return;
  ++shortages_;
  last_errno_ = accept_errno;
  const absl::Time now = absl::Now();
  if (now - last_log_ < kLogEvery) return;
  last_log_ = now;
  Log(LogLevel::kWarning,
      absl::StrCat(server_, ": out of file descriptors (accept: ", strerror(accept_errno),
                   "): too many open connections; closed ", total_shed_,
                   " connection(s) that had not authenticated to make room (and ",
                   total_shed_elsewhere_, " of other servers in this process), ",
                   on_shortage_ == OnShortage::kPause
                       ? absl::StrCat("paused accepting ", total_pauses_, " time(s)")
                       : absl::StrCat("turned ", total_turned_away_, " new one(s) away at once"),
                   "; ", shortages_,
                   " shortage(s) so far. Raise the limit (ulimit -n) if this is legitimate load"));
}

void RefusalLog::Refused(absl::string_view detail, LogLevel level) {
  ++refused_;
  if (refused_ > 10 && refused_ % 1000 != 0) return;
  Log(level, refused_ >= 10
                 ? absl::StrCat(server_, ": ", detail, " (", refused_, " refused so far)")
                 : absl::StrCat(server_, ": ", detail));
}

}  // namespace plexus
