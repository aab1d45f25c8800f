#include "backends/tcp/tcp_backend.h"

#include <utility>

#include "backends/interface/backend_registry.h"
#include "base/core/status_macros.h"
#include "base/transport/transport_registry.h"

namespace plexus::tcp {

using algorithms::AlgorithmTable;
using algorithms::DescribeSignature;
using executor::Collectives;

namespace {

// One TcpTransport from the generic setup: the backend's and the elastic communicator's.
absl::StatusOr<std::unique_ptr<Transport>> CreateTcpTransport(const TransportSetup& setup) {
  TcpTransportOptions options;
  options.store = setup.store;
  options.rank = setup.rank;
  options.size = setup.size;
  options.group_name = setup.group_name;
  options.address = setup.address;
  options.connect_timeout = setup.connect_timeout;
  options.describe_signature = setup.describe_signature;
  options.cancelled = setup.cancelled;
  options.secret = setup.secret;
  options.tls = setup.tls;
  ASSIGN_OR_RETURN(std::unique_ptr<TcpTransport> transport, TcpTransport::Create(options));
  return std::unique_ptr<Transport>(std::move(transport));
}

}  // namespace

absl::StatusOr<std::shared_ptr<Backend>> TcpBackend::Create(const BackendContext& context) {
  ASSIGN_OR_RETURN(AlgorithmTable table, AlgorithmTable::FromEnvironment());
  TransportSetup setup;
  setup.store = context.store;
  setup.rank = context.rank;
  setup.size = context.size;
  setup.group_name = context.group_name;
  setup.address = context.address;
  setup.connect_timeout = context.timeout;
  setup.describe_signature = DescribeSignature;
  setup.secret = context.secret;
  ASSIGN_OR_RETURN(std::unique_ptr<Transport> transport, CreateTcpTransport(setup));
  auto collectives = std::make_unique<Collectives>(std::shared_ptr<Transport>(std::move(transport)),
                                                   std::move(table));
  return std::shared_ptr<Backend>(new TcpBackend(std::move(collectives)));
}

BackendCapabilities TcpBackend::capabilities() const {
  BackendCapabilities capabilities = CpuTransportCapabilities();
  capabilities.may_leave_after_failure = true;  // A failure aborts the operation everywhere.
  return capabilities;
}

namespace {

const BackendRegisterer kRegisterTcp({kTcpBackendName, {DeviceType::kCpu}, &TcpBackend::Create});

// The bare transport, for the elastic communicator.
const TransportRegisterer kRegisterTcpTransport(kTcpBackendName, &CreateTcpTransport);

}  // namespace
}  // namespace plexus::tcp
