#include "base/auth/server_connection.h"

#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace plexus::auth {

std::unique_ptr<ServerConnection> ServerConnection::Accept(ScopedFd fd, const TlsContext* tls,
                                                           const std::string& secret,
                                                           Purpose purpose) {
  std::unique_ptr<ServerAdmission> admission =
      ServerAdmission::Begin(fd.get(), tls, secret, purpose);
  if (admission == nullptr) return nullptr;
  return std::unique_ptr<ServerConnection>(
      new ServerConnection(std::move(fd), std::move(admission)));
}

ServerConnection::ServerConnection(ScopedFd fd, std::unique_ptr<ServerAdmission> admission)
    : fd_(std::move(fd)), address_(PeerAddress(fd_.get())), admission_(std::move(admission)) {}

ServerConnection::ReadOutcome ServerConnection::ReadAvailable(size_t limit) {
  TlsSession* tls = admission_->session();
  char chunk[64 * 1024];
  size_t total = 0;
  while (true) {
    const ssize_t n =
        tls != nullptr ? tls->Read(chunk, sizeof(chunk)) : recv(fd_.get(), chunk, sizeof(chunk), 0);
    if (n > 0) {
      input_.append(chunk, static_cast<size_t>(n));
      total += static_cast<size_t>(n);
      last_heard_ = absl::Now();
      if (input_.size() > limit) return {ReadEnd::kOverLimit, total};
      continue;
    }
    if (n == 0) return {ReadEnd::kClosed, total};
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return {ReadEnd::kDrained, total};
    error_ = tls != nullptr ? tls->LastError() : "";
    if (error_.empty()) error_ = strerror(errno);
    return {ReadEnd::kFailed, total};
  }
}

bool ServerConnection::has_output() const {
  const TlsSession* tls = admission_->session();
  return !output_.empty() || (tls != nullptr && tls->HasPendingOutput());
}

bool ServerConnection::Send(absl::string_view bytes) {
  if (!bytes.empty()) {
    output_.append(bytes.data(), bytes.size());
    last_sent_ = absl::Now();
  }
  if (!admission_->secure()) return true;  // Queued until the TLS handshake is done.
  TlsSession* tls = admission_->session();
  while (has_output()) {
    ssize_t n;
    if (output_.empty()) {
      n = tls->Flush();
      if (n == 0) return true;
    } else if (tls != nullptr) {
      iovec iov{output_.data(), output_.size()};
      n = tls->Write(&iov, 1);
    } else {
      n = send(fd_.get(), output_.data(), output_.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    }
    if (n > 0) {
      output_.erase(0, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    error_ = tls != nullptr ? tls->LastError() : "";
    if (error_.empty()) error_ = n < 0 ? strerror(errno) : "the socket took nothing";
    return false;
  }
  return true;
}

Connection ServerConnection::Release() {
  return Connection{std::move(fd_), admission_->TakeSession()};
}

void ServerConnection::UpdateWatch(EventPoller& poller, uint64_t tag) {
  const bool want_write = wants_write();
  if (want_write == watching_write_) return;
  watching_write_ = want_write;
  poller.Change(fd_.get(), tag, EPOLLIN | (want_write ? uint32_t{EPOLLOUT} : 0u));
}

}  // namespace plexus::auth
