// MasterNode: the elastic communicator's coordinator (PCCL's master). It never carries tensor
// bytes: it admits peers, keeps each peer group's ring and epoch, decides update-topology rounds
// and every operation's outcome (master_state.h), and hosts the store peers use to find each
// other's data ports. One thread serves every peer connection; a peer whose connection closes,
// or which stays silent past the heartbeat timeout (frozen, unplugged), is dropped at once and
// the survivors are told.
#ifndef PLEXUS_FRONTEND_ELASTIC_MASTER_NODE_H_
#define PLEXUS_FRONTEND_ELASTIC_MASTER_NODE_H_

#include <atomic>
#include <condition_variable>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/auth/tls.h"
#include "base/core/mutex.h"
#include "base/net/socket_util.h"
#include "base/store/tcp_store_server.h"

namespace plexus::elastic {

struct MasterNodeOptions {
  // "host:port" ("[v6]:port" for IPv6); "0.0.0.0" listens on every IPv4 interface, port 0 picks
  // a free port (see MasterNode::port()). PCCL's default port is 48148.
  std::string listen_address = "0.0.0.0:48148";
  // A peer silent this long is dropped; peers learn the value and beat 5 times per period.
  absl::Duration heartbeat_timeout = absl::Seconds(5);
  // Shared secret every peer proves before its hello, and its store connections too
  // (base/auth); unset: PLEXUS_SECRET / PLEXUS_SECRET_FILE; empty: none.
  std::optional<std::string> secret;
  // TLS for every peer and store connection (base/auth/tls.h); unset: PLEXUS_TLS_CERT /
  // PLEXUS_TLS_KEY / PLEXUS_TLS_CA; disabled: none.
  std::optional<auth::TlsFiles> tls;
};

class MasterNode {
 public:
  // Binds the listening sockets (the master's and its store's); serves nothing before Run().
  static absl::StatusOr<std::unique_ptr<MasterNode>> Create(MasterNodeOptions options);
  // Interrupts and joins the loop; connected peers see the master go away.
  ~MasterNode();

  // Starts serving on a background thread and returns. FailedPrecondition if already started.
  absl::Status Run();
  // Stops serving (idempotent, any thread, also from a signal-safe context via the eventfd).
  void Interrupt();
  // Waits until the loop has stopped after Interrupt(), or `timeout`: DeadlineExceeded then.
  absl::Status AwaitTermination(absl::Duration timeout = absl::InfiniteDuration());

  int port() const { return port_; }
  const std::string& host() const { return host_; }

 private:
  class Server;

  MasterNode(std::string host, int port, std::unique_ptr<Server> server);

  const std::string host_;
  const int port_;
  std::unique_ptr<Server> server_;
  std::thread thread_;  // Started once under mu_ (Run), joined by the destructor.
  Mutex mu_;
  std::condition_variable stopped_cv_;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace plexus::elastic

#endif  // PLEXUS_FRONTEND_ELASTIC_MASTER_NODE_H_
