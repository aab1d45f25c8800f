// Backends defined in tests, for exercising the dispatcher before (and independently of) the
// real backends.
//
// StoreBackend ("storetest"): moves data through the group's Store. Slow but simple and
// correct for broadcast, all_reduce (every unscaled op, with the shared kernels),
// all_gather_into_tensor, barrier, send and recv; every other collective completes with
// Unimplemented saying so. Registered globally by linking this library.
//
// RecordingBackend: does no communication; records which calls reached it.
#ifndef PLEXUS_TESTS_TESTING_STORE_BACKEND_H_
#define PLEXUS_TESTS_TESTING_STORE_BACKEND_H_

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backends/interface/backend.h"

namespace plexus::testing {

inline constexpr char kStoreBackendName[] = "storetest";

class RecordingBackend : public Backend {
 public:
  RecordingBackend(std::string name, BackendCapabilities capabilities)
      : name_(std::move(name)), capabilities_(std::move(capabilities)) {}

  std::vector<std::string> calls() const {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_;
  }

  std::string name() const override { return name_; }
  BackendCapabilities capabilities() const override { return capabilities_; }
  WorkPtr Run(const Collective& call) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (call.kind == CollectiveKind::kAllToAllSingle) {
      last_output_splits_.assign(call.output_splits.begin(), call.output_splits.end());
      last_input_splits_.assign(call.input_splits.begin(), call.input_splits.end());
    }
    calls_.emplace_back(call.name());
    return Work::Finished(absl::OkStatus(), std::string(call.name()));
  }

  std::vector<int64_t> last_output_splits() const {
    std::lock_guard<std::mutex> lock(mu_);
    return last_output_splits_;
  }

 private:
  const std::string name_;
  const BackendCapabilities capabilities_;
  mutable std::mutex mu_;
  std::vector<std::string> calls_;
  std::vector<int64_t> last_output_splits_;
  std::vector<int64_t> last_input_splits_;
};

}  // namespace plexus::testing

#endif  // PLEXUS_TESTS_TESTING_STORE_BACKEND_H_
