// Backend: the interface every collective backend implements (tcp, gloo, mpi, nccl, or one
// registered from outside this repository). Every call arrives as one value, a Collective
// (base/core/collective.h), through Run: a backend switches on its kind, runs what it does
// natively, and passes the rest on (CollectivesBackend: to the shared algorithm library). What
// a backend can do is stated up front by capabilities(), and the ProcessGroup checks it before
// dispatching; a kind a backend does not run is an Unimplemented Work naming both.
//
// Contract for implementations:
//  - Arguments arrive validated by the ProcessGroup (validate.h): contiguous tensors on a device
//    the backend serves, sizes consistent, (op, dtype) valid, roots and peers in range.
//  - Run returns at once with a Work; collectives on one backend execute in issue order and
//    are matched across ranks by that order (point-to-point calls by peer and tag).
//  - Timeouts in the options are already resolved (never kDefaultTimeout).
//  - Thread-safe: methods may be called from any thread.
#ifndef PLEXUS_BACKENDS_INTERFACE_BACKEND_H_
#define PLEXUS_BACKENDS_INTERFACE_BACKEND_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "base/core/collective.h"
#include "base/core/device.h"
#include "base/core/dtype.h"
#include "base/core/options.h"
#include "base/core/reduce_op.h"
#include "base/core/tensor.h"
#include "base/store/store.h"
#include "base/work/work.h"

namespace plexus {

// What a backend can do, asked once when a process group is built.
struct BackendCapabilities {
  std::vector<DeviceType> devices;  // Device types whose tensors it accepts.
  std::vector<DType> dtypes;        // Element types it moves and reduces.
  bool recv_any_source = false;     // RecvAnySource is supported.
  bool survives_peer_loss = false;  // Losing a peer fails pending work; the backend stays usable.
  // The backend notices ranks that disagree about a collective (op, dtype, count) and fails it
  // with FailedPrecondition. When false the ProcessGroup checks first (collective_check.h).
  bool detects_mismatch = true;
  // (op, dtype) pairs that are valid (ValidateReduceOp) but this backend cannot reduce, e.g.
  // bitwise ops on NCCL. The ProcessGroup rejects them up front with InvalidArgument.
  struct Reduction {
    ReduceOpKind op;
    DType dtype;
  };
  std::vector<Reduction> unsupported_reductions;
  // A collective whose options say `blocking` may run in the calling thread (it returns a
  // complete Work). When false the ProcessGroup clears the flag and waits on the Work itself.
  bool runs_blocking_in_place = false;
  // A failed operation leaves nothing behind that a peer could still complete against this
  // rank (it was withdrawn, or the connections were closed), so a rank whose group failed may
  // exit without waiting for its peers: Shutdown (destroy_process_group) then skips its
  // departure barrier. False where posted requests outlive a failure (MPI) or kernels may
  // still run (NCCL).
  bool may_leave_after_failure = false;
};

// Everything a backend factory needs to join its group.
struct BackendContext {
  std::shared_ptr<Store> store;   // Private namespace for this backend instance.
  int rank = 0;                   // Rank within the group.
  int size = 1;                   // Ranks in the group.
  std::vector<int> global_ranks;  // Group rank -> rank in the world.
  std::string group_name;
  std::vector<DeviceType> devices;  // The devices this instance will be asked to serve.
  // The address to listen on and advertise to peers, chosen by the dispatcher for the world
  // group (advertise_address.h) and inherited by subgroups. Never empty.
  std::string address;
  absl::Duration timeout = kDefaultGroupTimeout;
  // Shared secret for the connections the backend makes itself (unset: PLEXUS_SECRET /
  // PLEXUS_SECRET_FILE; empty: none). Backends over a vendor's transport cannot apply it.
  std::optional<std::string> secret;
};

// One send or receive of a batch.
struct PointToPointOp {
  enum class Kind { kSend, kRecv };
  Kind kind = Kind::kSend;
  Tensor tensor;
  int peer = 0;  // Rank within the group.
  int tag = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual std::string name() const = 0;
  virtual BackendCapabilities capabilities() const = 0;

  // Fails every pending and future operation with `reason` and releases what the backend can
  // (connections, vendor communicators) without waiting on peers; never ends the process.
  // Thread-safe; idempotent. Unimplemented where the backend cannot abort (the process group
  // still refuses new operations then).
  virtual absl::Status Abort(const absl::Status& reason) {
    return absl::UnimplementedError(
        absl::StrCat("backend ", name(), " cannot abort: ", reason.message()));
  }
  // Connects now what the backend would otherwise connect on first use on `device` (NCCL's
  // communicator); collective over the group. A rank that never arrives is a DeadlineExceeded
  // naming it. Backends that connect when created return OK.
  virtual absl::Status ConnectEagerly(const Device& /*device*/) { return absl::OkStatus(); }
  // Ranks of the group this backend has found gone (crashed, silent, reset), in rank order;
  // empty when it cannot tell.
  virtual std::vector<int> LostRanks() { return {}; }

  // Runs `call` (its semantics per kind: options.h and docs/python.md). The spans in `call` are
  // valid only during this call: copy what is kept.
  virtual WorkPtr Run(const Collective& call) = 0;
  // Starts every op of the batch; one Work for all of them (the first error). This default
  // issues them one by one in order, which is right for backends whose receives do not hold up
  // later calls; nccl launches them as one group.
  virtual WorkPtr BatchPointToPoint(absl::Span<const PointToPointOp> ops,
                                    const BatchOptions& options);
};

// The one error for a call a backend does not run: Unimplemented, "backend 'B' does not run
// CALL", then `why` when given. Native plans answer it for what their library lacks (gloo and
// mpi then run the call on algorithms/; nccl fails it).
absl::Status NotRunError(absl::string_view backend, const Collective& call,
                         absl::string_view why = "");

}  // namespace plexus

#endif  // PLEXUS_BACKENDS_INTERFACE_BACKEND_H_
