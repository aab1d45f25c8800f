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

WorkPtr CollectivesBackend::Run(const Collective& call) {
  if (WorkPtr native = RunNatively(call)) return native;
  return collectives_->Run(call);
}

}  // namespace plexus
