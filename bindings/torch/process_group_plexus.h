// ProcessGroupPlexus: a torch c10d backend in C++ (the route of the c10d extension RFC,
// pytorch/pytorch#39662) whose every collective runs on a plexus::ProcessGroup.
//
// torch's calls reach it without Python: torch.distributed's functions and DDP call these
// virtual methods, which validate, hand the tensors' memory to plexus (no copies) and return a
// PlexusWork. Tensor lists hold one tensor per process, as on Gloo's CPU path. Errors: bad
// arguments throw from the call (a RuntimeError naming the op, this rank and the values);
// failures while running throw from wait() and from synchronous calls, and fail the future.
// Thread-safe, as the plexus group is.
#ifndef PLEXUS_BINDINGS_TORCH_PROCESS_GROUP_PLEXUS_H_
#define PLEXUS_BINDINGS_TORCH_PROCESS_GROUP_PLEXUS_H_

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/core/mutex.h"
#include "bindings/torch/completion_hooks.h"
#include "bindings/torch/plexus_work.h"
#include "bindings/torch/sparse_all_reduce.h"
#include "bindings/torch/torch_types.h"
#include "frontend/dispatch/process_group.h"
#include "frontend/dispatch/reconfigure.h"

namespace plexus::torch_backend {

inline constexpr char kBackendName[] = "plexus";

class ProcessGroupPlexus : public TorchGroupBase {
 public:
  // Forms a plexus group over torch's `store` (the creator's PrefixStore), as every rank of
  // the group does; `backend` is a plexus backend string ("cpu:tcp,cuda:nccl"). `name` tells
  // the group apart in flight-recorder dumps and timeout messages ("torch:1").
  static c10::intrusive_ptr<ProcessGroupPlexus> Create(const c10::intrusive_ptr<c10d::Store>& store,
                                                       int rank, int size,
                                                       std::chrono::milliseconds timeout,
                                                       const std::string& backend,
                                                       const std::string& name);
  // torch's reconfigure regime (enable_reconfigure): no group until reconfigure() names its
  // members by their handles; every later reconfigure replaces it (reconfigure.h). Operations
  // before the first one, or after a failure broke the group, throw until the next one.
  static c10::intrusive_ptr<ProcessGroupPlexus> CreateReconfigurable(
      const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
      std::chrono::milliseconds timeout, const std::string& backend, const std::string& name);
  // Wraps an existing plexus group (from Shrink or Split).
  explicit ProcessGroupPlexus(std::shared_ptr<plexus::ProcessGroup> group);
  // The reconfigure regime's group before its first reconfigure (CreateReconfigurable).
  ProcessGroupPlexus(int rank, int size, const std::string& name,
                     std::unique_ptr<Reconfigurer> reconfigurer);
  ~ProcessGroupPlexus() override;

  // The plexus group; throws FailedPrecondition in the reconfigure regime before the first
  // reconfigure. Not to be called beside reconfigure().
  const std::shared_ptr<plexus::ProcessGroup>& plexus_group() const;
  // ProcessGroup::Abort, and the sparse all_reduces beside it. In the reconfigure regime a
  // revoke: operations fail until the next reconfigure, and getError() stays SUCCESS.
  absl::Status Abort(absl::string_view reason);

#ifdef C10D_BACKEND_HAS_RECONFIGURE
  // torch's fault-tolerance contract (c10d Backend.hpp; docs/fault_tolerance.md). reconfigure
  // runs synchronously and returns a completed Work; it must not run beside other operations
  // of this group (as gloo's). Throws with the reason: a bad or foreign handle, a uuid
  // already used, members that never came within the timeout.
  bool supportsReconfigure() const override { return reconfigurer_ != nullptr; }
  c10d::ReconfigureHandle get_reconfigure_handle() const override;
  c10::intrusive_ptr<c10d::Work> reconfigure(const c10d::ReconfigureOptions& opts) override;
  // The first failure's kind: TIMEOUT (a deadline), REMOTE_ERROR (a peer lost or frozen),
  // COMM_ERROR (anything else on the transport); SUCCESS after abort() until a failure.
  c10d::ErrorType getError() override;
  void abort() override;
  // The timeout of later operations that set none (the group's own at creation).
  void setTimeout(std::chrono::milliseconds timeout) override;
#endif
#if PLEXUS_TORCH_SHRINK
  // torch.distributed.shrink_group: the survivors' group without `ranks_to_exclude`, formed
  // over this group's store with no new rendezvous (ProcessGroup::Shrink, which every survivor
  // agrees on through the store). The parent is aborted first under both flags: with
  // SHRINK_DEFAULT as with SHRINK_ABORT its pending operations fail with Aborted (torch
  // destroys it next). `opts_override`'s timeout, when set, is the new group's. Not for the
  // reconfigure regime (reconfigure forms its groups) nor groups with the mpi backend.
  bool supportsShrinking() const override;
  c10::intrusive_ptr<c10d::Backend> shrink(
      const std::vector<int64_t>& ranks_to_exclude, int shrink_flags,
      const c10::intrusive_ptr<Options>& opts_override) override;
#endif
#ifdef C10D_BACKEND_HAS_HOOKS
  // Run once per group, when a failure first breaks it (not on abort()), on the thread that
  // saw the failure; a hook must not wait for this group.
  void registerAbortHook(int64_t hook_id, c10d::AbortHook hook) override;
  void unregisterAbortHook(int64_t hook_id) override;
#endif

