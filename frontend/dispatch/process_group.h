// ProcessGroup: the user-facing handle on a group of ranks. It validates every call, picks the
// backend serving the tensors' device (per the backend string) and hands the call over. All
// collectives return a Work, or an error before anything is sent when the input is bad.
//
// Built by InitProcessGroup (init.h) for the world and by NewGroup for subgroups. Every rank
// of the parent must call NewGroup with the same ranks in the same order, as in
// torch.distributed. Thread-safe.
#ifndef PLEXUS_FRONTEND_DISPATCH_PROCESS_GROUP_H_
#define PLEXUS_FRONTEND_DISPATCH_PROCESS_GROUP_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "backends/interface/backend.h"
#include "backends/interface/backend_registry.h"
#include "base/core/mutex.h"
#include "frontend/dispatch/backend_string.h"
#include "frontend/dispatch/collective_check.h"
#include "frontend/dispatch/flight_recorder.h"
#include "frontend/dispatch/validate.h"

namespace plexus {

class ProcessGroup {
 public:
  struct Config {
    std::string name;  // "world", or "world.1" for its first subgroup.
    int rank = 0;
    int size = 1;
    std::vector<int> global_ranks;  // Group rank -> world rank.
    std::shared_ptr<Store> store;   // Namespace private to this group.
    std::string backend;            // Backend string.
    absl::Duration timeout = kDefaultGroupTimeout;
    // Where backends listen and what they advertise (InitProcessGroup resolves it from the
    // rendezvous host); "" resolves it in Create, collectively, with the store's host unknown.
    // See advertise_address.h.
    std::string address;
    // Shared secret for backend connections (unset: from the environment); see init.h.
    std::optional<std::string> secret;
  };

  // Parses the backend string and creates one backend instance per distinct backend name,
  // each in its own store namespace. Collective: every rank of the group calls it.
  static absl::StatusOr<std::shared_ptr<ProcessGroup>> Create(
      Config config, const BackendRegistry& registry = BackendRegistry::Global());

  const std::string& name() const { return config_.name; }
  int rank() const { return config_.rank; }
  int size() const { return config_.size; }
  const std::vector<int>& global_ranks() const { return config_.global_ranks; }
  absl::Duration timeout() const { return config_.timeout; }
  const std::shared_ptr<Store>& store() const { return config_.store; }
  // The address this rank's backends listen on.
  const std::string& address() const { return config_.address; }
  // Canonical "device:backend" list this group was built with.
  std::string backend_string() const { return BackendString(mapping_); }
  // The backend serving `device`; InvalidArgument naming the backend string when none does.
  absl::StatusOr<std::shared_ptr<Backend>> BackendFor(DeviceType device) const;
  // The last operations of this group (flight_recorder.h); null when turned off.
  const std::shared_ptr<FlightRecorder>& flight_recorder() const { return recorder_; }

  // A subgroup of `ranks` (ranks of this group; sorted and de-duplicated checks apply).
  // Returns nullptr on ranks outside the subgroup. `backend` defaults to this group's.
  absl::StatusOr<std::shared_ptr<ProcessGroup>> NewGroup(std::vector<int> ranks,
                                                         std::string backend = "");

  // A group of the same ranks over this group's CPU backend, named "<name>.<purpose>", for
  // work a caller runs beside this group's queue (the torch adapter's sparse all_reduce runs
  // there on its own thread). Its collectives are matched among themselves, never against this
  // group's. Collective: every rank calls it once per `purpose` (a word), from any thread.
  absl::StatusOr<std::shared_ptr<ProcessGroup>> Companion(absl::string_view purpose);

  // --- Lifecycle after a failure (process_group_lifecycle.cc). ---

  // Fails every pending operation of this group and every later one with Aborted carrying
  // `reason`, on this rank only, and makes its backends release their connections and vendor
  // communicators (ncclCommAbort, Gloo's pairs; MPI only marks its requests failed). Returns
  // at once; never ends the process; idempotent. Unimplemented lists backends that could not
  // abort (the group refuses new operations regardless).
  absl::Status Abort(absl::string_view reason);
  // OK until Abort; then the Aborted status every operation fails with.
  absl::Status aborted() const;

  // MPI_Comm_split: every rank of the group calls it; ranks passing the same `color` form a
  // new group, ordered by (`key`, rank in this group). `color` < 0 (kNoColor) joins none and
  // gets nullptr. Same backend string; a rank that never calls it fails everyone's call with
  // DeadlineExceeded naming it.
  static constexpr int kNoColor = -1;
  absl::StatusOr<std::shared_ptr<ProcessGroup>> Split(int color, int key);

