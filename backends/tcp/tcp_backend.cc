#include "backends/tcp/tcp_backend.h"

#include <utility>

#include "frontend/core/status_macros.h"
#include "frontend/dispatch/backend_registry.h"

namespace plexus {

absl::StatusOr<std::shared_ptr<Backend>> TcpBackend::Create(const BackendContext& context) {
  ASSIGN_OR_RETURN(AlgorithmTable table, AlgorithmTable::FromEnvironment());
  TcpTransportOptions options;
  options.store = context.store;
  options.rank = context.rank;
  options.size = context.size;
  options.group_name = context.group_name;
  options.connect_timeout = context.timeout;
  options.describe_signature = DescribeSignature;
  ASSIGN_OR_RETURN(std::unique_ptr<TcpTransport> transport, TcpTransport::Create(options));
  auto collectives = std::make_unique<Collectives>(
      std::shared_ptr<Transport>(std::move(transport)), std::move(table));
  return std::shared_ptr<Backend>(new TcpBackend(std::move(collectives)));
}

BackendCapabilities TcpBackend::capabilities() const {
  BackendCapabilities caps;
  caps.devices = {DeviceType::kCpu};
  caps.dtypes.assign(std::begin(kAllDTypes), std::end(kAllDTypes));
  caps.recv_any_source = true;
  caps.survives_peer_loss = false;
  return caps;
}

WorkPtr TcpBackend::Broadcast(const Tensor& tensor, const BroadcastOptions& options) {
  return collectives_->Broadcast(tensor, options);
}
WorkPtr TcpBackend::Reduce(const Tensor& tensor, const ReduceOptions& options) {
  return collectives_->Reduce(tensor, options);
}
WorkPtr TcpBackend::AllReduce(const Tensor& tensor, const AllReduceOptions& options) {
  return collectives_->AllReduce(tensor, options);
}
WorkPtr TcpBackend::AllReduceCoalesced(absl::Span<const Tensor> tensors,
                                       const AllReduceCoalescedOptions& options) {
  return collectives_->AllReduceCoalesced(tensors, options);
}
WorkPtr TcpBackend::AllGather(absl::Span<const Tensor> outputs, const Tensor& input,
                              const AllGatherOptions& options) {
  return collectives_->AllGather(outputs, input, options);
}
WorkPtr TcpBackend::AllGatherIntoTensor(const Tensor& output, const Tensor& input,
                                        const AllGatherOptions& options) {
  return collectives_->AllGatherIntoTensor(output, input, options);
}
WorkPtr TcpBackend::Gather(absl::Span<const Tensor> outputs, const Tensor& input,
                           const GatherOptions& options) {
  return collectives_->Gather(outputs, input, options);
}
WorkPtr TcpBackend::Scatter(const Tensor& output, absl::Span<const Tensor> inputs,
                            const ScatterOptions& options) {
  return collectives_->Scatter(output, inputs, options);
}
WorkPtr TcpBackend::ReduceScatter(const Tensor& output, absl::Span<const Tensor> inputs,
                                  const ReduceScatterOptions& options) {
  return collectives_->ReduceScatter(output, inputs, options);
}
WorkPtr TcpBackend::ReduceScatterTensor(const Tensor& output, const Tensor& input,
                                        const ReduceScatterOptions& options) {
  return collectives_->ReduceScatterTensor(output, input, options);
}
WorkPtr TcpBackend::AllToAll(absl::Span<const Tensor> outputs, absl::Span<const Tensor> inputs,
                             const AllToAllOptions& options) {
  return collectives_->AllToAll(outputs, inputs, options);
}
WorkPtr TcpBackend::AllToAllSingle(const Tensor& output, const Tensor& input,
                                   absl::Span<const int64_t> output_split_sizes,
                                   absl::Span<const int64_t> input_split_sizes,
                                   const AllToAllOptions& options) {
  return collectives_->AllToAllSingle(output, input, output_split_sizes, input_split_sizes,
                                      options);
}
WorkPtr TcpBackend::Barrier(const BarrierOptions& options) {
  return collectives_->Barrier(options);
}
WorkPtr TcpBackend::Send(const Tensor& tensor, int dst_rank, const SendOptions& options) {
  return collectives_->Send(tensor, dst_rank, options);
}
WorkPtr TcpBackend::Recv(const Tensor& tensor, int src_rank, const RecvOptions& options) {
  return collectives_->Recv(tensor, src_rank, options);
}
WorkPtr TcpBackend::RecvAnySource(const Tensor& tensor, const RecvOptions& options) {
  return collectives_->RecvAnySource(tensor, options);
}

namespace {

const BackendRegisterer kRegisterTcp({kTcpBackendName, {DeviceType::kCpu}, &TcpBackend::Create});

}  // namespace
}  // namespace plexus
