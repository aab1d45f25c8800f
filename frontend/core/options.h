// One plain options struct per collective, Gloo-style. Every struct carries a timeout; the
// default (kDefaultTimeout) means "the process group's timeout", which itself defaults to
// 30 minutes as in torch.distributed. Nothing waits without a deadline.
#ifndef PLEXUS_FRONTEND_CORE_OPTIONS_H_
#define PLEXUS_FRONTEND_CORE_OPTIONS_H_

#include <cstdint>
#include <vector>

#include "absl/time/time.h"
#include "frontend/core/reduce_op.h"

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
};

struct ReduceOptions {
  ReduceOp op = ReduceOpKind::kSum;
  int root_rank = 0;  // Only this rank's tensor receives the result.
  absl::Duration timeout = kDefaultTimeout;
};

struct AllReduceOptions {
  ReduceOp op = ReduceOpKind::kSum;
  absl::Duration timeout = kDefaultTimeout;
};

// Several tensors reduced as one fused operation; all must share dtype and device.
struct AllReduceCoalescedOptions {
  ReduceOp op = ReduceOpKind::kSum;
  absl::Duration timeout = kDefaultTimeout;
};

struct AllGatherOptions {
  absl::Duration timeout = kDefaultTimeout;
};

struct GatherOptions {
  int root_rank = 0;  // Only this rank passes (and fills) output tensors.
  absl::Duration timeout = kDefaultTimeout;
};

struct ScatterOptions {
  int root_rank = 0;  // Only this rank passes input tensors.
  absl::Duration timeout = kDefaultTimeout;
};

struct ReduceScatterOptions {
  ReduceOp op = ReduceOpKind::kSum;
  absl::Duration timeout = kDefaultTimeout;
};

struct AllToAllOptions {
  absl::Duration timeout = kDefaultTimeout;
};

struct BarrierOptions {
  absl::Duration timeout = kDefaultTimeout;
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

#endif  // PLEXUS_FRONTEND_CORE_OPTIONS_H_