  const std::string getBackendName() const override { return kBackendName; }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  // Sparse COO tensors: SUM only, CPU only, on a thread of their own (sparse_all_reduce.h).
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  // outputs[rank][i] receives rank's inputs[i], as torch lays it out.
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override;
#if PLEXUS_TORCH_BACKEND_API
  // torch 2.x's grouped forms: pair i as its own collective, in order.
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::ReduceScatterOptions& opts) override;
#endif
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_split_sizes,
                                               std::vector<int64_t>& input_split_sizes,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst_rank,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src_rank,
                                      int tag) override;
  // The Work's sourceRank() is the sender.
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;
  // Gloo's semantics and messages over the group's store (so it works when the data path is
  // stuck): rank 0 waits up to opts.timeout (the group's when unset) for every other rank and
  // throws naming the first missing one ("Rank 2 failed to pass monitoredBarrier in 100 ms"),
  // or all of them with `wait_all_ranks`; the others wait for rank 0's release as long.
  void monitoredBarrier(const c10d::BarrierOptions& opts, bool wait_all_ranks) override;
  // Collectives issued on this group, the same on every rank that issued the same ones.
  void setSequenceNumberForGroup() override;
  uint64_t getSequenceNumberForGroup() override;
#if PLEXUS_TORCH_BACKEND_API
  // torch's coalescing regions (_coalescing_manager(group, device), batch_isend_irecv,
  // _abort_process_group): between startCoalescing and endCoalescing every operation of this
  // group is issued as it comes and also gathered, and endCoalescing's one Work (op COALESCED)
  // completes when they all have, with the first error. The all_reduces, all_gather_into_tensor
  // and reduce_scatter_tensor calls of a _coalescing_manager region reach allreduce_coalesced
  // and the *_coalesced calls instead (torch gathers those itself): one plexus collective for
  // all the all_reduces. Nested regions are refused, as an end without a start.
#if PLEXUS_TORCH_SUPPORTS_COALESCING
  bool supportsCoalescing() const override { return true; }
#endif
  void startCoalescing() override;
  c10::intrusive_ptr<c10d::Work> endCoalescing() override;
  // torch's WorkInfo for every operation that ends, successfully or not (op type, sequence
  // number, issued and ended times, active duration: the two apart, there being no device
  // timing on CPU), on a thread of the group's own (completion_hooks.h). One hook per group.
  void registerOnCompletionHook(
      std::function<void(std::shared_ptr<c10d::WorkInfo>)>&& hook) override;
  // Until every operation issued so far has ended and its hook returned, within the group's
  // timeout (then throws saying how many are left). torch's destroy_process_group calls it
  // for a group with hooks.
  void waitForPendingWorks() override;
