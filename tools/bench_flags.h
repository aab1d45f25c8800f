// The benchmark's command line (bench.cc): its flags and their parsing.
#ifndef PLEXUS_TOOLS_BENCH_FLAGS_H_
#define PLEXUS_TOOLS_BENCH_FLAGS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "base/core/device.h"
#include "base/core/dtype.h"
#include "tools/bench_load.h"

namespace plexus::bench {

struct Flags {
  std::vector<std::string> backends;  // Empty: every registered backend serving cpu.
  std::vector<std::string> ops = {"all_reduce"};
  int ranks = 4;                       // The rank count being measured now.
  std::vector<int> rank_counts = {4};  // --ranks=2,4,8: each in turn (a sweep).
  std::vector<int64_t> sizes;
  DType dtype = DType::kFloat32;
  int iters = 20;
  int warmup = 5;
  std::string json;
  std::string mpirun_args = "--mca btl tcp,self --mca btl_tcp_if_include lo";
  std::string launched_output;  // Internal: set in ranks started by mpirun; where they write.
  DeviceType device = DeviceType::kCpu;  // --device=cuda: tensors in CUDA memory.
  std::string plot;  // --plot=FILE.png: draw busbw against size, with the memcpy line.
  bool ranks_given = false;
  // --tls: plexus's own connections (tcp backend, elastic) use TLS 1.3 with throwaway
  // certificates; their rows are labelled "+tls".
  bool tls = false;
  // --blocking: each call blocks (options.blocking, as MPI's calls and torch's async_op=False)
  // instead of issue-then-wait; rows labelled "+blocking".
  bool blocking = false;
  int cuda_devices = 0;          // With --device=cuda: how many the ranks spread over.
  std::optional<LoadSpec> load;  // --load=KIND:N: every case also runs under this load.
  std::string anchor;            // --anchor=mpi-shm|mpi-tcp: Open MPI beside, via run.sh.
  int rounds = 1;                // --rounds=N: every phase N times over, alternating.
};

// Reads argv's --flags into `flags`; InvalidArgument naming an unknown or malformed one. With
// no --backends: every registered backend that serves cpu (nccl's string on --device=cuda).
absl::Status ParseFlags(int argc, char** argv, Flags& flags);

}  // namespace plexus::bench

#endif  // PLEXUS_TOOLS_BENCH_FLAGS_H_
