// EpochMesh: the data connections of a peer group's current epoch. Every member builds them on
// its first operation of an epoch (a collective step through the master's store), keeps them
// for the epoch's later operations, and closes them when a later epoch asks for its own. The
// owner (Communicator) decides whether an epoch still stands; EpochMesh asks it before and after
// building, so connections finished for an epoch that ended meanwhile are closed, not kept.
//
// Locking: the held mesh is guarded by the owner's mutex (given at construction); Get takes it
// around its checks and calls Check with it held. Builds run one at a time under EpochMesh's own
// build lock, which comes before the owner's mutex (LockBuilds for callers that need both).
#ifndef PLEXUS_FRONTEND_ELASTIC_EPOCH_MESH_H_
#define PLEXUS_FRONTEND_ELASTIC_EPOCH_MESH_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "base/core/mutex.h"
#include "base/store/store.h"
#include "base/transport/transport.h"
#include "base/transport/transport_registry.h"

namespace plexus::elastic {

class EpochMesh {
 public:
  struct Members {
    std::vector<int64_t> ring;  // Peer ids in ring order: a peer's rank is its position.
    int64_t me = 0;             // This peer's id.
    std::shared_ptr<Store> store;
    std::string address;  // Where this peer listens for the others.
  };
  // Called with the owner's mutex held: the members of `epoch` while it is the group's current
  // epoch, else why not (Unavailable for an epoch that is over, the loss of the master...).
  using Check = std::function<absl::StatusOr<Members>(int64_t epoch)>;

  // `transport`: the registered transport to build; `base`: what every epoch's setup shares
  // (connect timeout, secret, TLS, describe_signature).
  EpochMesh(Mutex& owner_mu, std::string transport, int64_t group, TransportSetup base,
            Check check);

  // The connections of `epoch` (null for a group of one), built if this is its first use here.
  // Unavailable when the epoch is over (before or while connecting) or this peer is not in its
  // ring; a transport that fails to connect carries Result::kRankConnectionFailed.
  absl::StatusOr<std::shared_ptr<Transport>> Get(int64_t epoch);

  // With the owner's mutex held. The held mesh if it is not `epoch`'s (to abort when the group
  // moved on), else null.
  std::shared_ptr<Transport> StaleAt(int64_t epoch) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(owner_mu_);
  std::shared_ptr<Transport> current() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(owner_mu_) {
    return mesh_;
  }
  // Forgets the held mesh and returns it (to close outside the lock).
  std::shared_ptr<Transport> Release() ABSL_EXCLUSIVE_LOCKS_REQUIRED(owner_mu_);
  // Members of the held mesh on this peer's host (shared-memory peers); 0 without one.
  int SharedMemoryPeers() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(owner_mu_);
  // The owner's mutex, under the owner's own name, is held (for the analysis).
  void OwnerHeld() const ABSL_ASSERT_EXCLUSIVE_LOCK(owner_mu_) {}

  // Held while no build may run (a reconnect clearing what an old connection built).
  Mutex& build_mu() ABSL_LOCK_RETURNED(build_mu_) { return build_mu_; }

 private:
  Mutex& owner_mu_;
  const std::string transport_;
  const int64_t group_;
  const TransportSetup base_;
  const Check check_;
  Mutex build_mu_;
  std::shared_ptr<Transport> mesh_ ABSL_GUARDED_BY(owner_mu_);
  int64_t epoch_ ABSL_GUARDED_BY(owner_mu_) = -1;  // The epoch mesh_ belongs to.
};

}  // namespace plexus::elastic

#endif  // PLEXUS_FRONTEND_ELASTIC_EPOCH_MESH_H_
