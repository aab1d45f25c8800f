// Ranks as forked processes for fault tests: each child runs a body and reports the status it
// ended with through a pipe, so the parent can kill or stop children and still collect what
// every survivor saw.
#ifndef PLEXUS_TESTS_FAULT_FORKED_RANKS_H_
#define PLEXUS_TESTS_FAULT_FORKED_RANKS_H_

#include <sys/types.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "frontend/dispatch/process_group.h"

namespace plexus::testing {

// What one child reported: its final status ("<code> <message>" on the pipe).
struct Outcome {
  absl::StatusCode code = absl::StatusCode::kUnknown;
  std::string message;
};

struct ForkedRanks {
  std::vector<pid_t> pids;
  std::vector<int> fds;  // Read ends of the children's report pipes.
};

// Forks `world_size` children running `body(rank)`; each reports what it returns and exits.
ForkedRanks ForkRanks(int world_size, const std::function<absl::Status(int)>& body);

// Reads every report (returns once each child reported or exited); closes the fds.
std::vector<Outcome> CollectOutcomes(const std::vector<int>& fds);

// Waits for every child.
void ReapRanks(const ForkedRanks& ranks);

// init_process_group for a child: `world_size` ranks through `url`, `backend`, `timeout`.
absl::StatusOr<std::shared_ptr<ProcessGroup>> JoinGroup(const std::string& url, int rank,
                                                        int world_size, absl::Duration timeout,
                                                        const std::string& backend = "cpu:tcp");

// Forks `world_size` ranks (joined through `url` on `backend` with group timeout `timeout`)
// that loop over all_reduces of `floats` float32 elements until one fails, each reporting the
// status it failed with. Returns once every rank has completed one all_reduce, so a signal sent
// then lands mid-collective; `*ready` says how many did (fewer when a rank failed first).
// With `then`, a rank whose all_reduce failed reports then(rank, group, failure) instead.
using AfterFailure =
    std::function<absl::Status(int rank, ProcessGroup& group, const absl::Status& failure)>;
ForkedRanks ForkRanksLoopingAllReduce(int world_size, const std::string& url,
                                      const std::string& backend, int64_t floats,
                                      absl::Duration timeout, int* ready,
                                      const AfterFailure& then = nullptr);

// A test name for a backend string: "cpu:tcp" -> "Tcp", "cpu:gloo" -> "Gloo".
std::string BackendTestName(const std::string& backend);

// How many times a repeated fault scenario runs: $`variable` when set (a longer soak by hand,
// e.g. --test_env=LIFECYCLE_RUNS=20), else `default_runs`, kept small for CI.
int RunsFromEnvironment(const char* variable, int default_runs);

}  // namespace plexus::testing

#endif  // PLEXUS_TESTS_FAULT_FORKED_RANKS_H_
