// Backend: the interface every collective backend implements (tcp, gloo, mpi, nccl, or one
// registered from outside this repository). Every collective of c10d is a pure virtual method:
// there is no default that throws "not supported"; what a backend can do is stated up front by
// capabilities(), and the ProcessGroup checks it before dispatching.
//
// Contract for implementations:
//  - Arguments arrive validated by the ProcessGroup (validate.h): contiguous tensors on a device
//    the backend serves, sizes consistent, (op, dtype) valid, roots and peers in range.
//  - Every method returns at once with a Work; calls on one backend execute in issue order and
//    are matched across ranks by that order.
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

  // Root's tensor is copied into every rank's tensor.
  virtual WorkPtr Broadcast(const Tensor& tensor, const BroadcastOptions& options) = 0;
  // The reduction of all ranks' tensors lands in the root's tensor.
  virtual WorkPtr Reduce(const Tensor& tensor, const ReduceOptions& options) = 0;
  // In place: every rank's tensor becomes the reduction of all.
  virtual WorkPtr AllReduce(const Tensor& tensor, const AllReduceOptions& options) = 0;
  // As AllReduce for each tensor, fused into one operation.
  virtual WorkPtr AllReduceCoalesced(absl::Span<const Tensor> tensors,
                                     const AllReduceCoalescedOptions& options) = 0;
  // outputs[r] receives rank r's input (outputs.size() == group size).
  virtual WorkPtr AllGather(absl::Span<const Tensor> outputs, const Tensor& input,
                            const AllGatherOptions& options) = 0;
  // `output` (size x input elements) receives every rank's input in rank order.
  virtual WorkPtr AllGatherIntoTensor(const Tensor& output, const Tensor& input,
                                      const AllGatherOptions& options) = 0;
  // At the root, outputs[r] receives rank r's input; elsewhere `outputs` is empty.
  virtual WorkPtr Gather(absl::Span<const Tensor> outputs, const Tensor& input,
                         const GatherOptions& options) = 0;
  // Rank r's output receives the root's inputs[r]; `inputs` is empty off the root.
  virtual WorkPtr Scatter(const Tensor& output, absl::Span<const Tensor> inputs,
                          const ScatterOptions& options) = 0;
  // Rank r's output is the reduction over ranks of their inputs[r].
  virtual WorkPtr ReduceScatter(const Tensor& output, absl::Span<const Tensor> inputs,
                                const ReduceScatterOptions& options) = 0;
  // As ReduceScatter with the inputs concatenated in one tensor of size x output elements.
  virtual WorkPtr ReduceScatterTensor(const Tensor& output, const Tensor& input,
                                      const ReduceScatterOptions& options) = 0;
  // outputs[r] receives rank r's inputs[this rank]; tensors may differ in size per peer.
  virtual WorkPtr AllToAll(absl::Span<const Tensor> outputs, absl::Span<const Tensor> inputs,
                           const AllToAllOptions& options) = 0;
  // The split sizes count first-dimension rows per peer; both are always explicit here (the
  // ProcessGroup fills in equal splits when the caller gave none).
  virtual WorkPtr AllToAllSingle(const Tensor& output, const Tensor& input,
                                 absl::Span<const int64_t> output_split_sizes,
                                 absl::Span<const int64_t> input_split_sizes,
                                 const AllToAllOptions& options) = 0;
  virtual WorkPtr Barrier(const BarrierOptions& options) = 0;
  virtual WorkPtr Send(const Tensor& tensor, int dst_rank, const SendOptions& options) = 0;
  virtual WorkPtr Recv(const Tensor& tensor, int src_rank, const RecvOptions& options) = 0;
  // Only called when capabilities().recv_any_source; the Work names the sender.
  virtual WorkPtr RecvAnySource(const Tensor& tensor, const RecvOptions& options) = 0;
  // Starts every op of the batch; one Work for all of them (the first error). This default
  // issues them one by one in order, which is right for backends whose receives do not hold up
  // later calls; nccl launches them as one group.
  virtual WorkPtr BatchPointToPoint(absl::Span<const PointToPointOp> ops,
                                    const BatchOptions& options);
};

}  // namespace plexus

#endif  // PLEXUS_BACKENDS_INTERFACE_BACKEND_H_
