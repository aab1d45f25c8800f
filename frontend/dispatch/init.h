// InitProcessGroup: forms the world group, as torch.distributed.init_process_group does.
#ifndef PLEXUS_FRONTEND_DISPATCH_INIT_H_
#define PLEXUS_FRONTEND_DISPATCH_INIT_H_

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "base/rendezvous/rendezvous.h"
#include "frontend/dispatch/process_group.h"

namespace plexus {

struct InitOptions {
  std::string backend = "tcp";                    // Backend string, e.g. "cpu:tcp,cuda:nccl".
  std::string init_method = "env://";             // Ignored when `store` is given.
  int rank = -1;                                  // -1: from the URL or the environment.
  int world_size = -1;                            // -1: from the URL or the environment.
  absl::Duration timeout = kDefaultGroupTimeout;  // Rendezvous and the group's default.
  std::shared_ptr<Store> store;                   // Use this store instead of the init method.
  std::string group_name = "world";
  // Shared secret for the store and every backend connection plexus makes (base/auth);
  // unset: PLEXUS_SECRET / PLEXUS_SECRET_FILE; empty: none. Gloo's, MPI's and NCCL's own
  // connections are the vendors' and are not covered.
  std::optional<std::string> secret;
  // Eager initialisation (torch's device_id): every backend connects for this device before
  // InitProcessGroup returns (NCCL's communicator included, otherwise made on first use), and a
  // rank that never arrives fails everyone's init with DeadlineExceeded naming it. Unset: lazy
  // where the backend is lazy.
  std::optional<Device> device_id;
  // How long ranks wait for each other while forming (unset: `timeout`).
  std::optional<absl::Duration> forming_timeout;
};

// Rendezvous, check that each rank joined once, wait for all ranks, then build the backends.
// Collective: every rank of the world calls it once, and it blocks until all have arrived or
// `timeout` passed. Errors name the init method, the rank and how many ranks arrived:
// InvalidArgument for a bad URL, backend string or environment (MASTER_ADDR, RANK, ... as
// torch.distributed reads them), DeadlineExceeded when ranks are missing at the deadline,
// FailedPrecondition when two processes claim one rank, Unauthenticated for a wrong secret.
// Thread-safe (it touches no global state but the backend registry, read-only). The group is
// shared: the last reference going away closes its connections without the departure barrier,
// so call ProcessGroup::Shutdown first for an orderly exit (Session, session.h, does both).
absl::StatusOr<std::shared_ptr<ProcessGroup>> InitProcessGroup(InitOptions options,
                                                               const EnvLookup& env = GetEnv);

}  // namespace plexus

#endif  // PLEXUS_FRONTEND_DISPATCH_INIT_H_