  // The group of this group's ranks minus `excluded` (ranks of this group), renumbered densely
  // in rank order, with the same backend string, built over this group's store without a new
  // rendezvous; aborts this group first. Called by the survivors only: the first proposal
  // written to the store is the membership every survivor adopts, so ranks never end up in
  // different groups; a rank the agreed record excludes gets FailedPrecondition saying so.
  // Shrinking a world group (global ranks 0..size-1) makes a new world: its global ranks are
  // its own ranks.
  absl::StatusOr<std::shared_ptr<ProcessGroup>> Shrink(std::vector<int> excluded);
  // Shrink excluding the ranks found lost (LostRanks). A rank that found none waits for a
  // survivor that did to decide; DeadlineExceeded when nobody did within the group timeout.
  absl::StatusOr<std::shared_ptr<ProcessGroup>> ShrinkLost();
  // The ranks of this group its backends have found gone, in rank order.
  std::vector<int> LostRanks() const;
  // The first failure that broke this group (an operation failed on the transport, a rank was
  // lost, a deadline passed); OK while none has. Refused input does not break a group.
  absl::Status first_failure() const;
  // `callback` runs once with first_failure(), on the thread that completed the failed
  // operation (at once when the group broke already). It must not wait for this group.
  void OnFirstFailure(std::function<void(const absl::Status&)> callback);

  // Collective departure, as destroy_process_group: every rank calls it before exiting, and it
  // returns (within `timeout`) once every rank has called it - so no rank closes connections
  // a peer still reads from. Rank 0 returns last, so a store it hosts outlives every other
  // rank's last request. A group that is broken (aborted, a rank lost, an operation failed on
  // the transport) and whose backends leave nothing in flight after a failure
  // (BackendCapabilities::may_leave_after_failure: tcp, gloo) counts itself departed, best
  // effort, and returns without waiting for the others.
  absl::Status Shutdown(absl::Duration timeout);

  // --- Collectives and point-to-point, as torch.distributed's. ---
  //
  // Ordering: every rank of the group issues the same collectives in the same order (from any
  // number of threads, as long as that order is the same on every rank); a rank that issues a
  // different one, or other sizes or dtypes, fails the operation on every rank with
  // FailedPrecondition naming both sides instead of hanging or mixing data (backends that
  // cannot tell by themselves are checked first unless PLEXUS_CHECK_COLLECTIVES=0, see
  // collective_check.h).
  // Memory: a Tensor does not own its memory; it must stay valid and untouched by the caller
  // until the returned Work completes. The call returns at once (asynchronous); Work::Wait
  // blocks with a deadline (work.h).
  // Errors: bad arguments (rank out of range, sizes, dtype, device the backend does not
  // serve) come back from the call itself as InvalidArgument naming the op, this rank and the
  // values, before anything is sent. Failures while it runs complete the Work with:
  // DeadlineExceeded at options.timeout (the group's timeout when unset), Unavailable naming
  // a lost peer, FailedPrecondition for a mismatch, Aborted after Abort.
  // Any collective, given as a value (base/core/collective.h): validated by its kind's rule,
  // routed by its first tensor's device, recorded, and run by that device's backend. The named
  // calls below each build one.
  absl::StatusOr<WorkPtr> Run(Collective call);

  absl::StatusOr<WorkPtr> Broadcast(const Tensor& tensor, BroadcastOptions options = {});
  absl::StatusOr<WorkPtr> Reduce(const Tensor& tensor, ReduceOptions options = {});
  absl::StatusOr<WorkPtr> AllReduce(const Tensor& tensor, AllReduceOptions options = {});
  absl::StatusOr<WorkPtr> AllReduceCoalesced(absl::Span<const Tensor> tensors,
                                             AllReduceCoalescedOptions options = {});
  absl::StatusOr<WorkPtr> AllGather(absl::Span<const Tensor> outputs, const Tensor& input,
                                    AllGatherOptions options = {});
  absl::StatusOr<WorkPtr> AllGatherIntoTensor(const Tensor& output, const Tensor& input,
                                              AllGatherOptions options = {});
  absl::StatusOr<WorkPtr> Gather(absl::Span<const Tensor> outputs, const Tensor& input,
                                 GatherOptions options = {});
  absl::StatusOr<WorkPtr> Scatter(const Tensor& output, absl::Span<const Tensor> inputs,
                                  ScatterOptions options = {});
  absl::StatusOr<WorkPtr> ReduceScatter(const Tensor& output, absl::Span<const Tensor> inputs,
                                        ReduceScatterOptions options = {});
  absl::StatusOr<WorkPtr> ReduceScatterTensor(const Tensor& output, const Tensor& input,
                                              ReduceScatterOptions options = {});
  absl::StatusOr<WorkPtr> AllToAll(absl::Span<const Tensor> outputs,
                                   absl::Span<const Tensor> inputs, AllToAllOptions options = {});
  // Empty split lists mean equal splits of the first dimension.
  absl::StatusOr<WorkPtr> AllToAllSingle(const Tensor& output, const Tensor& input,
                                         std::vector<int64_t> output_split_sizes = {},
                                         std::vector<int64_t> input_split_sizes = {},
                                         AllToAllOptions options = {});
  // Runs on the cpu backend when there is one, otherwise on the first in the backend string.
  absl::StatusOr<WorkPtr> Barrier(BarrierOptions options = {});
  absl::StatusOr<WorkPtr> Send(const Tensor& tensor, int dst_rank, SendOptions options = {});
  absl::StatusOr<WorkPtr> Recv(const Tensor& tensor, int src_rank, RecvOptions options = {});
  absl::StatusOr<WorkPtr> RecvAnySource(const Tensor& tensor, RecvOptions options = {});
  // batch_isend_irecv: every op started together, one Work for all (peers are group ranks).
  // All tensors must be on one device type; the backend may launch them as one group (nccl).
  absl::StatusOr<WorkPtr> BatchPointToPoint(std::vector<PointToPointOp> ops,
                                            BatchOptions options = {});

