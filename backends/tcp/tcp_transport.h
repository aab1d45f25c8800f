// TcpTransport: the Transport of the in-house TCP backend. One socket per peer (full mesh,
// set up through the store) and one epoll set over them. Whoever waits polls: a thread waiting
// on one of the transport's operations drives the sockets itself (one poller at a time, the
// others wait for it), so a message wakes the thread that needs it and nothing else; a
// background loop thread polls only while no caller has waited for a millisecond, to keep
// unattended operations, aborts and peer loss moving. Large payloads are read straight into
// the receiver's buffer when the receive is already posted; a message that arrives first is
// staged (bounded by max_unexpected_bytes). A lost peer fails everything at once. Peers on
// this host exchange the same frames through shared-memory rings (shm_link.h), and when the
// whole group shares the host the transport also offers a SharedArena.
#ifndef PLEXUS_BACKENDS_TCP_TCP_TRANSPORT_H_
#define PLEXUS_BACKENDS_TCP_TCP_TRANSPORT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "backends/tcp/shm_link.h"
#include "base/auth/tls.h"
#include "base/net/socket_util.h"
#include "base/store/store.h"
#include "base/transport/transport.h"

namespace plexus::tcp {

class Loop;
struct SendLane;
struct Op;

struct TcpTransportOptions {
  std::shared_ptr<Store> store;  // Where peers publish their addresses.
  int rank = 0;
  int size = 1;
  std::string group_name;  // Both ends of a connection must agree on it.
  // Address to listen on and publish to peers (required; the dispatcher resolves it, see
  // frontend/dispatch/advertise_address.h).
  std::string address;
  absl::Duration connect_timeout = absl::Seconds(300);
  uint64_t max_message_bytes = uint64_t{1} << 36;     // Larger frames close the connection.
  uint64_t max_unexpected_bytes = uint64_t{4} << 30;  // Staged bytes before a peer is dropped.
  // Names a message signature in mismatch errors (the collective layer knows the encoding).
  std::function<std::string(uint64_t)> describe_signature;
  // Polled while connecting: true gives up with Aborted. May be empty.
  std::function<bool()> cancelled;
  // Whether and how peers on this host exchange frames through shared-memory rings (see
  // shm_link.h); unset: from the environment (PLEXUS_TRANSPORT, PLEXUS_SHM_*, PLEXUS_HOST_ID).
  std::optional<ShmConfig> shared_memory_config;
  // Silence after which a peer counts as lost (base/core/heartbeat.h); unset: from
  // PLEXUS_HEARTBEAT (default 5 s); InfiniteDuration: never.
  std::optional<absl::Duration> heartbeat;
  // Shared secret every connection of the mesh proves both ways (base/auth); unset:
  // PLEXUS_SECRET / PLEXUS_SECRET_FILE; empty: none.
  std::optional<std::string> secret;
  // TLS on every connection of the mesh (base/auth/tls.h); peers on this host still use
  // shared memory unless it is turned off. Unset: PLEXUS_TLS_CERT / _KEY / _CA.
  std::optional<auth::TlsFiles> tls;
};

class TcpTransport : public Transport {
 public:
  // Listens, publishes the address, connects to every peer and starts the loop. Collective:
  // every rank of the group calls it.
  static absl::StatusOr<std::unique_ptr<TcpTransport>> Create(TcpTransportOptions options);
  ~TcpTransport() override;

  int rank() const override { return options_.rank; }
  int size() const override { return options_.size; }
  WorkPtr Send(int peer, MessageTag tag, absl::Span<const uint8_t> data,
               absl::Duration timeout) override;
  WorkPtr Recv(int peer, MessageTag tag, absl::Span<uint8_t> data, absl::Duration timeout) override;
  WorkPtr RecvFromAny(MessageTag tag, absl::Span<uint8_t> data, absl::Duration timeout) override;
  void AbortOperation(uint64_t operation, absl::Status reason) override;
  void Abort(absl::Status reason) override;
  std::vector<int> LostPeers() override;

  // How many peers this rank reaches through shared memory.
  int shared_memory_peers() const { return shm_peers_; }
  // Times the transport's loop thread woke to look whether callers still poll (for tests).
  uint64_t loop_thread_looks() const;
  SharedArena* shared_arena() override { return arena_; }
  absl::Span<const int> host_of() const override { return host_of_; }

 private:
  class Engine;  // Sockets, matching state and the polling role; shared with waiting threads.

  TcpTransport(TcpTransportOptions options, std::vector<Connection> peers,
               std::unique_ptr<ShmLinks> rings);
  // Lets a thread that waits on `op`'s Work poll the sockets until it completes.
  void AttachWaitHook(const std::shared_ptr<Op>& op);
  // Registers a receive from the caller's thread: a message that already arrived is copied
  // right here; the poller is woken only if this deadline is earlier than its next one.
  void PostReceive(const std::shared_ptr<Op>& op);
  // Runs `command` on the loop state now, on this thread, then wakes the poller.
  void RunOnLoopNow(const std::function<void(Loop&)>& command);

  const TcpTransportOptions options_;
  const int shm_peers_;
  SharedArena* arena_ = nullptr;  // Owned by the loop, which lives as long as this.
  const std::vector<int> host_of_;
  // Per rank: whether its frames come over its socket (not a shared-memory ring), which a
  // waiter may then read directly. Fixed once the rings are linked.
  const std::vector<bool> reads_socket_;
  std::vector<std::unique_ptr<SendLane>> lanes_;  // One per peer; see tcp_loop.h.
  std::shared_ptr<Engine> engine_;
  std::thread thread_;
};

}  // namespace plexus::tcp

#endif  // PLEXUS_BACKENDS_TCP_TCP_TRANSPORT_H_
