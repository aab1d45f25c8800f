// The conformance suite, run unchanged against every backend string: each test forks a world
// of ranks (sizes 1, 2, 3, 4 and 8) that meet through a FileStore in $TEST_TMPDIR, runs one
// family of collectives over every dtype, valid op and awkward count, and checks each result
// against a reference computed locally (reference.h).
#ifndef PLEXUS_TESTS_CONFORMANCE_CONFORMANCE_H_
#define PLEXUS_TESTS_CONFORMANCE_CONFORMANCE_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "frontend/dispatch/process_group.h"

namespace plexus::conformance {

// The backend string under test (set by the test's main from --backend=).
const std::string& BackendUnderTest();
void SetBackendUnderTest(std::string backend);

// The device type of the suite's tensors (--device=cpu|cuda; cpu by default). On cuda each
// rank uses device rank % (devices visible) and its buffers are CUDA device memory.
DeviceType DeviceTypeUnderTest();
void SetDeviceTypeUnderTest(DeviceType type);
// This rank's device.
Device DeviceUnderTest();

// --ranks_per_host=N: forked ranks r and s count as one host when r / N == s / N (through
// PLEXUS_HOST_ID), so groups span "hosts" on one machine. 0 (default): one real host.
int RanksPerHost();
void SetRanksPerHost(int ranks);
// A flat tensor of `count` elements at `data` on the device under test.
inline Tensor DeviceTensor(void* data, DType dtype, int64_t count) {
  return Tensor::Flat(data, dtype, count, DeviceUnderTest());
}
// Whether the backend serving the device under test receives from any source.
bool ReceivesFromAnySource(const ProcessGroup& group);

// Collects failures inside a rank.
class Checker {
 public:
  explicit Checker(int rank) : rank_(rank) {}
  template <typename... Args>
  void Fail(const Args&... args) {
    failures_.push_back(absl::StrCat("rank ", rank_, ": ", args...));
  }
  // Waits for an issued collective; records a failure if either step failed.
  bool Ran(const std::string& what, absl::StatusOr<WorkPtr> work);
  int Report() const;  // Prints the failures to stderr; returns the exit code.
  const std::vector<std::string>& failures() const { return failures_; }

 private:
  int rank_;
  std::vector<std::string> failures_;
};

// Forks `world` ranks, forms the group, and runs `body` in each; fails the test if any rank
// reports a failure or does not finish in time.
void RunWorld(int world, const std::function<void(ProcessGroup&, Checker&)>& body);

// Runs `checks` once per algorithm the catalog has for `collective` ("all_gather") or its
// "_same_host" and "_multi_host" ranges, each time on a new group of every rank made with that
// algorithm forced for every size in every set of ranges that has it (PLEXUS_ALGO),
// so a row added to algorithms/algorithm_catalog.cc is checked without a test of its own. A
// collective with one schedule is skipped: the suite's default run is that schedule's run.
// Backends that run the collective natively never reach the rows; the checks still pass.
void WithEveryAlgorithm(ProcessGroup& group, Checker& check, const std::string& collective,
                        const std::function<void(ProcessGroup&, Checker&)>& checks);

// Counts used for every collective: empty, one element, not divisible by any world size > 1,
// and larger than a segment.
inline const std::vector<int64_t>& Counts() {
  static const std::vector<int64_t> counts = {0, 1, 7, 1001, 70001};
  return counts;
}

// World sizes the suite runs at: 1, 2, 3, 4 and 8, or those up to --largest_world=N (or
// $CONFORMANCE_LARGEST_WORLD), which must be set before gtest registers the suites.
const std::vector<int>& WorldSizes();
void SetLargestWorld(int largest);

}  // namespace plexus::conformance

#endif  // PLEXUS_TESTS_CONFORMANCE_CONFORMANCE_H_