 private:
  // A backend instance serving one device, with its capabilities.
  struct Served {
    DeviceType device;
    std::shared_ptr<Backend> backend;
    BackendCapabilities capabilities;
  };

  ProcessGroup(Config config, const BackendRegistry& registry, std::vector<DeviceBackend> mapping,
               std::vector<Served> backends);

  absl::StatusOr<const Served*> FindServed(DeviceType device) const;
  // The backend for `tensor`'s device, after checking it accepts the dtype (and, for a
  // reduction, can apply `reduction` to it).
  absl::StatusOr<const Served*> Route(absl::string_view op, const Tensor& tensor,
                                      const ReduceOp* reduction = nullptr) const;
  GroupPosition position() const { return {config_.rank, config_.size}; }
  // Runs the pre-launch agreement check when `served` needs one (collective_check.h).
  absl::Status CheckAgreement(const Served& served, const CollectiveDescription& description);
  // Checks agreement, then issues the collective through Track. `blocking` is the call's
  // options' flag, which `call` passes on: it is cleared unless `served` runs blocking
  // collectives in place, and Track then waits for the Work instead.
  absl::StatusOr<WorkPtr> Launch(const Served& served, const CollectiveDescription& description,
                                 absl::Duration timeout, bool& blocking,
                                 absl::FunctionRef<absl::StatusOr<WorkPtr>()> call);
  // Issues `call`, recording it in the flight recorder until its Work completes; with
  // `blocking`, returns once it has (within the operation's timeout).
  absl::StatusOr<WorkPtr> Track(const FlightRecorder::Operation& operation, bool point_to_point,
                                bool blocking, absl::FunctionRef<absl::StatusOr<WorkPtr>()> call);

  const Config config_;
  const BackendRegistry& registry_;  // Subgroups resolve their backends here too.
  const std::vector<DeviceBackend> mapping_;
  const std::vector<Served> backends_;
  const std::shared_ptr<FlightRecorder> recorder_;  // Null when PLEXUS_FLIGHT_RECORDER=0.
  // Told of every operation's end: notes transport failures, then tells the recorder.
  class Outcomes;
  const std::shared_ptr<Outcomes> outcomes_;
  std::unique_ptr<CollectiveCheck> check_;  // Null when no backend needs one.
  std::atomic<int64_t> next_subgroup_id_{1};
  std::atomic<int64_t> next_shrink_{1};
  mutable Mutex abort_mu_;
  absl::Status aborted_ ABSL_GUARDED_BY(abort_mu_);
  std::atomic<bool> is_aborted_{false};  // aborted_ is set (checked before every operation).

  // The group is broken (aborted, a rank lost, an operation failed on the transport) and every
  // backend of it may leave after a failure without waiting for its peers.
  bool MayLeaveAlone() const;
  static std::string ShrinkKey(int64_t generation);
  // Unimplemented when a backend of this group cannot survive a lost rank (mpi).
  absl::Status CheckCanShrink() const;
  // Builds the group a shrink record ("=1,3": ranks excluded) describes.
  absl::StatusOr<std::shared_ptr<ProcessGroup>> AdoptShrink(int64_t generation,
                                                            absl::string_view decided);
  // A child group of this one: `members` (ranks here, in the new group's order) under `name`,
  // its store under `store_prefix`, with `backend` ("": this group's); nullptr when this rank
  // is not a member. Collective over the members. `new_world`: the child replaces a world
  // group, and its global ranks are its own ranks.
  absl::StatusOr<std::shared_ptr<ProcessGroup>> Child(const std::string& name,
                                                      const std::string& store_prefix,
                                                      const std::vector<int>& members,
                                                      const char* barrier, std::string backend = "",
                                                      bool new_world = false);
};

}  // namespace plexus

#endif  // PLEXUS_FRONTEND_DISPATCH_PROCESS_GROUP_H_
