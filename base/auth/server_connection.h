// One accepted connection of an event-loop server (the TCPStore server, the elastic master):
// its socket, its way in (ServerAdmission: TLS, then the secret), and the bytes waiting in each
// direction, read and sent without blocking, through TLS when the connection has it. The
// server owns the protocol on top: it parses input() and queues its answers with Send().
#ifndef PLEXUS_BASE_AUTH_SERVER_CONNECTION_H_
#define PLEXUS_BASE_AUTH_SERVER_CONNECTION_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/auth/server_admission.h"
#include "base/net/event_poller.h"
#include "base/net/socket_util.h"

namespace plexus::auth {

class ServerConnection {
 public:
  // Takes an accepted socket. Null when a TLS session could not be made (out of memory): the
  // server drops the connection (the socket is closed here).
  static std::unique_ptr<ServerConnection> Accept(ScopedFd fd, const TlsContext* tls,
                                                  const std::string& secret, Purpose purpose);

  int fd() const { return fd_.get(); }
  const std::string& address() const { return address_; }  // The peer's, for logs.
  ServerAdmission& admission() { return *admission_; }
  const ServerAdmission& admission() const { return *admission_; }

  // Reads what the socket holds onto input() until it would block.
  enum class ReadEnd {
    kDrained,    // Nothing more for now.
    kClosed,     // The peer closed its end.
    kFailed,     // The socket failed: error() says how.
    kOverLimit,  // input() grew past the caller's limit; the rest is left unread.
  };
  struct ReadOutcome {
    ReadEnd end;
    size_t bytes;  // Read by this call.
  };
  ReadOutcome ReadAvailable(size_t limit);
  std::string& input() { return input_; }

  // Queues `bytes` (held back while the admission is not secure yet) and sends what the socket
  // takes now. False when a send failed: error() says how, and the connection is done for.
  bool Send(absl::string_view bytes);
  bool Flush() { return Send({}); }
  // Drops what is queued and not yet handed to the socket.
  void DiscardOutput() { output_.clear(); }
  size_t queued_bytes() const { return output_.size(); }
  // Bytes wait to go out (queued, or inside TLS).
  bool has_output() const;
  // The socket's writability matters: output waits, or the TLS handshake wants to write.
  bool wants_write() const { return has_output() || admission_->wants_write(); }
  // Keeps `poller`'s EPOLLOUT for this socket (watched for EPOLLIN under `tag`) in step with
  // wants_write().
  void UpdateWatch(EventPoller& poller, uint64_t tag);

  const std::string& error() const { return error_; }

  // Once admitted, with input() consumed and nothing left to send: hands over the socket and
  // its TLS session (null in the clear) to code that carries on with blocking-style calls (the
  // tcp mesh's data connections). This object holds nothing after it.
  Connection Release();

  // For the server's timers (hello deadlines, heartbeats): when it was accepted, when bytes last
  // arrived, when bytes were last queued to send.
  absl::Time opened() const { return opened_; }
  absl::Time last_heard() const { return last_heard_; }
  absl::Time last_sent() const { return last_sent_; }
  // When a heartbeat is due on a connection that beats every `period` while quiet: `period`
  // after bytes were last queued, and never while output waits (it reaches the peer anyway).
  absl::Time NextBeat(absl::Duration period) const {
    return output_.empty() ? last_sent_ + period : absl::InfiniteFuture();
  }
  bool BeatDue(absl::Time now, absl::Duration period) const { return now >= NextBeat(period); }

 private:
  ServerConnection(ScopedFd fd, std::unique_ptr<ServerAdmission> admission);

  ScopedFd fd_;
  const std::string address_;
  // Declared after fd_, so destroyed before it: its TLS session uses the socket.
  std::unique_ptr<ServerAdmission> admission_;
  std::string input_;
  std::string output_;
  bool watching_write_ = false;
  std::string error_;
  const absl::Time opened_ = absl::Now();
  absl::Time last_heard_ = opened_;
  absl::Time last_sent_ = opened_;
};

}  // namespace plexus::auth

#endif  // PLEXUS_BASE_AUTH_SERVER_CONNECTION_H_
