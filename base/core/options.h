// One plain options struct per collective, Gloo-style. Every struct carries a timeout; the
// default (kDefaultTimeout) means "the process group's timeout", which itself defaults to
// 30 minutes as in torch.distributed. Nothing waits without a deadline.
//
// Every collective's struct also carries `blocking` (MPI's and torch's async_op=False
// semantics): the call returns once the operation has finished on this rank, with a complete
// Work. A backend that can then run it in the calling thread does so without the Work and the
// issue-order queue when nothing is queued before it (the tcp backend's collectives, and those
// gloo and mpi run through plexus's algorithms): about 40% less per-call work for a small
// collective. The Work such a call returns carries the outcome but no statistics. On CUDA
// tensors it waits on the host, as Work::Wait does.
#ifndef PLEXUS_BASE_CORE_OPTIONS_H_
#define PLEXUS_BASE_CORE_OPTIONS_H_

#include <cstdint>
#include <vector>

#include "absl/time/time.h"
#include "base/core/reduce_op.h"

namespace plexus {

// Sentinel: use the process group's timeout.
inline constexpr absl::Duration kDefaultTimeout = absl::ZeroDuration();
// The process group timeout when none is given (torch.distributed's default).
inline constexpr absl::Duration kDefaultGroupTimeout = absl::Minutes(30);

// Returns `requested` unless it is the sentinel, in which case `group_default`.
inline absl::Duration ResolveTimeout(absl::Duration requested, absl::Duration group_default) {
  return requested == kDefaultTimeout ? group_default : requested;
}

struct BroadcastOptions {
  int root_rank = 0;  // Rank within the group whose tensor is sent to all.
  absl::Duration timeout = kDefaultTimeout;
  bool blocking = false;  // Return once finished (see above).
};

struct ReduceOptions {
  ReduceOp op = ReduceOpKind::kSum;
  int root_rank = 0;  // Only this rank's tensor receives the result.
  absl::Duration timeout = kDefaultTimeout;
  bool blocking = false;  // Return once finished (see above).
};

struct AllReduceOptions {
  ReduceOp op = ReduceOpKind::kSum;
  absl::Duration timeout = kDefaultTimeout;
  bool blocking = false;  // Return once finished (see above).
};

// Several tensors reduced as one fused operation; all must share dtype and device.
struct AllReduceCoalescedOptions {
  ReduceOp op = ReduceOpKind::kSum;
  absl::Duration timeout = kDefaultTimeout;
  bool blocking = false;  // Return once finished (see above).
};

struct AllGatherOptions {
  absl::Duration timeout = kDefaultTimeout;
  bool blocking = false;  // Return once finished (see above).
};

struct GatherOptions {
  int root_rank = 0;  // Only this rank passes (and fills) output tensors.
  absl::Duration timeout = kDefaultTimeout;
  bool blocking = false;  // Return once finished (see above).
};

struct ScatterOptions {
  int root_rank = 0;  // Only this rank passes input tensors.
  absl::Duration timeout = kDefaultTimeout;
  bool blocking = false;  // Return once finished (see above).
};

struct ReduceScatterOptions {
  ReduceOp op = ReduceOpKind::kSum;
  absl::Duration timeout = kDefaultTimeout;
  bool blocking = false;  // Return once finished (see above).
};

struct AllToAllOptions {
  absl::Duration timeout = kDefaultTimeout;
  bool blocking = false;  // Return once finished (see above).
};

struct BarrierOptions {
  absl::Duration timeout = kDefaultTimeout;
  bool blocking = false;  // Return once finished (see above).
};

// Point-to-point. Messages between one pair of ranks with the same tag arrive in send order.
struct SendOptions {
  int tag = 0;
  absl::Duration timeout = kDefaultTimeout;
};

struct RecvOptions {
  int tag = 0;
  absl::Duration timeout = kDefaultTimeout;
};

// A batch of sends and receives started together (batch_isend_irecv). Backends whose receives
// hold up what is issued after them (nccl) launch the batch as one group, so two ranks that
// exchange with each other do not deadlock.
struct BatchOptions {
  absl::Duration timeout = kDefaultTimeout;
};

}  // namespace plexus

#endif  // PLEXUS_BASE_CORE_OPTIONS_H_
