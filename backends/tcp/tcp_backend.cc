#include "backends/tcp/tcp_backend.h"

#include <utility>

#include "frontend/core/status_macros.h"
#include "frontend/dispatch/backend_registry.h"
#include "frontend/transport/transport_registry.h"

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

// The bare transport, for the elastic communicator.
const TransportRegisterer kRegisterTcpTransport(
    kTcpBackendName, [](const TransportSetup& setup) -> absl::StatusOr<std::unique_ptr<Transport>> {
      TcpTransportOptions options;
      options.store = setup.store;
      options.rank = setup.rank;
      options.size = setup.size;
      options.group_name = setup.group_name;
      options.address = setup.address;
      options.connect_timeout = setup.connect_timeout;
      options.describe_signature = setup.describe_signature;
      options.cancelled = setup.cancelled;
      ASSIGN_OR_RETURN(std::unique_ptr<TcpTransport> transport, TcpTransport::Create(options));
      return std::unique_ptr<Transport>(std::move(transport));
    });

}  // namespace
}  // namespace plexus
