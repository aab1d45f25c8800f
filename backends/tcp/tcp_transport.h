// TcpTransport: the Transport of the in-house TCP backend. One socket per peer (full mesh,
// set up through the store), one event-loop thread (epoll) that owns every socket and all
// matching state; callers hand it commands through a queue. Large payloads are read straight
// into the receiver's buffer when the receive is already posted; a message that arrives first
// is staged (bounded by max_unexpected_bytes). A lost peer fails everything at once.
#ifndef PLEXUS_BACKENDS_TCP_TCP_TRANSPORT_H_
#define PLEXUS_BACKENDS_TCP_TCP_TRANSPORT_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "frontend/store/socket_util.h"
#include "frontend/store/store.h"
#include "frontend/transport/transport.h"

namespace plexus {
namespace tcp {
struct SendLane;
struct Op;
}  // namespace tcp

struct TcpTransportOptions {
  std::shared_ptr<Store> store;  // Where peers publish their addresses.
  int rank = 0;
  int size = 1;
  std::string group_name;        // Both ends of a connection must agree on it.
  // Address to listen on and publish; empty means $PLEXUS_TCP_ADDR, else this host's first
  // non-loopback IPv4 address, else 127.0.0.1.
  std::string address;
  absl::Duration connect_timeout = absl::Seconds(300);
  uint64_t max_message_bytes = uint64_t{1} << 36;    // Larger frames close the connection.
  uint64_t max_unexpected_bytes = uint64_t{4} << 30;  // Staged bytes before a peer is dropped.
  // Names a message signature in mismatch errors (the collective layer knows the encoding).
  std::function<std::string(uint64_t)> describe_signature;
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
  WorkPtr Recv(int peer, MessageTag tag, absl::Span<uint8_t> data,
               absl::Duration timeout) override;
  WorkPtr RecvFromAny(MessageTag tag, absl::Span<uint8_t> data, absl::Duration timeout) override;
  void AbortOperation(uint64_t operation, absl::Status reason) override;
  void Abort(absl::Status reason) override;


 private:
  class Loop;  // All socket and matching state; lives on the loop thread.

  TcpTransport(TcpTransportOptions options, std::vector<ScopedFd> peers);
  // Queues `command` for the loop thread and wakes it.
  void Post(std::function<void(Loop&)> command);
  // Registers a receive from the caller's thread (no loop wake-up unless its deadline is
  // earlier than the loop's next one): a message that already arrived is copied right here.
  void PostReceive(const std::shared_ptr<tcp::Op>& op);
  void Wake();
  void RunLoop();

  const TcpTransportOptions options_;
  std::vector<std::unique_ptr<tcp::SendLane>> lanes_;  // One per peer; see tcp_loop.h.
  // The loop's state is touched by its thread and, for receives, by callers; the lock is
  // recursive because completion callbacks run under it and may post again.
  std::recursive_mutex loop_mu_;
  std::unique_ptr<Loop> loop_;
  std::atomic<int64_t> next_wake_{0};  // Unix ns when the loop's epoll_wait returns at the latest.
  ScopedFd wakeup_;
  std::mutex inbox_mu_;
  std::vector<std::function<void(Loop&)>> inbox_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

// Resolves the address a rank listens on (see TcpTransportOptions::address).
std::string DefaultTcpAddress();

}  // namespace plexus

#endif  // PLEXUS_BACKENDS_TCP_TCP_TRANSPORT_H_
