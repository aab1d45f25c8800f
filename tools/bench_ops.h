// The collectives the benchmark can time: for each, how to set up buffers for a message size,
// issue one operation, check the result against a locally computed reference, and how
// nccl-tests converts algorithm bandwidth to bus bandwidth.
#ifndef PLEXUS_TOOLS_BENCH_OPS_H_
#define PLEXUS_TOOLS_BENCH_OPS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "frontend/dispatch/process_group.h"

namespace plexus::bench {

struct Runner {
  int64_t count = 0;            // Elements per rank in the "size" nccl-tests reports.
  int64_t bytes = 0;            // That size in bytes (after rounding to the world size).
  double bus_factor = 1;        // busbw = algbw * bus_factor.
  std::function<void()> reset;  // Refill inputs with the pattern.
  std::function<absl::StatusOr<WorkPtr>()> issue;  // Start one operation.
  std::function<int64_t()> count_wrong;            // Elements differing from the reference.
  std::shared_ptr<void> buffers;                   // Keeps the buffers alive.
};

// Every collective the benchmark times, in display order (--ops=all).
const std::vector<std::string>& KnownOps();
// Ops asked for by name only: "new_group" (each iteration forms a group).
const std::vector<std::string>& ExtraOps();
// True for an op that moves no payload, timed once rather than at every size.
bool TakesNoSize(const std::string& op);

// Builds the runner for `op` at `bytes` (the nccl-tests "size": the buffer for all_reduce and
// broadcast, the gathered/scattered total for the others), its tensors on `device` (buffers
// come from TypedBuffer's memory: CUDA device memory when the bench runs with --device=cuda).
// `blocking`: collectives are called with options.blocking (point-to-point is unchanged).
absl::StatusOr<Runner> MakeRunner(const std::string& op, ProcessGroup& group, DType dtype,
                                  int64_t bytes, Device device = Device::Cpu(),
                                  bool blocking = false);

}  // namespace plexus::bench

#endif  // PLEXUS_TOOLS_BENCH_OPS_H_
