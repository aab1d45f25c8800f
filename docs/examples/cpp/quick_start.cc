// The README's C++ example: every rank adds rank + 1 into an all_reduce and prints the sum.
#include <plexus/plexus.h>

#include <cstdio>
#include <vector>

int main() {
  auto session = plexus::Session::Join();  // Rank, size and store from the launcher.
  if (!session.ok()) {
    std::fprintf(stderr, "%s\n", session.status().ToString().c_str());
    return 1;
  }
  plexus::ProcessGroup& group = (*session)->group();
  std::vector<float> x(4, group.rank() + 1.0f);
  auto work = group.AllReduce(plexus::Tensor::Flat(x.data(), plexus::DType::kFloat32, x.size()));
  absl::Status done = work.ok() ? (*work)->Wait(absl::Seconds(60)) : work.status();
  std::printf("rank %d: %s %g\n", group.rank(), done.ToString().c_str(), x[0]);
  return done.ok() ? 0 : 1;
}  // ~Session: the ranks leave together.
