// Shared state of the elastic communicator: named tensors every peer of a group should hold
// identically (model weights, optimizer state), with a revision the application advances.
//
// sync_shared_state is a vote run by the master: each peer reports its revision, its strategy and
// a content hash of every tensor; PlanSync picks the state the group keeps and who sends which
// tensor to whom; the peers then move exactly those tensors over their data connections. Rules:
//  - Authorities: the SEND_ONLY peers if there are any, else the ENFORCE_POPULAR ones. RECEIVE_ONLY
//    peers never vote (a joiner's zeros must not win). No authority at all is an error.
//  - While an authority holds the group's state (finished a sync of the group before), only such
//    authorities vote: newcomers cannot outvote the group's progress, however many join at once.
//  - The target revision is the most common revision among the authorities (ties: the higher).
//  - Per tensor, the popular content is the most common hash among the authorities at the
//    target revision (ties: the smaller hash, so every master picks the same).
//  - A peer receives a tensor when its hash differs from the popular one and it is outdated
//    (another revision), RECEIVE_ONLY, or the tensor does not allow content inequality. A
//    SEND_ONLY peer that would have to receive fails the vote instead (its state is not the
//    popular one). Afterwards every peer holds the target revision.
// Every peer must list the same tensors (name, count, dtype) in the same order.
#ifndef PLEXUS_FRONTEND_ELASTIC_SHARED_STATE_H_
#define PLEXUS_FRONTEND_ELASTIC_SHARED_STATE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "base/core/dtype.h"

namespace plexus::elastic {

enum class SyncStrategy : int { kEnforcePopular = 0, kReceiveOnly = 1, kSendOnly = 2 };

// One tensor of the shared state, by reference: the buffer stays the caller's.
struct TensorInfo {
  std::string name;
  void* data = nullptr;
  int64_t count = 0;
  DType dtype = DType::kFloat32;
  bool allow_content_inequality = false;
};

struct SharedState {
  uint64_t revision = 0;
  std::vector<TensorInfo> tensors;
};

struct SyncInfo {
  int64_t tx_bytes = 0;
  int64_t rx_bytes = 0;
};

// Bounded so a ballot and a transfer plan fit one master frame.
inline constexpr size_t kMaxSharedTensors = 16384;

// OK when `state` can be synchronised: 1..kMaxSharedTensors tensors with distinct, non-empty
// names without NUL bytes, non-null buffers, counts >= 0.
absl::Status ValidateSharedState(const SharedState& state);

// A 64-bit hash of the bytes, the same on every little-endian machine and process (unlike
// absl::Hash, which is seeded per process). Not cryptographic: it detects divergence, not forgery.
uint64_t ContentHash(const void* data, size_t bytes);

// One peer's ballot, as the master receives it.
struct SyncBallot {
  struct Tensor {
    std::string name;
    int64_t count = 0;
    int64_t dtype = 0;
    uint64_t hash = 0;
    bool allow_content_inequality = false;
  };
  int64_t peer = 0;
  std::string description;  // For errors: "peer 3 (10.0.0.2, group 0)".
  uint64_t revision = 0;
  SyncStrategy strategy = SyncStrategy::kEnforcePopular;
  // It finished a sync of this group before: it holds the group's state, so peers that never
  // did (newcomers, however many) defer to it instead of outvoting the group's progress.
  bool holds_group_state = false;
  std::vector<Tensor> tensors;
};

struct SyncPlan {
  uint64_t revision = 0;
  std::vector<uint64_t> popular_hash;  // Per tensor.
  // source[t][b]: the peer that sends tensor t to the peer of ballot b, or -1.
  std::vector<std::vector<int64_t>> source;
};

// The master's decision over every member's ballot (at least one); FailedPrecondition naming the
// peers and tensor when the ballots cannot be reconciled.
absl::StatusOr<SyncPlan> PlanSync(const std::vector<SyncBallot>& ballots);

}  // namespace plexus::elastic

#endif  // PLEXUS_FRONTEND_ELASTIC_SHARED_STATE_H_