#endif

 private:
  // Queued on sparse_ (sparse_all_reduce.h); returns at once.
  c10::intrusive_ptr<c10d::Work> SparseAllReduce(std::vector<at::Tensor>& tensors,
                                                 const c10d::AllreduceOptions& opts);
  // Issues `issue` (plexus's call) and wraps its Work; throws when the call itself fails.
  template <typename Issue>
  c10::intrusive_ptr<c10d::Work> Run(c10d::OpType type, const char* title,
                                     std::vector<at::Tensor> outputs,
                                     std::vector<at::Tensor> inputs,
                                     std::chrono::milliseconds timeout, Issue&& issue);
  // Runs `call` on the group, its timeout torch's `timeout`: what every override that is one
  // plexus collective does.
  c10::intrusive_ptr<c10d::Work> RunCollective(c10d::OpType type, const char* title,
                                               std::vector<at::Tensor> outputs,
                                               std::vector<at::Tensor> inputs,
                                               std::chrono::milliseconds timeout, Collective call);
  // Runs `calls` in order as one torch operation `op` (one Work: the first error), each with
  // torch's `timeout`: the coalesced overrides.
  c10::intrusive_ptr<c10d::Work> RunCollectives(c10d::OpType type, const char* title,
                                                std::vector<at::Tensor> outputs,
                                                std::vector<at::Tensor> inputs,
                                                std::chrono::milliseconds timeout,
                                                std::vector<Collective> calls, const char* op);
  // The one element of `items` (a tensor, or a tensor list); throws InvalidArgument naming
  // `op` and `what` otherwise.
  template <typename T>
  const T& Single(const std::vector<T>& items, const char* op, const char* what) const;

  // Throws when there is no group to run on (see CreateReconfigurable).
  void CheckRunnable() const;
  // Tells the hooks of `group`'s first failure.
  void WatchFailures(plexus::ProcessGroup& group);
  absl::Duration DefaultTimeout() const;

  // The group, its origin and torch's rank_/size_ change only in reconfigure(), which the
  // caller does not run beside this group's operations (torch's contract, as gloo's).
  Origin origin_;                                // Opens every error message.
  std::shared_ptr<plexus::ProcessGroup> group_;  // Null in the reconfigure regime until formed.
  const std::unique_ptr<Reconfigurer> reconfigurer_;  // The reconfigure regime; else null.
  std::atomic<int64_t> timeout_ms_{0};                // setTimeout(); 0: the group's own.
  // The abort hooks, and whether abort() was called since the group formed (a failure it
  // causes is not one to report). Shared with the groups' failure callbacks, which may outlive
  // this object.
  class AbortHooks {
   public:
    void Set(int64_t id, std::function<void()> hook) {
      MutexLock lock(mu_);
      hooks_[id] = std::move(hook);
    }
    void Remove(int64_t id) {
      MutexLock lock(mu_);
      hooks_.erase(id);
    }
    void Fire() {
      if (user_aborted.load(std::memory_order_acquire)) return;
      std::map<int64_t, std::function<void()>> hooks;
      {
        MutexLock lock(mu_);
        hooks = hooks_;
      }
      for (auto& [id, hook] : hooks) hook();
    }

    std::atomic<bool> user_aborted{false};  // abort() since the group was formed.

   private:
    Mutex mu_;
    std::map<int64_t, std::function<void()>> hooks_ ABSL_GUARDED_BY(mu_);
  };
  const std::shared_ptr<AbortHooks> hooks_;
  const std::shared_ptr<CompletionHooks> completions_;  // Shared with the Works it counts.
  Mutex coalescing_mu_;
  bool coalescing_ ABSL_GUARDED_BY(coalescing_mu_) = false;         // Inside a coalescing region.
  std::vector<WorkPtr> coalesced_ ABSL_GUARDED_BY(coalescing_mu_);  // Issued inside it.
  Mutex sparse_mu_;
  std::unique_ptr<SparseAllReducer> sparse_ ABSL_GUARDED_BY(sparse_mu_);  // At the first use.
  std::atomic<uint64_t> sequence_{0};
  std::atomic<int64_t> monitored_rounds_{0};
};

#if PLEXUS_TORCH_BACKEND_API
// torch 2.x's group for the "plexus" backend: torch's own ProcessGroup, with `backend` serving
// CPU and CUDA, under plexus's name. The group torch makes for a registered backend calls
// itself "custom" (getBackendName), and DDP logs that; the creator returns this one instead.
class NamedProcessGroup : public compat::SequenceNumberForwarding<c10d::ProcessGroup> {
 public:
  NamedProcessGroup(const c10::intrusive_ptr<c10d::Store>& store,
                    const c10::intrusive_ptr<ProcessGroupPlexus>& backend);

  const std::string getBackendName() const override { return kBackendName; }
  // torch's ProcessGroup (up to 2.6) asks only gloo, NCCL and UCC backends for this.
  uint64_t getSequenceNumberForGroup() override;
};
#endif

}  // namespace plexus::torch_backend

#endif  // PLEXUS_BINDINGS_TORCH_PROCESS_GROUP_PLEXUS_H_
