// Rendezvous: turns an init method ("env://", "tcp://host:port", "file:///path") plus an
// optional rank and world size into a shared Store, as torch.distributed's rendezvous does.
#ifndef PLEXUS_BASE_RENDEZVOUS_RENDEZVOUS_H_
#define PLEXUS_BASE_RENDEZVOUS_RENDEZVOUS_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "base/store/store.h"

namespace plexus {

using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;

// Reads the process environment.
std::optional<std::string> GetEnv(const std::string& name);

struct RendezvousResult {
  std::shared_ptr<Store> store;
  int rank = -1;
  int world_size = -1;
  // The store's host as the ranks dial it (MASTER_ADDR, ...); "" when there is none (file://)
  // or it is unknown. Backends' addresses are chosen by the route to it.
  std::string store_host;
};

// Resolves rank and world size (arguments >= 0 win; then the URL's ?rank=&world_size=; then
// RANK/WORLD_SIZE, OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE, PMI_RANK/PMI_SIZE,
// SLURM_PROCID/SLURM_NTASKS: an mpirun inside a Slurm allocation leaves the allocation's
// SLURM_* variables behind) and connects the store. For env:// and tcp://, rank 0 hosts a
// TCPStore server on the given address and port (a literal address is bound as given; a host
// name is served on every interface, since the name may resolve to loopback on its own host);
// everyone else connects, retrying until `timeout`. env:// takes the address from
// MASTER_ADDR/MASTER_PORT, else from Slurm (launcher_env.h); under torchrun with the agent's
// store (TORCHELASTIC_USE_AGENT_STORE=True) every rank joins that store as a client.
// `secret`, when given, is the TCPStore's shared secret (else PLEXUS_SECRET / _FILE apply).
absl::StatusOr<RendezvousResult> Rendezvous(const std::string& init_method, int rank,
                                            int world_size, absl::Duration timeout,
                                            const EnvLookup& env = GetEnv,
                                            const std::optional<std::string>& secret = {});

// A rendezvous that a launcher provides, selected by its URL scheme ("mpi://", registered by
// the mpi backend): rank, world size and the store come from the launcher. `rank` and
// `world_size` are what the caller passed (-1 when not given), for the handler to check.
using RendezvousScheme = std::function<absl::StatusOr<RendezvousResult>(int rank, int world_size,
                                                                        absl::Duration timeout)>;

// AlreadyExists if the scheme is taken (env, tcp and file are built in).
absl::Status RegisterRendezvousScheme(const std::string& scheme, RendezvousScheme handler);
// Whether a launcher scheme ("mpi") is registered.
bool HasRendezvousScheme(const std::string& scheme);

// Blocks until `size` ranks have called it with the same `name`; reusable (each round of
// `size` arrivals releases one generation). DeadlineExceeded says how many arrived.
absl::Status StoreBarrier(Store& store, absl::string_view name, int rank, int size,
                          absl::Duration timeout);

}  // namespace plexus

#endif  // PLEXUS_BASE_RENDEZVOUS_RENDEZVOUS_H_
