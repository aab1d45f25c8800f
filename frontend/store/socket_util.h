// Small POSIX socket helpers with deadlines, shared by the TCPStore and (later) TCP transports.
// Every blocking helper takes an absolute deadline and never waits past it.
#ifndef PLEXUS_FRONTEND_STORE_SOCKET_UTIL_H_
#define PLEXUS_FRONTEND_STORE_SOCKET_UTIL_H_

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace plexus {

// Owns a file descriptor; closes it on destruction.
class ScopedFd {
 public:
  ScopedFd() = default;
  explicit ScopedFd(int fd) : fd_(fd) {}
  ScopedFd(ScopedFd&& other) noexcept : fd_(other.Release()) {}
  ScopedFd& operator=(ScopedFd&& other) noexcept;
  ~ScopedFd() { Reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int Release();
  void Reset(int fd = -1);

 private:
  int fd_ = -1;
};

// A listening TCP socket bound to `host` ("" or "0.0.0.0" for all IPv4 interfaces, "::" for
// all IPv6 ones, "*" for every interface of both families: "::" where the host has IPv6, else
// "0.0.0.0") and `port` (0 picks a free one). Non-blocking, close-on-exec.
absl::StatusOr<ScopedFd> ListenTcp(const std::string& host, int port, int backlog = 1024);

// The local port a socket is bound to.
absl::StatusOr<int> LocalPort(int fd);

// Connects to host:port, retrying refused or unreachable attempts with exponential backoff
// (10 ms doubling to 1 s) until `deadline`. The error names the address, the attempts and the
// last failure. The returned socket is blocking with TCP_NODELAY set.
absl::StatusOr<ScopedFd> ConnectTcpWithRetry(const std::string& host, int port,
                                             absl::Time deadline);

absl::Status SetNonBlocking(int fd, bool non_blocking);
void SetNoDelay(int fd);

// Writes all of `data` to a (blocking or non-blocking) socket by `deadline`.
absl::Status SendAll(int fd, absl::string_view data, absl::Time deadline);
// Reads exactly `size` bytes by `deadline`. Unavailable if the peer closes first.
absl::Status RecvExact(int fd, void* buffer, size_t size, absl::Time deadline);

// "host:port", with brackets for IPv6 literals.
std::string HostPort(absl::string_view host, int port);
// The remote end of a connected socket as "host:port" (for logs), or "unknown peer".
std::string PeerAddress(int fd);

}  // namespace plexus

#endif  // PLEXUS_FRONTEND_STORE_SOCKET_UTIL_H_
