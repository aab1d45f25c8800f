// Matching receives with arriving messages for the tcp loop, with no sockets involved: a
// receive posted before its message waits (per peer and tag, or per tag when from any peer);
// a message that arrives before its receive is staged, in arrival order, in a recycled buffer,
// within a cap on bytes nobody has asked for. The loop feeds it; tests drive it directly.
#ifndef PLEXUS_BACKENDS_TCP_RECEIVE_MATCHER_H_
#define PLEXUS_BACKENDS_TCP_RECEIVE_MATCHER_H_

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "backends/tcp/tcp_frame.h"

namespace plexus::tcp {

// A message that arrived (or is arriving) before a receive asked for it.
struct StagedMessage {
  int peer = -1;
  uint64_t tag = 0;
  uint64_t signature = 0;
  std::unique_ptr<uint8_t[]> bytes;  // From the staging pool; uninitialised.
  uint64_t size = 0;
  uint64_t capacity = 0;
  bool complete = false;
  OpPtr waiter;  // A receive posted while the bytes were still arriving.
};
using StagedPtr = std::shared_ptr<StagedMessage>;

// Staging buffers are recycled: fresh allocations cost zeroing and page faults. A buffer serves
// a message that fills at least about half of it; at most 64 MiB are kept (buffers under 4 KiB
// are not), the smallest dropped first.
class StagingPool {
 public:
  void Take(StagedMessage& message, uint64_t size);
  void Return(StagedMessage& message);
  uint64_t pooled_bytes() const { return pooled_bytes_; }

 private:
  std::multimap<uint64_t, std::unique_ptr<uint8_t[]>> buffers_;  // Capacity -> buffer.
  uint64_t pooled_bytes_ = 0;
};

class ReceiveMatcher {
 public:
  explicit ReceiveMatcher(uint64_t max_unexpected_bytes)
      : max_unexpected_bytes_(max_unexpected_bytes) {}

  // A receive whose message has not arrived: it waits for one from op.peer (any peer for
  // kRecvAny), behind the receives already waiting for the same.
  void Wait(const OpPtr& op);
  // The oldest waiting receive that is not done for a message from `peer` with `tag`, removed:
  // one from that peer first, else one from any peer (its peer then set).
  OpPtr TakeWaiting(int peer, uint64_t tag);

  // The first staged message `op` may take, in arrival order, skipping those another receive
  // already waits on; null if none.
  StagedPtr FindStaged(const Op& op) const;
  // Stages a message nobody waits for; ResourceExhausted, naming the bytes, past the cap.
  absl::StatusOr<StagedPtr> Stage(int peer, uint64_t tag, uint64_t signature, uint64_t size);
  // A receive claimed `message`: it leaves the staged set and its bytes the count. Hand its
  // buffer back with Recycle once copied.
  void Unstage(const StagedPtr& message);
  void Recycle(StagedMessage& message) { pool_.Return(message); }
  // A staged message of `operation` whose signature is set and differs from `signature`.
  const StagedMessage* Disagreeing(uint64_t operation, uint64_t signature) const;

  // Forgets everything of `operation`; returns the receives that waited for it.
  std::vector<OpPtr> DropOperation(uint64_t operation);
  // Returns and forgets the receives waiting for `peer` (with `any_too`, also those from any).
  std::vector<OpPtr> DropWaitingFor(int peer, bool any_too);
  // Forgets everything; returns every receive that waited.
  std::vector<OpPtr> DropAll();

  uint64_t staged_bytes() const { return staged_bytes_; }
  const StagingPool& pool() const { return pool_; }

 private:
  const uint64_t max_unexpected_bytes_;
  std::map<std::pair<int, uint64_t>, std::deque<OpPtr>> waiting_;  // (peer, tag) -> receives.
  std::map<uint64_t, std::deque<OpPtr>> waiting_any_;              // tag -> receives.
  std::map<std::pair<int, uint64_t>, std::deque<StagedPtr>> staged_;
  uint64_t staged_bytes_ = 0;  // Counted from a message's first byte, complete or not.
  StagingPool pool_;
};

}  // namespace plexus::tcp

#endif  // PLEXUS_BACKENDS_TCP_RECEIVE_MATCHER_H_
