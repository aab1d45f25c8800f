#include "base/net/socket_util.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/core/status_macros.h"

namespace plexus {
namespace {

// Waits until `fd` is ready for `events` or the deadline passes.
absl::Status PollUntil(int fd, short events, absl::Time deadline, absl::string_view what) {
  while (true) {
    pollfd pfd{fd, events, 0};
    int timeout_ms = PollTimeoutMs(deadline);
    int n = poll(&pfd, 1, timeout_ms);
    if (n > 0) return absl::OkStatus();
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return absl::InternalError(absl::StrCat(what, ": poll failed: ", strerror(errno)));
    if (timeout_ms == 0 || absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(what, ": deadline passed"));
    }
  }
}

absl::StatusOr<addrinfo*> Resolve(const std::string& host, int port, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  addrinfo* result = nullptr;
  const std::string service = absl::StrCat(port);
  int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &result);
  if (rc != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot resolve ", HostPort(host, port), ": ", gai_strerror(rc)));
  }
  return result;
}

}  // namespace

int PollTimeoutMs(absl::Time deadline) {
  if (deadline == absl::InfiniteFuture()) return -1;
  const absl::Duration left = deadline - absl::Now();
  if (left <= absl::ZeroDuration()) return 0;
  const int64_t ms = absl::ToInt64Milliseconds(absl::Ceil(left, absl::Milliseconds(1))) + 1;
  return static_cast<int>(std::min<int64_t>(ms, 1 << 30));
}

ScopedFd& ScopedFd::operator=(ScopedFd&& other) noexcept {
  if (this != &other) Reset(other.Release());
  return *this;
}

int ScopedFd::Release() {
  int fd = fd_;
  fd_ = -1;
  return fd;
}

void ScopedFd::Reset(int fd) {
  if (fd_ >= 0) close(fd_);
  fd_ = fd;
}

std::string HostPort(absl::string_view host, int port) {
  if (host.find(':') != absl::string_view::npos) return absl::StrCat("[", host, "]:", port);
  return absl::StrCat(host, ":", port);
}

absl::StatusOr<std::pair<std::string, int>> ParseHostPort(absl::string_view text) {
  auto bad = [text](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("'", text, "' is not host:port (", why,
                                                   "; e.g. 127.0.0.1:29500 or [::1]:29500)"));
  };
  absl::string_view host;
  absl::string_view port;
  if (absl::StartsWith(text, "[")) {
    const size_t close = text.find("]:");
    if (close == absl::string_view::npos) return bad("an IPv6 literal needs ]:port after it");
    host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else {
    const size_t colon = text.rfind(':');
    if (colon == absl::string_view::npos) return bad("no port");
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  int number = -1;
  if (!absl::SimpleAtoi(port, &number) || number < 0 || number > 65535) {
    return bad("the port must be 0-65535");
  }
  if (host.empty()) return bad("no host");
  return std::make_pair(std::string(host), number);
}

std::string PeerAddress(int fd) {
  sockaddr_storage address{};
  socklen_t length = sizeof(address);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    return "unknown peer";
  }
  char host[INET6_ADDRSTRLEN] = {0};
  int port = 0;
  if (address.ss_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(&address);
    inet_ntop(AF_INET, &v4->sin_addr, host, sizeof(host));
    port = ntohs(v4->sin_port);
  } else if (address.ss_family == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&address);
    inet_ntop(AF_INET6, &v6->sin6_addr, host, sizeof(host));
    port = ntohs(v6->sin6_port);
  } else {
    return "local peer";
  }
  return HostPort(host, port);
}

absl::Status SetNonBlocking(int fd, bool non_blocking) {
  int flags = fcntl(fd, F_GETFL, 0);
  if (flags < 0) return absl::InternalError(absl::StrCat("fcntl: ", strerror(errno)));
  flags = non_blocking ? (flags | O_NONBLOCK) : (flags & ~O_NONBLOCK);
  if (fcntl(fd, F_SETFL, flags) < 0) {
    return absl::InternalError(absl::StrCat("fcntl: ", strerror(errno)));
  }
  return absl::OkStatus();
}

void SetNoDelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

absl::StatusOr<ScopedFd> ListenTcp(const std::string& host, int port, int backlog) {
  if (host == "*") {
    absl::StatusOr<ScopedFd> dual_stack = ListenTcp("::", port, backlog);
    return dual_stack.ok() ? std::move(dual_stack) : ListenTcp("0.0.0.0", port, backlog);
  }
  ASSIGN_OR_RETURN(addrinfo * addresses, Resolve(host, port, /*passive=*/true));
  std::string last_error = "no address";
  ScopedFd listener;
  for (addrinfo* ai = addresses; ai != nullptr; ai = ai->ai_next) {
    ScopedFd fd(socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!fd.valid()) {
      last_error = strerror(errno);
      continue;
    }
    int one = 1;
    setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd.get(), ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd.get(), backlog) != 0) {
      last_error = strerror(errno);
      continue;
    }
    listener = std::move(fd);
    break;
  }
  freeaddrinfo(addresses);
  if (!listener.valid()) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", HostPort(host, port), ": ", last_error));
  }
  return listener;
}

absl::StatusOr<int> LocalPort(int fd) {
  sockaddr_storage address{};
  socklen_t length = sizeof(address);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    return absl::InternalError(absl::StrCat("getsockname: ", strerror(errno)));
  }
  if (address.ss_family == AF_INET6) {
    return ntohs(reinterpret_cast<sockaddr_in6*>(&address)->sin6_port);
  }
  return ntohs(reinterpret_cast<sockaddr_in*>(&address)->sin_port);
}

absl::StatusOr<ScopedFd> ConnectTcpWithRetry(const std::string& host, int port,
                                             absl::Time deadline) {
  const absl::Time start = absl::Now();
  absl::Duration backoff = absl::Milliseconds(10);
  int attempts = 0;
  std::string last_error;
  while (true) {
    ++attempts;
    auto addresses = Resolve(host, port, /*passive=*/false);
    if (!addresses.ok()) {
      last_error = std::string(addresses.status().message());
    } else {
      for (addrinfo* ai = *addresses; ai != nullptr; ai = ai->ai_next) {
        ScopedFd fd(socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
        if (!fd.valid()) {
          last_error = strerror(errno);
          continue;
        }
        int rc = connect(fd.get(), ai->ai_addr, ai->ai_addrlen);
        if (rc != 0 && errno == EINPROGRESS) {
          absl::Status ready = PollUntil(fd.get(), POLLOUT, deadline, "connect");
          if (!ready.ok()) {
            last_error = "connection attempt timed out";
            continue;
          }
          int error = 0;
          socklen_t length = sizeof(error);
          getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &error, &length);
          rc = error == 0 ? 0 : -1;
          errno = error;
        }
        if (rc != 0) {
          last_error = strerror(errno);
          continue;
        }
        RETURN_IF_ERROR(SetNonBlocking(fd.get(), false));
        SetNoDelay(fd.get());
        freeaddrinfo(*addresses);
        return fd;
      }
      freeaddrinfo(*addresses);
    }
    const absl::Time now = absl::Now();
    if (now >= deadline) break;
    absl::SleepFor(std::min(backoff, deadline - now));
    backoff = std::min(backoff * 2, absl::Seconds(1));
  }
  return absl::DeadlineExceededError(
      absl::StrCat("could not connect to ", HostPort(host, port), " within ",
                   absl::FormatDuration(absl::Trunc(absl::Now() - start, absl::Milliseconds(1))),
                   " after ", attempts, " attempts: ", last_error));
}

void DiscardUnreadAndShutdown(int fd) {
  char sink[4096];
  for (int reads = 0; reads < 16 && recv(fd, sink, sizeof(sink), MSG_DONTWAIT) > 0; ++reads) {
  }
  shutdown(fd, SHUT_WR);
}

