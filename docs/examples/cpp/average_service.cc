// A small plexus service: every rank holds a parameter vector, changes it each step, and the
// ranks average it with all_reduce; each rank then serves (prints) the vector's checksum, the
// same on every rank. Launch it like any torch.distributed job (torchrun, mpirun, Slurm or
// MASTER_ADDR/MASTER_PORT/RANK/WORLD_SIZE); see README.md.
#include <plexus/plexus.h>

#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <vector>

int main(int argc, char** argv) {
  const int steps = argc > 1 ? std::atoi(argv[1]) : 10;
  auto session = plexus::Session::Join();
  if (!session.ok()) {
    std::fprintf(stderr, "average_service: %s\n", session.status().ToString().c_str());
    return 1;
  }
  plexus::ProcessGroup& group = (*session)->group();
  const int rank = group.rank();
  std::vector<float> parameters(1024, static_cast<float>(rank + 1));
  plexus::AllReduceOptions average;
  average.op = plexus::ReduceOpKind::kAvg;
  average.timeout = absl::Seconds(60);
  for (int step = 0; step <= steps; ++step) {
    if (step > 0) {
      for (float& p : parameters) p += static_cast<float>(rank);  // This rank's update.
    }
    auto work = group.AllReduce(
        plexus::Tensor::Flat(parameters.data(), plexus::DType::kFloat32, parameters.size()),
        average);
    absl::Status done = work.ok() ? (*work)->Wait(absl::Seconds(60)) : work.status();
    if (!done.ok()) {
      std::fprintf(stderr, "rank %d: step %d: %s\n", rank, step, done.ToString().c_str());
      return 1;
    }
  }
  const double checksum = std::accumulate(parameters.begin(), parameters.end(), 0.0);
  std::printf("rank %d of %d: checksum %.1f after %d steps\n", rank, group.size(), checksum, steps);
  return 0;  // The session leaves with every rank (a deadline-bounded barrier).
}
