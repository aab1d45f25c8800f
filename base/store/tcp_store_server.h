// TCPStoreServer: the server side of TCPStore. One event-loop thread (epoll) serves any number
// of clients; blocking requests (get, wait, multi_get, wait-for-clients) are parked as waiters
// and answered when their keys appear or their deadline passes, so one slow client never
// stalls the others; while parked, the client hears a heartbeat as often as it asked. Runs inside a
// process (TCPStore with is_server) or standalone
// (//tools:tcp_store_server).
#ifndef PLEXUS_BASE_STORE_TCP_STORE_SERVER_H_
#define PLEXUS_BASE_STORE_TCP_STORE_SERVER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/auth/server_listener.h"
#include "base/auth/tls.h"
#include "base/core/mutex.h"
#include "base/net/event_poller.h"
#include "base/net/socket_util.h"
#include "base/store/key_value_table.h"
#include "base/store/tcp_store_protocol.h"

namespace plexus {

struct TCPStoreServerOptions {
  // Address to bind: "" listens on all IPv4 interfaces, "127.0.0.1" stays on loopback.
  std::string host;
  int port = 0;  // 0 picks a free port; see TCPStoreServer::port().
  // Clients expected in total; only used in messages ("1/4 clients joined"). 0 = unknown.
  int expected_clients = 0;
  // Frames larger than this close the connection before anything is allocated for them.
  uint64_t max_frame_bytes = tcp_store::kDefaultMaxFrameBytes;
  // A connection that has not completed its handshake by then is closed.
  absl::Duration handshake_timeout = absl::Seconds(10);
  // With a secret, every client must first prove it (base/auth/mutual_auth.h); one that
  // does not is closed before any other byte is parsed. Empty: no authentication.
  std::string secret;
  // With TLS, every connection starts with a TLS 1.3 handshake (then the secret's exchange,
  // bound to it); a client that speaks no TLS or whose certificate is refused is closed.
  std::shared_ptr<const auth::TlsContext> tls;
};

class TCPStoreServer {
 public:
  // Binds, listens and starts the loop thread.
  static absl::StatusOr<std::unique_ptr<TCPStoreServer>> Start(TCPStoreServerOptions options);
  // Stops the loop and closes every connection.
  ~TCPStoreServer();

  int port() const { return port_; }
  // Clients connected now that completed the handshake.
  int connected_clients() const { return connected_.load(); }
  // "N connection(s) refused, the last from ADDR: why"; "" while none was (thread-safe).
  std::string RefusalReport() const;

 private:
  struct Connection;
  struct Waiter;

  TCPStoreServer(TCPStoreServerOptions options, ScopedFd listener, int port,
                 std::unique_ptr<EventPoller> poller);
  void Loop();
  // Takes a connection the listener accepted.
  void Adopt(uint64_t id, std::unique_ptr<auth::ServerConnection> stream);
  void OnReadable(uint64_t id);
  void OnWritable(uint64_t id);
  // Advances a connection's TLS handshake; false if it was closed.
  bool AdvanceTls(Connection& connection);
  // Handles every complete frame buffered on the connection. False if it was closed.
  bool ProcessInput(Connection& connection);
  // Executes one request; an error status means a protocol violation (close the connection).
  absl::Status HandleRequest(Connection& connection, absl::string_view payload);
  // A request that may wait (get, wait, multi_get, wait-for-clients): answered now if it
  // can be, else parked on the connection until it can or its timeout (read from `in`) passes.
  absl::Status Park(Connection& connection, tcp_store::Opcode op, std::vector<std::string> keys,
                    int64_t client_count, tcp_store::Decoder& in);
  // The reply to a request answered at once.
  absl::StatusOr<std::string> Answer(tcp_store::Opcode op, tcp_store::Decoder& in);
  void Reply(Connection& connection, const std::string& frame);
  void ReplyError(Connection& connection, const absl::Status& status);
  void CloseConnection(uint64_t id, absl::string_view reason, bool rejected);
  // Answers the waiters whose condition now holds or whose deadline has passed.
  void ServeWaiters();
  bool WaiterReady(const Waiter& waiter) const;
  void AnswerWaiter(Connection& connection, const Waiter& waiter);
  // Sends a heartbeat to each client whose parked request has been quiet for its period.
  void BeatToWaiters();
  // When the loop must wake at the latest (a waiter's deadline or heartbeat, the listener's).
  absl::Time NextDeadline() const;
  std::string JoinedDetail() const;

  const TCPStoreServerOptions options_;
  const int port_;
  const std::unique_ptr<EventPoller> poller_;
  std::atomic<bool> stopping_{false};
  std::atomic<int> connected_{0};
  RefusalLog refusal_log_{"TCPStore server"};  // Failed handshakes and authentications.
  mutable Mutex refusals_mu_;
  std::string last_refusal_ ABSL_GUARDED_BY(refusals_mu_);
  uint64_t refused_count_ ABSL_GUARDED_BY(refusals_mu_) = 0;

  // Loop-thread state only.
  KeyValueTable table_;
  absl::flat_hash_map<uint64_t, std::unique_ptr<Connection>> connections_;
  // Accepts, admits, sheds; connections count as strangers until their handshake.
  std::unique_ptr<auth::ServerListener> listener_;

  std::thread thread_;
};

}  // namespace plexus

#endif  // PLEXUS_BASE_STORE_TCP_STORE_SERVER_H_
