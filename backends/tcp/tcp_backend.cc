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
  options.address = context.address;
  options.connect_timeout = context.timeout;
  options.describe_signature = DescribeSignature;
  ASSIGN_OR_RETURN(std::unique_ptr<TcpTransport> transport, TcpTransport::Create(options));
  auto collectives = std::make_unique<Collectives>(std::shared_ptr<Transport>(std::move(transport)),
                                                   std::move(table));
  return std::shared_ptr<Backend>(new TcpBackend(std::move(collectives)));
}

BackendCapabilities TcpBackend::capabilities() const { return CpuTransportCapabilities(); }

namespace {

const BackendRegisterer kRegisterTcp({kTcpBackendName, {DeviceType::kCpu}, &TcpBackend::Create});

}  // namespace
}  // namespace plexus
