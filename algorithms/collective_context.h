// CollectiveContext: what every algorithm runs with - the transport, the operation's identity
// (sequence number and signature), its deadline, and the Work that accumulates its byte counts.
// Algorithms are blocking functions run by a backend's worker thread; they post transport
// operations, wait on them against the one deadline, and return the first failure.
#ifndef PLEXUS_ALGORITHMS_COLLECTIVE_CONTEXT_H_
#define PLEXUS_ALGORITHMS_COLLECTIVE_CONTEXT_H_

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "base/core/collective.h"
#include "base/core/dtype.h"
#include "base/core/tensor.h"
#include "base/transport/transport.h"
#include "base/work/work.h"

namespace plexus::algorithms {

// The kinds and their names are base/core/collective.h's; their numbers go into signatures.
using ::plexus::CollectiveKind;
using ::plexus::CollectiveName;

// Packs (collective, dtype, low 16 bits of the sequence, low 32 bits of the element count)
// into a signature; never 0. DescribeSignature prints one for error messages.
uint64_t MakeSignature(CollectiveKind kind, DType dtype, uint64_t sequence, uint64_t count);
std::string DescribeSignature(uint64_t signature);
// Whether two signatures carry the same sequence number (the same slot in issue order).
inline bool SameSequence(uint64_t a, uint64_t b) {
  return ((a >> 32) & 0xffff) == ((b >> 32) & 0xffff);
}

// Scratch memory reused across the collectives of one backend (they run one at a time), so a
// steady stream of operations allocates - and page-faults - nothing after the first.
class ScratchArena {
 public:
  enum Slot { kReduceIn = 0, kAccumulator = 1, kPacked = 2, kSlots = 3 };
  // At least `bytes` of uninitialised memory for `slot`, valid until the next call for it.
  uint8_t* Get(Slot slot, size_t bytes);

 private:
  std::unique_ptr<uint8_t[]> buffers_[kSlots];
  size_t sizes_[kSlots] = {};
};

class CollectiveContext {
 public:
  // The deadline is `timeout` after `start` (now, unless the caller has just read the clock).
  CollectiveContext(Transport& transport, CollectiveKind kind, uint64_t sequence,
                    uint64_t signature, absl::Duration timeout, Work* work,
                    ScratchArena* arena = nullptr, absl::Time start = absl::InfinitePast());

  // Scratch for this operation (from the backend's arena, or owned by the context).
  uint8_t* Scratch(ScratchArena::Slot slot, size_t bytes) { return arena_->Get(slot, bytes); }

  int rank() const { return transport_.rank(); }
  int size() const { return transport_.size(); }
  // Memory every rank maps, when the whole group shares this host (see shared_arena.h), for
  // owners that run one collective at a time over the transport (Collectives does; the
  // elastic communicator, which runs several at once, does not): null unless given.
  SharedArena* shared_arena() const { return shared_arena_; }
  void UseSharedArena(SharedArena* arena) { shared_arena_ = arena; }
  Transport* transport() const { return &transport_; }
  // Every rank's host, when the transport knows (see Transport::host_of).
  absl::Span<const int> host_of() const { return transport_.host_of(); }

  // The same operation (sequence, signature, deadline, stats, scratch) over `other`, e.g. a
  // SubgroupTransport for one phase of a hierarchical collective.
  CollectiveContext Over(Transport& other) const {
    return CollectiveContext(other, kind_, sequence_, signature_,
                             std::max(deadline_ - absl::Now(), absl::ZeroDuration()), work_,
                             arena_);
  }
  CollectiveKind kind() const { return kind_; }
  uint64_t sequence() const { return sequence_; }
  uint64_t signature() const { return signature_; }

  // Post a send/receive for step `step` of this operation.
  WorkPtr Send(int peer, uint32_t step, const void* data, size_t bytes);
  WorkPtr Recv(int peer, uint32_t step, void* data, size_t bytes);

  // Waits for `work` until the operation's deadline; adds its bytes to the operation's stats.
  absl::Status Wait(const WorkPtr& work);
  // Waits for all, returning the first failure (and still waiting for the rest).
  absl::Status WaitAll(const std::vector<WorkPtr>& works);

  absl::Time deadline() const { return deadline_; }

  // Adds to the operation's byte counts what a library-run collective reports as its traffic.
  void CountBytes(int64_t sent, int64_t received) {
    if (work_ == nullptr) return;
    work_->AddBytesSent(sent);
    work_->AddBytesReceived(received);
  }

  // Ends the operation on every rank with `status` (idempotent); returns `status`.
  absl::Status Fail(absl::Status status);

  // Where an in-place all-reduce keeps its buffer's input before overwriting it, for a caller
  // that puts it back on failure (keep_originals.h); `already_kept` bytes of it hold it already.
  void KeepOriginals(uint8_t* originals, size_t already_kept) {
    originals_ = originals;
    originals_kept_ = already_kept;
  }
  uint8_t* originals() const { return originals_; }
  // How much of the buffer's input the originals hold, from its start; beyond that the buffer
  // itself still holds it.
  size_t originals_kept() const { return originals_kept_; }
  void OriginalsKeptUpTo(size_t end) { originals_kept_ = std::max(originals_kept_, end); }

 private:
  Transport& transport_;
  const CollectiveKind kind_;
  const uint64_t sequence_;
  const uint64_t signature_;
  const absl::Time deadline_;
  Work* const work_;
  ScratchArena own_arena_;
  ScratchArena* const arena_;
  SharedArena* shared_arena_ = nullptr;
  uint8_t* originals_ = nullptr;
  size_t originals_kept_ = 0;
  bool failed_ = false;
};

// The counts of `parts` near-equal pieces of `count` elements (the first count % parts get
// one more), and their element offsets.
struct Partition {
  std::vector<int64_t> counts;
  std::vector<int64_t> offsets;
};
Partition BalancedPartition(int64_t count, int parts);

// Tensors laid end to end in one buffer: for collectives over a list of tensors that a
// schedule or a library wants contiguous.
int64_t TotalBytes(absl::Span<const Tensor> tensors);
void PackTensors(absl::Span<const Tensor> tensors, uint8_t* packed);
void UnpackTensors(const uint8_t* packed, absl::Span<const Tensor> tensors);

}  // namespace plexus::algorithms

#endif  // PLEXUS_ALGORITHMS_COLLECTIVE_CONTEXT_H_
