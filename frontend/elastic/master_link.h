// MasterLink: a peer's connection to the elastic master. A background thread reads the
// master's messages (topology pushes, operation outcomes, replies), answers nothing itself, and
// keeps the heartbeat both ways: it beats while idle and declares the master lost when it stays
// silent for the heartbeat timeout the master announced. Thread-safe.
#ifndef PLEXUS_FRONTEND_ELASTIC_MASTER_LINK_H_
#define PLEXUS_FRONTEND_ELASTIC_MASTER_LINK_H_

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/auth/tls.h"
#include "base/core/mutex.h"
#include "base/net/socket_util.h"
#include "frontend/elastic/master_protocol.h"

namespace plexus::elastic {

class MasterLink {
 public:
  struct Callbacks {
    std::function<void(const Topology&)> on_topology;
    std::function<void(const OpKey&, const absl::Status&)> on_outcome;
    std::function<void(const OpKey&, int64_t)> on_turn;  // kOpTurn: an operation's turn.
    std::function<void(const absl::Status&)> on_lost;    // Once, when the link breaks.
  };

  // Connects, says hello for `group` and reads the welcome, all by `deadline`; then starts the
  // reader thread. Unavailable (with Result kMasterConnectionFailed) when the master cannot be
  // reached or answers wrongly.
  // `secret`: proven to the master first (base/auth); empty: none. `tls`: the connection
  // is encrypted (base/auth/tls.h); null: none.
  static absl::StatusOr<std::unique_ptr<MasterLink>> Connect(
      const std::string& host, int port, int64_t group, absl::Time deadline, Callbacks callbacks,
      const std::string& secret = "", const std::shared_ptr<const auth::TlsContext>& tls = nullptr);
  // Closes the connection (without a goodbye) and joins the reader.
  ~MasterLink();

  int64_t peer_id() const { return peer_id_; }
  int store_port() const { return store_port_; }
  absl::Duration heartbeat_timeout() const { return heartbeat_timeout_; }

  // Sends one message; fails once the link is lost.
  absl::Status Send(const Message& message);
  // Sends a request (kUpdateTopology, kArePeersPending) and waits for its reply's value.
  absl::StatusOr<int64_t> Request(MessageType type, absl::Time deadline);
  // Sends a request of `type` (its id goes before `arguments`) and returns the reply's ints
  // after the status code (value first), or the error the master replied.
  absl::StatusOr<std::vector<int64_t>> Call(MessageType type, std::vector<int64_t> arguments,
                                            std::string text, absl::Time deadline);
  // Says goodbye; the master drops this peer as "left". The link is closed afterwards.
  void Leave();
  // The reason the link broke; OK while it is up.
  absl::Status lost() const;

 private:
  MasterLink(Connection connection, int64_t peer_id, int store_port,
             absl::Duration heartbeat_timeout, Callbacks callbacks);
  void ReadLoop();
  // Reads what the socket (or TLS) holds and handles each whole frame; the bytes read (0: none
  // yet), or why the link is lost. `more`: the read filled the buffer, so more may wait.
  absl::StatusOr<size_t> ReadFrames(std::string& rx, bool& more);
  void Lose(const absl::Status& status);
  void OnMessage(const Message& message);

  ScopedFd fd_;
  // TLS: held by the reader while it reads and by senders while they write (never while
  // waiting), as one TLS session may serve one thread at a time.
  std::unique_ptr<StreamCipher> cipher_;
  Mutex cipher_mu_;
  const int64_t peer_id_;
  const int store_port_;
  const absl::Duration heartbeat_timeout_;
  const Callbacks callbacks_;
  std::atomic<bool> stopping_{false};

  Mutex send_mu_;
  absl::Time last_sent_ ABSL_GUARDED_BY(send_mu_);

  mutable Mutex mu_;
  std::condition_variable replied_;
  absl::Status lost_ ABSL_GUARDED_BY(mu_);
  int64_t next_request_ ABSL_GUARDED_BY(mu_) = 1;
  struct Reply {
    bool done = false;
    absl::Status status;
    std::vector<int64_t> values;
  };
  std::map<int64_t, Reply> replies_ ABSL_GUARDED_BY(mu_);

  std::thread reader_;
};

}  // namespace plexus::elastic

#endif  // PLEXUS_FRONTEND_ELASTIC_MASTER_LINK_H_
