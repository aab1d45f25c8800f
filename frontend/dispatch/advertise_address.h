// Which address a rank's backends listen on and tell their peers to dial. In order:
//  1. PLEXUS_TCP_ADDR, taken as given.
//  2. PLEXUS_SOCKET_IFNAME (NCCL's syntax, see base/net/interfaces.h), else torch's
//     GLOO_SOCKET_IFNAME (exact names): an address of a matching interface, the one on the route
//     to the store when it matches.
//  3. The local address of the kernel's route to the store's host (MASTER_ADDR), when that is
//     not loopback.
//  4. Otherwise (the store is on loopback, or its host is unknown, as with file:// or a store
//     passed in): loopback when every rank of the group runs on this host; else the route to a
//     rank on another host; else the first interface that is neither loopback nor a container
//     bridge. A rank left with loopback while other ranks are elsewhere gets FailedPrecondition
//     naming the ranks, the interfaces it has and the variables above.
// Steps 1-4 run on every rank; the decision between loopback and a real address is made
// together, through the group's store (each rank publishes its host identity and first choice),
// so the call is collective.
#ifndef PLEXUS_FRONTEND_DISPATCH_ADVERTISE_ADDRESS_H_
#define PLEXUS_FRONTEND_DISPATCH_ADVERTISE_ADDRESS_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/rendezvous/rendezvous.h"
#include "base/store/store.h"

namespace plexus {

struct AdvertiseAddressOptions {
  int rank = 0;
  int size = 1;
  std::string store_host;  // The rendezvous host as the user named it; "" when unknown.
  absl::Duration timeout = absl::Minutes(5);
};

// Collective: every rank of the group calls it with the same store. Logs the choice and the
// reason at debug level (PLEXUS_LOG_LEVEL=debug).
absl::StatusOr<std::string> ResolveAdvertiseAddress(Store& store,
                                                    const AdvertiseAddressOptions& options,
                                                    const EnvLookup& env = GetEnv);

}  // namespace plexus

#endif  // PLEXUS_FRONTEND_DISPATCH_ADVERTISE_ADDRESS_H_
