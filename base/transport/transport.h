// Transport: tagged, asynchronous point-to-point byte movement between the ranks of a group.
//
// The algorithms library is written against this interface only; each backend supplies an
// implementation (TCP sockets, Gloo unbound buffers, MPI point-to-point). Contract:
//  - Send/Recv return at once with a Work that completes when the bytes have left the buffer
//    (send) or arrived in it (recv). Buffers must stay valid until then.
//  - Messages from one sender to one receiver with the same tag are matched in send order.
//    A receive's size must equal the matched message's size, and its signature (when both are
//    non-zero) the message's; otherwise the receive fails with FailedPrecondition naming both,
//    and no byte outside the buffer is written.
//  - A lost peer fails every pending operation with Unavailable naming it (a group that lost a
//    member cannot finish a collective), and later operations fail the same way. A deadline
//    fails an operation with DeadlineExceeded. Abort() fails everything with its status.
//  - Thread-safe: any thread may call any method.
// tests/transport checks every implementation against this. tcp (and a subgroup of it) keeps
// all of it. Gloo and MPI carry no signature and do not refuse a size mismatch as above (Gloo
// ends the process on a message larger than its receive; MPI fails it as truncated); Gloo's
// AbortOperation breaks the whole transport, and MPI's fails this rank's requests only.
#ifndef PLEXUS_BASE_TRANSPORT_TRANSPORT_H_
#define PLEXUS_BASE_TRANSPORT_TRANSPORT_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "base/transport/shared_arena.h"
#include "base/work/work.h"

namespace plexus {

// A message's identity. The tag's high 40 bits name the operation (one collective, or one
// point-to-point tag), the low 24 bits a step within it. The signature describes what the
// sender is doing (MakeSignature in algorithms/collective_context.h); 0 disables the check.
struct MessageTag {
  uint64_t tag = 0;
  uint64_t signature = 0;
};

inline constexpr int kTagStepBits = 24;
inline constexpr uint64_t MakeTag(uint64_t operation, uint32_t step) {
  return (operation << kTagStepBits) | (step & ((1u << kTagStepBits) - 1));
}
inline constexpr uint64_t TagOperation(uint64_t tag) { return tag >> kTagStepBits; }

class Transport {
 public:
  virtual ~Transport() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;

  // Sends `data` to `peer`; the Work fails if not sent by `timeout`.
  virtual WorkPtr Send(int peer, MessageTag tag, absl::Span<const uint8_t> data,
                       absl::Duration timeout) = 0;

  // Receives the next message from `peer` with `tag.tag` into `data`.
  virtual WorkPtr Recv(int peer, MessageTag tag, absl::Span<uint8_t> data,
                       absl::Duration timeout) = 0;

  // Receives the next message with `tag.tag` from whichever peer sends first; the Work's
  // source_rank() names it once complete.
  virtual WorkPtr RecvFromAny(MessageTag tag, absl::Span<uint8_t> data, absl::Duration timeout) = 0;

  // Fails every pending and later send and receive of `operation` (TagOperation of its tags),
  // here and on every peer, with `reason`: one rank's failure ends the collective everywhere
  // instead of leaving the others to time out.
  virtual void AbortOperation(uint64_t operation, absl::Status reason) = 0;

  // Fails every pending and future operation with `reason`.
  virtual void Abort(absl::Status reason) = 0;

  // Peers this transport has found gone (crashed, silent past the heartbeat, connection
  // reset), in rank order; empty when it cannot tell (the default).
  virtual std::vector<int> LostPeers() { return {}; }

  // Memory every rank maps, when all of them share this host; null otherwise (the default).
  // Valid as long as the transport.
  virtual SharedArena* shared_arena() { return nullptr; }

  // The host of every rank, numbered 0, 1, ... in the order of each host's lowest rank, the
  // same on every rank; empty when the transport cannot tell (the default). For hierarchical
  // algorithms.
  virtual absl::Span<const int> host_of() const { return {}; }
};

// Whether the calling thread will itself wait on every send it issues before it moves on, as a
// collective's body does (algorithms end with a wait on their sends). A transport may then
// leave what a send could not hand to the kernel at once for that wait to move, instead of
// waking a thread of its own to do it (which the waiter would then have to take the work back
// from). Only a hint: a send left so must still move, later, if nobody waits.
bool SendsAwaitedByCaller();

// Marks the calling thread as SendsAwaitedByCaller() while in scope.
class ScopedSendsAwaited {
 public:
  ScopedSendsAwaited();
  ~ScopedSendsAwaited();
  ScopedSendsAwaited(const ScopedSendsAwaited&) = delete;
  ScopedSendsAwaited& operator=(const ScopedSendsAwaited&) = delete;

 private:
  const bool before_;
};

}  // namespace plexus

#endif  // PLEXUS_BASE_TRANSPORT_TRANSPORT_H_
