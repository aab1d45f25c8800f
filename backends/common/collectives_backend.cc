#include "backends/common/collectives_backend.h"

namespace plexus {

BackendCapabilities CollectivesBackend::CpuTransportCapabilities() {
  BackendCapabilities caps;
  caps.devices = {DeviceType::kCpu};
  caps.dtypes.assign(std::begin(kAllDTypes), std::end(kAllDTypes));
  caps.recv_any_source = true;
  caps.survives_peer_loss = false;
  caps.runs_blocking_in_place = true;  // Collectives runs them in the caller when it is idle.
  return caps;
}

WorkPtr CollectivesBackend::Broadcast(const Tensor& tensor, const BroadcastOptions& options) {
  return collectives_->Broadcast(tensor, options);
}
WorkPtr CollectivesBackend::Reduce(const Tensor& tensor, const ReduceOptions& options) {
  return collectives_->Reduce(tensor, options);
}
WorkPtr CollectivesBackend::AllReduce(const Tensor& tensor, const AllReduceOptions& options) {
  return collectives_->AllReduce(tensor, options);
}
WorkPtr CollectivesBackend::AllReduceCoalesced(absl::Span<const Tensor> tensors,
                                               const AllReduceCoalescedOptions& options) {
  return collectives_->AllReduceCoalesced(tensors, options);
}
WorkPtr CollectivesBackend::AllGather(absl::Span<const Tensor> outputs, const Tensor& input,
                                      const AllGatherOptions& options) {
  return collectives_->AllGather(outputs, input, options);
}
WorkPtr CollectivesBackend::AllGatherIntoTensor(const Tensor& output, const Tensor& input,
                                                const AllGatherOptions& options) {
  return collectives_->AllGatherIntoTensor(output, input, options);
}
WorkPtr CollectivesBackend::Gather(absl::Span<const Tensor> outputs, const Tensor& input,
                                   const GatherOptions& options) {
  return collectives_->Gather(outputs, input, options);
}
WorkPtr CollectivesBackend::Scatter(const Tensor& output, absl::Span<const Tensor> inputs,
                                    const ScatterOptions& options) {
  return collectives_->Scatter(output, inputs, options);
}
WorkPtr CollectivesBackend::ReduceScatter(const Tensor& output, absl::Span<const Tensor> inputs,
                                          const ReduceScatterOptions& options) {
  return collectives_->ReduceScatter(output, inputs, options);
}
WorkPtr CollectivesBackend::ReduceScatterTensor(const Tensor& output, const Tensor& input,
                                                const ReduceScatterOptions& options) {
  return collectives_->ReduceScatterTensor(output, input, options);
}
WorkPtr CollectivesBackend::AllToAll(absl::Span<const Tensor> outputs,
                                     absl::Span<const Tensor> inputs,
                                     const AllToAllOptions& options) {
  return collectives_->AllToAll(outputs, inputs, options);
}
WorkPtr CollectivesBackend::AllToAllSingle(const Tensor& output, const Tensor& input,
                                           absl::Span<const int64_t> output_split_sizes,
                                           absl::Span<const int64_t> input_split_sizes,
                                           const AllToAllOptions& options) {
  return collectives_->AllToAllSingle(output, input, output_split_sizes, input_split_sizes,
                                      options);
}
WorkPtr CollectivesBackend::Barrier(const BarrierOptions& options) {
  return collectives_->Barrier(options);
}
WorkPtr CollectivesBackend::Send(const Tensor& tensor, int dst_rank, const SendOptions& options) {
  return collectives_->Send(tensor, dst_rank, options);
}
WorkPtr CollectivesBackend::Recv(const Tensor& tensor, int src_rank, const RecvOptions& options) {
  return collectives_->Recv(tensor, src_rank, options);
}
WorkPtr CollectivesBackend::RecvAnySource(const Tensor& tensor, const RecvOptions& options) {
  return collectives_->RecvAnySource(tensor, options);
}

}  // namespace plexus
