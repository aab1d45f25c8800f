// CollectivesBackend: a Backend whose every collective and point-to-point call
// runs through algorithms/ (executor::Collectives) over one Transport. The tcp backend is
// exactly this; the gloo and mpi backends derive from it and override the calls
// their libraries do natively.
#ifndef PLEXUS_BACKENDS_COMMON_COLLECTIVES_BACKEND_H_
#define PLEXUS_BACKENDS_COMMON_COLLECTIVES_BACKEND_H_

#include <memory>
#include <string>
#include <vector>

#include "backends/common/split_bytes.h"
#include "backends/interface/backend.h"
#include "executor/collectives.h"

namespace plexus {

class CollectivesBackend : public Backend {
 public:
  WorkPtr Broadcast(const Tensor& tensor, const BroadcastOptions& options) override;
  WorkPtr Reduce(const Tensor& tensor, const ReduceOptions& options) override;
  WorkPtr AllReduce(const Tensor& tensor, const AllReduceOptions& options) override;
  WorkPtr AllReduceCoalesced(absl::Span<const Tensor> tensors,
                             const AllReduceCoalescedOptions& options) override;
  WorkPtr AllGather(absl::Span<const Tensor> outputs, const Tensor& input,
                    const AllGatherOptions& options) override;
  WorkPtr AllGatherIntoTensor(const Tensor& output, const Tensor& input,
                              const AllGatherOptions& options) override;
  WorkPtr Gather(absl::Span<const Tensor> outputs, const Tensor& input,
                 const GatherOptions& options) override;
  WorkPtr Scatter(const Tensor& output, absl::Span<const Tensor> inputs,
                  const ScatterOptions& options) override;
  WorkPtr ReduceScatter(const Tensor& output, absl::Span<const Tensor> inputs,
                        const ReduceScatterOptions& options) override;
  WorkPtr ReduceScatterTensor(const Tensor& output, const Tensor& input,
                              const ReduceScatterOptions& options) override;
  WorkPtr AllToAll(absl::Span<const Tensor> outputs, absl::Span<const Tensor> inputs,
                   const AllToAllOptions& options) override;
  WorkPtr AllToAllSingle(const Tensor& output, const Tensor& input,
                         absl::Span<const int64_t> output_split_sizes,
                         absl::Span<const int64_t> input_split_sizes,
                         const AllToAllOptions& options) override;
  WorkPtr Barrier(const BarrierOptions& options) override;
  WorkPtr Send(const Tensor& tensor, int dst_rank, const SendOptions& options) override;
  WorkPtr Recv(const Tensor& tensor, int src_rank, const RecvOptions& options) override;
  WorkPtr RecvAnySource(const Tensor& tensor, const RecvOptions& options) override;
  // Breaks the transport: whatever runs or waits fails with `reason`.
  absl::Status Abort(const absl::Status& reason) override {
    collectives_->Abort(reason);
    return absl::OkStatus();
  }
  std::vector<int> LostRanks() override { return collectives_->LostPeers(); }

 protected:
  // Every dtype on cpu, receive-from-any-source, no survival of a lost peer: what a backend
  // that runs algorithms/ over a host transport serves.
  static BackendCapabilities CpuTransportCapabilities();

  explicit CollectivesBackend(std::unique_ptr<executor::Collectives> collectives)
      : collectives_(std::move(collectives)) {}

  executor::Collectives& collectives() { return *collectives_; }
  int rank() const { return collectives_->rank(); }
  int size() const { return collectives_->size(); }

 private:
  const std::unique_ptr<executor::Collectives> collectives_;
};

}  // namespace plexus

#endif  // PLEXUS_BACKENDS_COMMON_COLLECTIVES_BACKEND_H_
