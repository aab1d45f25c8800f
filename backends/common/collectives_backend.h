// CollectivesBackend: a Backend whose every collective and point-to-point call
// runs through algorithms/ (executor::Collectives) over one Transport. The tcp backend is
// exactly this; the gloo and mpi backends derive from it and take, in RunNatively, the calls
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
  // What the derived backend runs natively (RunNatively), the rest with algorithms/.
  WorkPtr Run(const Collective& call) override;
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

  // The derived backend's own way to run `call`, or null to run it with algorithms/.
  virtual WorkPtr RunNatively(const Collective& /*call*/) { return nullptr; }

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
