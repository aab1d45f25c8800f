// Running a test binary under mpirun: the way MPI tests get their ranks.
#ifndef PLEXUS_TESTS_TESTING_MPIRUN_H_
#define PLEXUS_TESTS_TESTING_MPIRUN_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace plexus::testing {

// The world size mpirun gave this process; 0 when not started by mpirun.
int MpirunWorldSize();

// Runs `mpirun -np <ranks> <program> <args...>` (as root with --allow-run-as-root,
// oversubscribing the cores) and waits up to `timeout`, killing it then. OK when it exits 0.
absl::Status RunUnderMpirun(int ranks, const std::string& program,
                            const std::vector<std::string>& args, absl::Duration timeout);

}  // namespace plexus::testing

#endif  // PLEXUS_TESTS_TESTING_MPIRUN_H_
