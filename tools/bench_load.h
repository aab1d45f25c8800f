// bench --load=KIND:N: work started beside the measured ranks, as a training job's machine has
// it, and stopped when the measurement ends.
//   spin:N     N processes in busy loops (no memory traffic, no system calls)
//   compute:N  one process with N threads multiplying 256x256 float matrices, as a step's compute
//   comm:N     a second job: N ranks of a cpu:tcp process group all-reducing 64 KiB back to back
#ifndef PLEXUS_TOOLS_BENCH_LOAD_H_
#define PLEXUS_TOOLS_BENCH_LOAD_H_

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace plexus::bench {

struct LoadSpec {
  std::string kind;  // "spin", "compute" or "comm".
  int count = 0;
  std::string label() const;  // "spin:2".
};

// Parses "KIND:N" (N 1..64); InvalidArgument naming what is wrong.
absl::StatusOr<LoadSpec> ParseLoad(const std::string& text);

class Load {
 public:
  // Forks the load's processes (`dir`: a private directory for the comm job's store) and returns
  // once they run: for comm, once its group formed.
  static absl::StatusOr<std::unique_ptr<Load>> Start(const LoadSpec& spec, const std::string& dir);
  // Kills the processes and reaps them.
  ~Load();

  // How much the load got done so far (spin: 2^20 loop turns; compute: 256x256 matrix
  // products; comm: 64 KiB all-reduces), so a run can show that it really competed.
  double WorkDone();

 private:
  explicit Load(LoadSpec spec) : spec_(std::move(spec)) {}
  LoadSpec spec_;
  std::vector<pid_t> pids_;
  std::string store_;  // comm: the second job's FileStore.
  // Shared with the processes: [0] how many are ready, [1 + i] what process or thread i did.
  std::atomic<uint64_t>* counts_ = nullptr;
};

}  // namespace plexus::bench

#endif  // PLEXUS_TOOLS_BENCH_LOAD_H_
