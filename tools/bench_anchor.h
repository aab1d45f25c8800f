// bench --anchor=mpi-shm|mpi-tcp: Open MPI's MPI_Allreduce measured by the reference script
// (../shared/anchors/run.sh, which builds and runs ../shared/anchors/mpi_allreduce.c) in the same
// run, at the same rank counts and sizes, quiet and under the same --load, as rows of the table.
#ifndef PLEXUS_TOOLS_BENCH_ANCHOR_H_
#define PLEXUS_TOOLS_BENCH_ANCHOR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace plexus::bench {

struct AnchorRow {
  int64_t bytes = 0;
  double time_us = 0, algbw = 0, busbw = 0;
};

// The reference script: PLEXUS_ANCHORS (a directory) if set, else ../shared/anchors beside the
// workspace (under `bazel run`) or the current directory. NotFound, saying where it looked.
absl::StatusOr<std::string> FindAnchorScript();

// Runs `script KIND RANKS BYTES...` and parses its rows (float32 SUM all-reduce, in place).
absl::StatusOr<std::vector<AnchorRow>> RunAnchor(const std::string& script, const std::string& kind,
                                                 int ranks, const std::vector<int64_t>& sizes);

}  // namespace plexus::bench

#endif  // PLEXUS_TOOLS_BENCH_ANCHOR_H_