absl::StatusOr<ScopedFd> ConnectWithHandshake(
    const std::string& host, int port, absl::Time deadline,
    const std::function<absl::Status(int fd)>& handshake) {
  const absl::Time give_up = std::min(deadline, absl::Now() + kRetryClosedHandshakesFor);
  absl::Duration backoff = absl::Milliseconds(5);
  for (int tries = 1;; ++tries) {
    ASSIGN_OR_RETURN(ScopedFd fd, ConnectTcpWithRetry(host, port, deadline));
    absl::Status status = handshake(fd.get());
    if (status.ok()) return fd;
    if (!absl::IsUnavailable(status) || give_up - absl::Now() <= backoff) {
      if (tries == 1) return status;
      absl::Status counted(status.code(), absl::StrCat(status.message(), " (", tries,
                                                       " connections, each closed before an "
                                                       "answer)"));
      status.ForEachPayload([&counted](absl::string_view url, const absl::Cord& payload) {
        counted.SetPayload(url, payload);
      });
      return counted;
    }
    absl::SleepFor(backoff);
    backoff = std::min(backoff * 2, absl::Milliseconds(200));
  }
}

absl::Status SendAll(int fd, absl::string_view data, absl::Time deadline) {
  return SendAll(fd, nullptr, data, deadline);
}

absl::Status SendAll(int fd, StreamCipher* cipher, absl::string_view data, absl::Time deadline,
                     Mutex* cipher_mu) {
  size_t done = 0;
  while (true) {
    ssize_t n;
    std::optional<MutexLock> lock;
    if (cipher_mu != nullptr) lock.emplace(*cipher_mu);
    if (done < data.size()) {
      if (cipher != nullptr) {
        iovec iov{const_cast<char*>(data.data()) + done, data.size() - done};
        n = cipher->Write(&iov, 1);
      } else {
        n = send(fd, data.data() + done, data.size() - done, MSG_NOSIGNAL | MSG_DONTWAIT);
      }
      if (n > 0) {
        done += static_cast<size_t>(n);
        continue;
      }
    } else {
      if (cipher == nullptr || !cipher->HasPendingOutput()) return absl::OkStatus();
      n = cipher->Flush();
      if (n == 0) return absl::OkStatus();
    }
    const int error = errno;
    const std::string reason = cipher != nullptr && error == EPROTO ? cipher->LastError() : "";
    lock.reset();  // Released before any wait for room.
    if (n < 0 && error == EINTR) continue;
    if (n < 0 && (error == EAGAIN || error == EWOULDBLOCK)) {
      RETURN_IF_ERROR(PollUntil(fd, POLLOUT, deadline, "send"));
      continue;
    }
    if (!reason.empty()) return absl::UnauthenticatedError(absl::StrCat("TLS: ", reason));
    return absl::UnavailableError(absl::StrCat("send failed: ", strerror(error)));
  }
}

absl::Status RecvExact(int fd, void* buffer, size_t size, absl::Time deadline) {
  return RecvExact(fd, nullptr, buffer, size, deadline);
}

absl::Status RecvExact(int fd, StreamCipher* cipher, void* buffer, size_t size,
                       absl::Time deadline) {
  auto* out = static_cast<char*>(buffer);
  size_t done = 0;
  while (done < size) {
    ssize_t n = cipher != nullptr ? cipher->Read(out + done, size - done)
                                  : recv(fd, out + done, size - done, MSG_DONTWAIT);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n == 0) return absl::UnavailableError("connection closed by peer");
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      RETURN_IF_ERROR(PollUntil(fd, POLLIN, deadline, "recv"));
      continue;
    }
    if (cipher != nullptr && errno == EPROTO) {
      return absl::UnauthenticatedError(absl::StrCat("TLS: ", cipher->LastError()));
    }
    return absl::UnavailableError(absl::StrCat("recv failed: ", strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace plexus
