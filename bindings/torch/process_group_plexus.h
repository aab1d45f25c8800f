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
#include <memory>
#include <string>
#include <vector>

#include "base/core/mutex.h"
#include "bindings/torch/plexus_work.h"
#include "bindings/torch/sparse_all_reduce.h"
#include "bindings/torch/torch_types.h"
#include "frontend/dispatch/process_group.h"

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
  // Wraps an existing plexus group (from Shrink or Split).
  explicit ProcessGroupPlexus(std::shared_ptr<plexus::ProcessGroup> group);
  ~ProcessGroupPlexus() override;

  const std::shared_ptr<plexus::ProcessGroup>& plexus_group() const { return group_; }
  // ProcessGroup::Abort, and the sparse all_reduces beside it.
  absl::Status Abort(absl::string_view reason);

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
  // The one element of `items` (a tensor, or a tensor list); throws InvalidArgument naming
  // `op` and `what` otherwise.
  template <typename T>
  const T& Single(const std::vector<T>& items, const char* op, const char* what) const;

  const Origin origin_;                          // Opens every error message.
  std::shared_ptr<plexus::ProcessGroup> group_;  // Reset only by the destructor.
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
