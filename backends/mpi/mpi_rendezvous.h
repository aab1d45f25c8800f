// The "mpi://" rendezvous, also used for every other backend when mpirun started the process
// and MASTER_ADDR is not set: rank and world size come from MPI_COMM_WORLD (a rank or world size
// the caller passed must agree); rank 0 serves a TCPStore on every interface on a free port and
// broadcasts, over MPI, the addresses it can be reached at; each rank joins the first that
// answers.
#ifndef PLEXUS_BACKENDS_MPI_MPI_RENDEZVOUS_H_
#define PLEXUS_BACKENDS_MPI_MPI_RENDEZVOUS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/rendezvous/rendezvous.h"

namespace plexus::mpi {

absl::StatusOr<RendezvousResult> MpiRendezvous(int rank, int world_size, absl::Duration timeout);

// The addresses rank 0 offers, best first: $PLEXUS_MPI_STORE_ADDR alone when set; else
// loopback when every rank runs on this host (OMPI_COMM_WORLD_LOCAL_SIZE), then the addresses
// of the interfaces PLEXUS_SOCKET_IFNAME / GLOO_SOCKET_IFNAME allow, or of every interface that
// is neither loopback nor a container bridge.
absl::StatusOr<std::vector<std::string>> MpiStoreCandidates(int world_size, const EnvLookup& env);

}  // namespace plexus::mpi

#endif  // PLEXUS_BACKENDS_MPI_MPI_RENDEZVOUS_H_
