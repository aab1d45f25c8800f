// What launchers tell their processes through the environment, when MASTER_ADDR is not set:
// Slurm's node list (the first node hosts the store, on a port derived from the job), and
// whether an mpirun (Open MPI) or torchrun agent started this process.
#ifndef PLEXUS_BASE_RENDEZVOUS_LAUNCHER_ENV_H_
#define PLEXUS_BASE_RENDEZVOUS_LAUNCHER_ENV_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "base/rendezvous/rendezvous.h"

namespace plexus {

// Expands Slurm's compressed host lists: "node[01-03,7],gpu-a[1-2]-ib" ->
// node01 node02 node03 node7 gpu-a1-ib gpu-a2-ib (zero padding kept; several bracket groups in
// one name multiply out). InvalidArgument names the list on bad syntax.
absl::StatusOr<std::vector<std::string>> ExpandSlurmNodelist(absl::string_view list);

// The port a Slurm job step's ranks agree on without talking: 15000 + (16 * job id + step id)
// mod 20000, so concurrent steps of one job differ.
int SlurmRendezvousPort(int64_t job_id, int64_t step_id);

struct StoreAddress {
  std::string host;
  int port = 0;
  std::string source;  // "MASTER_ADDR/MASTER_PORT" or "Slurm (SLURM_STEP_NODELIST=...)".
};

// MASTER_ADDR and MASTER_PORT, or, in a Slurm job step without them, the first node of
// SLURM_STEP_NODELIST (else SLURM_JOB_NODELIST, SLURM_NODELIST) and SlurmRendezvousPort
// (MASTER_ADDR or MASTER_PORT alone override their half). InvalidArgument otherwise, saying
// what to set.
absl::StatusOr<StoreAddress> EnvStoreAddress(const EnvLookup& env);

// True when mpirun (Open MPI: OMPI_COMM_WORLD_SIZE) started this process.
bool UnderMpirun(const EnvLookup& env);

// torchrun's agent serves its own store on MASTER_PORT (TORCHELASTIC_USE_AGENT_STORE=True);
// returns the namespace (a PrefixStore prefix) its workers use for this restart
// ("plexus/attempt_<n>").
std::optional<std::string> TorchrunAgentStorePrefix(const EnvLookup& env);

}  // namespace plexus

#endif  // PLEXUS_BASE_RENDEZVOUS_LAUNCHER_ENV_H_
