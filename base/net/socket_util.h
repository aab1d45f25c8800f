// Small POSIX socket helpers with deadlines, shared by the TCPStore and (later) TCP transports.
// Every blocking helper takes an absolute deadline and never waits past it.
#ifndef PLEXUS_BASE_NET_SOCKET_UTIL_H_
#define PLEXUS_BASE_NET_SOCKET_UTIL_H_

#include <sys/types.h>
#include <sys/uio.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "base/core/mutex.h"

namespace plexus {

// The timeout poll() and epoll_wait() take to sleep until `deadline`: milliseconds rounded up
// and one more, so a timer checked on waking has expired (0 once past; -1 for
// absl::InfiniteFuture(), capped near 12 days). Every wait on a socket rounds this way.
int PollTimeoutMs(absl::Time deadline);

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

// Encryption over a connected socket (TLS, base/auth/tls.h), seen as the socket calls it
// replaces. Not thread-safe: one thread at a time, reads and writes included.
class StreamCipher {
 public:
  virtual ~StreamCipher() = default;
  // Like recv(MSG_DONTWAIT): plaintext bytes read, 0 once the peer has gone, -1 with errno
  // (EAGAIN: nothing now; then nothing is buffered inside either, so poll the socket).
  virtual ssize_t Read(void* buffer, size_t size) = 0;
  // Like sendmsg(MSG_DONTWAIT): plaintext bytes taken, or -1 with errno (EAGAIN: no room).
  // Bytes taken may still sit, sealed, in the cipher: see HasPendingOutput.
  virtual ssize_t Write(const iovec* iov, int count) = 0;
  // A sealed record is only partly on the socket: its owner keeps waiting for writability
  // and calls Flush until this is false.
  virtual bool HasPendingOutput() const = 0;
  // Sends pending output: 0 once none is left, -1 with errno (EAGAIN: the socket is full).
  virtual int Flush() = 0;
  // Secret bytes both ends derive from this channel, for binding an authentication to it.
  virtual std::string ChannelBinding() const = 0;
  // Why the channel broke (errno EPROTO: the peer's alert, a record that failed to verify).
  virtual std::string LastError() const = 0;
  // The connection's own handshakes are over and nothing but this cipher will read the socket
  // again: it may read ahead of what it was asked for (fewer system calls for bulk data).
  virtual void ReadAhead() = 0;
};

// A connected socket and, when it is encrypted, its cipher.
struct Connection {
  ScopedFd fd;
  std::unique_ptr<StreamCipher> cipher;
  bool valid() const { return fd.valid(); }
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

// Connects as ConnectTcpWithRetry does, then runs `handshake` on the connection. While the
// handshake fails with kUnavailable (the server closed or reset the connection before
// answering, as a server out of descriptors does to make room) and the deadline allows, it
// tries again on a fresh connection (5 ms doubling to 200 ms apart), for at most
// kRetryClosedHandshakesFor: a server that closes every try is more likely misconfigured (it
// expects no secret, or another protocol), and says so sooner that way. `handshake` must reset
// whatever it set up on an earlier try. The last error says how many tries were made.
// Before a server closes a connection it refused: reads away what the client sent (closing
// with unread bytes makes the kernel reset the connection, which destroys what the client has
// not read yet, such as why it was refused) and ends with a FIN.
void DiscardUnreadAndShutdown(int fd);

// What a server sends alone before closing a connection it refused during a handshake, so the
// client can tell a verdict (final) from a close with nothing sent (perhaps shed: try again).
// Only a peer whose first bytes are a plexus magic (every one starts with "PLX") gets it:
// anything else hears nothing.
inline constexpr char kRefusalByte = 0;
inline constexpr absl::string_view kPlexusMagicPrefix = "PLX";

inline constexpr absl::Duration kRetryClosedHandshakesFor = absl::Seconds(2);
absl::StatusOr<ScopedFd> ConnectWithHandshake(const std::string& host, int port,
                                              absl::Time deadline,
                                              const std::function<absl::Status(int fd)>& handshake);

absl::Status SetNonBlocking(int fd, bool non_blocking);
void SetNoDelay(int fd);

// Writes all of `data` to a (blocking or non-blocking) socket by `deadline`, through
// `cipher` when it is not null (then pending output is flushed too). `cipher_mu`, when given,
// is held around each use of the cipher and released while waiting for room, so another
// thread may read from it meanwhile.
absl::Status SendAll(int fd, absl::string_view data, absl::Time deadline);
absl::Status SendAll(int fd, StreamCipher* cipher, absl::string_view data, absl::Time deadline,
                     Mutex* cipher_mu = nullptr);
// Reads exactly `size` bytes by `deadline`. Unavailable if the peer closes first.
absl::Status RecvExact(int fd, void* buffer, size_t size, absl::Time deadline);
absl::Status RecvExact(int fd, StreamCipher* cipher, void* buffer, size_t size,
                       absl::Time deadline);

// "host:port", with brackets for IPv6 literals.
std::string HostPort(absl::string_view host, int port);
// The reverse, for every address a user or a peer gives: "host:port" or "[v6]:port", the host
// non-empty and the port 0-65535 (callers that need a real port refuse 0). InvalidArgument
// naming `text` otherwise.
absl::StatusOr<std::pair<std::string, int>> ParseHostPort(absl::string_view text);
// The remote end of a connected socket as "host:port" (for logs), or "unknown peer".
std::string PeerAddress(int fd);

}  // namespace plexus

#endif  // PLEXUS_BASE_NET_SOCKET_UTIL_H_
