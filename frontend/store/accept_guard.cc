#include "frontend/store/accept_guard.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "frontend/core/logging.h"

namespace plexus {

namespace {

constexpr absl::Duration kLogEvery = absl::Seconds(10);

int OpenReserve() { return open("/dev/null", O_RDONLY | O_CLOEXEC); }

}  // namespace

bool OutOfDescriptors(int accept_errno) {
  return accept_errno == EMFILE || accept_errno == ENFILE || accept_errno == ENOBUFS ||
         accept_errno == ENOMEM;
}

AcceptGuard::AcceptGuard(std::string server) : server_(std::move(server)) {
  reserve_.Reset(OpenReserve());
}

bool AcceptGuard::TurnAwayOne(int listener) {
  if (!reserve_.valid()) reserve_.Reset(OpenReserve());
  reserve_.Reset(-1);  // Frees exactly one descriptor for the accept below.
  const int fd = accept4(listener, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (fd >= 0) close(fd);
  reserve_.Reset(OpenReserve());
  return fd >= 0;
}

void AcceptGuard::Note(int accept_errno, int shed, int turned_away) {
  total_shed_ += shed;
  total_turned_away_ += turned_away;
  ++shortages_;
  const absl::Time now = absl::Now();
  if (now - last_log_ < kLogEvery) return;
  last_log_ = now;
  Log(LogLevel::kWarning,
      absl::StrCat(server_, ": out of file descriptors (accept: ", strerror(accept_errno),
                   "): closed ", total_shed_, " connection(s) that had not authenticated to make "
                   "room, turned ", total_turned_away_, " new one(s) away at once; ", shortages_,
                   " shortage(s) so far. Raise the limit (ulimit -n) if this is legitimate load"));
}

}  // namespace plexus
